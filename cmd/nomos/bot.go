package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for the crypto store
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.mau.fi/util/dbutil"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/tasks"
	"github.com/nomoshq/nomos/web"
)

func runBot(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("bot", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := env.config("bot")
	if err != nil {
		return err
	}
	logger := env.logger
	l, err := openLifecycle(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer l.Close()

	tokens, err := cfg.MCP.serverTokens()
	if err != nil {
		return err
	}
	if cfg.MCP.Token != "" {
		logger.Warn("mcp.token is deprecated: it is accepted as a token named mcp with scope request; move it to mcp.tokens")
	}
	tools, err := mcpserver.New(mcpserver.Config{
		Store: l.store, Executions: l.execs, OpsRoomID: cfg.Matrix.OpsRoom, Tokens: tokens,
		RequestsPerMinute: cfg.MCP.RequestRate, RequestBurst: cfg.MCP.RequestBurst, HTTPAllow: cfg.LLM.HTTPAllow,
		MaxResultBytes: cfg.LLM.MaxToolResultBytes, Version: version, Metrics: l.metrics, Logger: logger.With("component", "mcp"),
	})
	if err != nil {
		return err
	}
	var ag *agent.Agent
	if cfg.LLM.Model != "" {
		client, err := tools.InProcessClient(ctx)
		if err != nil {
			return fmt.Errorf("mcp in-process client: %w", err)
		}
		defer client.Close()
		ag, err = agent.New(agent.Config{
			Store: l.store, Tools: client,
			BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model, Headers: cfg.LLM.Headers,
			MaxIterations: cfg.LLM.MaxIterations, MaxTokens: cfg.LLM.MaxTokens, MaxToolResultBytes: cfg.LLM.MaxToolResultBytes,
			Metrics: l.metrics, Logger: logger.With("component", "agent"),
		})
		if err != nil {
			return err
		}
	} else {
		logger.Info("no llm.model configured: the bot answers with its command grammar and runbooks only")
	}

	cryptoDB, err := dbutil.NewWithDialect(cfg.Database.URL, "pgx")
	if err != nil {
		return fmt.Errorf("crypto store: %w", err)
	}
	defer cryptoDB.Close()
	b, err := bot.New(bot.Config{
		HomeserverURL: cfg.Matrix.HomeserverURL, UserID: cfg.Matrix.UserID,
		Password: cfg.Matrix.Password, AccessToken: cfg.Matrix.AccessToken,
		Operators: cfg.Matrix.Operators, Readers: cfg.Matrix.Readers, Store: l.store, Executions: l.execs,
		CryptoDB: cryptoDB, PickleKey: []byte(cfg.Matrix.PickleKey), RecoveryKeyFile: cfg.Matrix.RecoveryKeyFile,
		Redis: l.redis, StatusURL: cmp.Or(cfg.Web.PublicURL, publicURL(cfg.Web.Listen)), Agent: ag, RunChecks: cfg.Checks.Enabled, RunDiscovery: cfg.Inventory.Interval > 0,
		AlertRoom: cfg.Matrix.OpsRoom, MuteFor: cfg.Alerts.MuteFor, Metrics: l.metrics,
		Logger: logger.With("component", "bot"),

		AllowUnverifiedDevices: !cfg.Approvals.RequireVerifiedDevice,
	})
	if err != nil {
		return err
	}

	webAuth, err := cfg.Web.authenticator()
	if err != nil {
		return err
	}
	rc := l.redis.MakeRedisClient().(redis.UniversalClient)
	defer rc.Close()
	inspector := asynq.NewInspector(l.redis)
	defer inspector.Close()
	// /metrics: the page's own figures from the database, the process's
	// from its parts, and the Go runtime's.
	reg := prometheus.NewRegistry()
	if err := reg.Register(l.metrics); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	status, err := web.New(web.Config{
		Store: l.store, Logger: logger.With("component", "web"), Auth: webAuth, Operators: cfg.Matrix.Operators,
		Ready: []web.ReadyCheck{
			{Name: "postgres", Check: l.store.Ping},
			{Name: "redis", Check: func(ctx context.Context) error { return rc.Ping(ctx).Err() }},
			{Name: "homeserver_sync", Check: syncReady(b)},
		},
		Queues: inspector, QueueNames: []string{tasks.OrderQueue(tasks.DefaultSite), tasks.ProbeQueue(tasks.DefaultSite), tasks.QueueResults},
		Registry: reg,
	})
	if err != nil {
		return err
	}
	go status.Run(ctx)
	mux := http.NewServeMux()
	mux.Handle("/", status)
	// /mcp has its own bearer tokens, in the same Authorization header
	// basic auth would use, so web.auth does not cover it.
	if tools.HTTPEnabled() {
		mux.Handle("/mcp", tools.HTTPHandler())
	}
	// Alertmanager's webhook has its own bearer token too; off without it.
	if cfg.Alerts.WebhookToken != "" {
		hook, err := bot.NewAlertmanagerHook(bot.AlertmanagerHookConfig{Store: l.store, Token: cfg.Alerts.WebhookToken,
			Logger: logger.With("component", "alertmanager_hook")})
		if err != nil {
			return err
		}
		mux.Handle(bot.AlertmanagerPath, hook)
	}
	ln, err := web.Listen(cfg.Web.Listen, webAuth)
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("status page and MCP endpoint stopped", "err", err)
		}
	}()
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(shutdownCtx)
	}()
	logger.Info("status page listening", "addr", ln.Addr().String(), "web_auth", webAuth != nil,
		"trusted_proxies", len(cfg.Web.TrustedProxies),
		"mcp", tools.HTTPEnabled(), "mcp_tokens", len(tokens), "alertmanager_hook", cfg.Alerts.WebhookToken != "", "http_allow", len(cfg.LLM.HTTPAllow))

	return b.Run(ctx)
}

// syncReady is /readyz's homeserver_sync check: "unknown" while the bot
// logs in and waits for its first /sync, then whether /sync still answers.
func syncReady(b *bot.Bot) func(context.Context) error {
	return func(ctx context.Context) error {
		err := b.SyncHealth(ctx)
		if errors.Is(err, bot.ErrNotSynced) {
			return web.ErrUnknown
		}
		return err
	}
}

// publicURL is the status page's address for links in cards.
func publicURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
