package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/internal/supervisor"
	"github.com/nomoshq/nomos/tasks"
)

func runActuator(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("actuator", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var pin pinOptions
	fs.StringVar(&pin.host, "pin", "", "show the SSH host key of `host[:port]` (the address in the seed) and, once you confirm its fingerprint, pin it in actuator.known_hosts_file; then exit")
	fs.BoolVar(&pin.yes, "yes", false, "with -pin: pin without asking, for when you have compared the fingerprint already")
	fs.StringVar(&pin.knownHosts, "known-hosts", "", "with -pin: the known_hosts `file` to pin in, instead of actuator.known_hosts_file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the host to pin goes after -pin", fs.Arg(0))
	}
	if pin.host != "" {
		return runPin(ctx, env, pin)
	}
	if pin.yes || pin.knownHosts != "" {
		return errors.New("-yes and -known-hosts go with -pin HOST")
	}
	cfg, err := env.config("actuator")
	if err != nil {
		return err
	}
	verifyKey, err := tasks.LoadVerifyKey(cfg.Orders.VerifyKeyFile)
	if err != nil {
		return fmt.Errorf("orders.verify_key_file: %w", err)
	}
	var previousKey ed25519.PublicKey
	if cfg.Orders.PreviousVerifyKeyFile != "" {
		if previousKey, err = tasks.LoadVerifyKey(cfg.Orders.PreviousVerifyKeyFile); err != nil {
			return fmt.Errorf("orders.previous_verify_key_file: %w", err)
		}
		env.logger.Info("key rotation: orders signed with the previous order key are accepted too",
			"previous_verify_key_file", cfg.Orders.PreviousVerifyKeyFile)
	}
	reportKey, err := tasks.LoadSigningKey(cfg.Reports.SigningKeyFile)
	if err != nil {
		return fmt.Errorf("reports.signing_key_file: %w", err)
	}
	signer, err := loadSSHKey(cfg.Actuator.SSHKeyFile)
	if err != nil {
		return err
	}
	a, err := actuator.New(actuator.Config{
		RedisURL:          cfg.Redis.URL,
		VerifyKey:         verifyKey,
		PreviousVerifyKey: previousKey,
		ReportSigningKey:  reportKey,
		Name:              cfg.Actuator.Name,
		Site:              cfg.Actuator.Site,
		SSHSigner:         signer,
		KnownHostsFile:    cfg.Actuator.KnownHostsFile,
		SSHUser:           cfg.Actuator.SSHUser,
		JournalPath:       cfg.Actuator.JournalFile,
		Logger:            env.logger,
	})
	if err != nil {
		return err
	}
	redisOpt, err := tasks.ParseRedisURL(cfg.Redis.URL)
	if err != nil {
		return fmt.Errorf("redis.url: %w", err)
	}
	inspector := asynq.NewInspector(redisOpt)
	defer inspector.Close()
	var sup *supervisor.Supervisor
	var svcs []supervisor.Service
	if cfg.Actuator.MetricsListen != "" {
		var stop func()
		svcs = append(svcs, supervisor.Service{Name: "metrics", Start: func(context.Context) (err error) {
			stop, err = serveMetrics(metricsAddr(cfg.Actuator.MetricsListen), a.Collector(), sup.Healthy, env.logger)
			return err
		}, Stop: func() { stop() }})
	}
	svcs = append(svcs, supervisor.Service{Name: "actuator", Run: a.Run,
		Health: actuatorHealth(inspector, tasks.OrderQueue(cfg.Actuator.Site), cfg.Actuator.JournalFile)})
	sup = supervisor.New(env.logger, svcs...)
	return runSupervised(ctx, env.logger, sup)
}

// actuatorHealth is the actuator's own health: its consumer of the order
// queue is registered in Redis (asynq's server heartbeat, which expires
// within seconds of the actuator losing Redis), and its journal can still
// be opened for writing. It writes nothing to either.
func actuatorHealth(inspector *asynq.Inspector, orderQueue, journal string) func(context.Context) error {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return func(context.Context) error {
		servers, err := inspector.Servers()
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		consuming := slices.ContainsFunc(servers, func(s *asynq.ServerInfo) bool {
			_, ok := s.Queues[orderQueue]
			return s.Host == host && s.PID == pid && s.Status == "active" && ok
		})
		if !consuming {
			return fmt.Errorf("redis: no consumer of %s registered for this process", orderQueue)
		}
		f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		return f.Close()
	}
}

// metricsAddr is where actuator.metrics_listen serves: a port alone means
// loopback, so the actuator's figures leave the machine only when an
// address says so.
func metricsAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "" {
		return listen
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// serveMetrics serves c, with the Go runtime's figures and the build's, at GET /metrics
// on addr until stop is called.
//
//nolint:contextcheck // stop shuts the server down after the role's context has ended, bounded by its own timeout.
func serveMetrics(addr string, c prometheus.Collector, healthy func(context.Context) error, logger *slog.Logger) (stop func(), err error) {
	reg, err := metricsRegistry(c)
	if err != nil {
		return nil, fmt.Errorf("actuator.metrics_listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("actuator.metrics_listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// What compose's health check asks: 200 while every service is running
	// and healthy, 503 with what is not.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := healthy(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("actuator metrics stopped", "err", err)
		}
	}()
	logger.Info("actuator metrics listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// loadSSHKey reads the actuator's SSH private key, which must not need a
// passphrase: the actuator runs unattended.
func loadSSHKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("actuator.ssh_key_file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("actuator.ssh_key_file %s: the key is protected by a passphrase; the actuator needs a key it can use unattended", path)
	}
	if err != nil {
		return nil, fmt.Errorf("actuator.ssh_key_file %s: %w", path, err)
	}
	return signer, nil
}
