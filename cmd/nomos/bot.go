package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for the crypto store
	"github.com/redis/go-redis/v9"
	"go.mau.fi/util/dbutil"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/leader"
	"github.com/nomoshq/nomos/internal/supervisor"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
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
	tools, ntokens, err := newTools(cfg, l, logger)
	if err != nil {
		return err
	}
	ag, closeAgent, err := newAgent(ctx, cfg, l, tools, logger)
	if err != nil {
		return err
	}
	defer closeAgent()
	briefs, err := cfg.Report.Schedule()
	if err != nil {
		return err
	}
	schedules, windows, err := cfg.Watch()
	if err != nil {
		return err
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
		OpsRoom: cfg.Matrix.OpsRoom, Rooms: cfg.Matrix.Rooms, OwnPath: cfg.Matrix.ServedBy, MuteFor: cfg.Alerts.MuteFor, Metrics: l.metrics, Briefs: &briefs, BackupMaxAge: cfg.Report.BackupMaxAge,
		Schedules: schedules, Windows: windows,
		SessionRetention: cfg.Agent.SessionRetention,
		Logger:           logger.With("component", "bot"),

		AllowUnverifiedDevices: !cfg.Approvals.RequireVerifiedDevice,
	})
	if err != nil {
		return err
	}
	// Only the bot that holds the leader lock syncs, posts and dispatches;
	// a second one stands by and serves the status page and /mcp.
	botSvcs := supervisor.New(logger.With("component", "bot"), b.Services()...)
	elector, err := leader.New(leader.Config{Lock: store.NewLeaderLock(cfg.Database.URL, store.LeaderLockBot), Logger: logger.With("component", "leader")})
	if err != nil {
		return err
	}
	lastSync := func() time.Time {
		if !elector.Leading() {
			return time.Time{}
		}
		return b.LastSync()
	}
	front, err := newFront(cfg, l, tools, ntokens, leaderChecks(elector, botSvcs), lastSync, logger)
	if err != nil {
		return err
	}
	defer front.close()
	svcs := append(front.services(), supervisor.Service{Name: "bot", Run: func(ctx context.Context) error { return elector.Run(ctx, botSvcs.Run) }})
	return runSupervised(ctx, logger, supervisor.New(logger, svcs...))
}

// newTools builds the MCP tools the agent and /mcp serve.
func newTools(cfg *config.Config, l *lifecycle, logger *slog.Logger) (*mcpserver.Server, int, error) {
	tokens, err := cfg.MCP.ServerTokens()
	if err != nil {
		return nil, 0, err
	}
	if cfg.MCP.Token != "" {
		logger.Warn("mcp.token is deprecated: it is accepted as a token named mcp with scope read; move it to mcp.tokens, with for: naming whom it is for")
	}
	for _, name := range cfg.MCP.ReadOnlyRequestTokens() {
		logger.Warn("an MCP token with scope request names nobody it is for, so it may only read; add for: with the Matrix user it was made for",
			"token", name)
	}
	tools, err := mcpserver.New(mcpserver.Config{
		Store: l.store, Executions: l.execs, OpsRoomID: cfg.Matrix.OpsRoom, Rooms: cfg.Matrix.Rooms, Tokens: tokens,
		RequestsPerMinute: cfg.MCP.RequestRate, RequestBurst: cfg.MCP.RequestBurst, HTTPAllow: cfg.LLM.HTTPAllow,
		MaxResultBytes: cfg.LLM.MaxToolResultBytes, Version: version, Metrics: l.metrics, Logger: logger.With("component", "mcp"),
	})
	return tools, len(tokens), err
}

// newAgent builds the LLM agent on the in-process MCP client; without
// llm.model there is none, and close does nothing.
func newAgent(ctx context.Context, cfg *config.Config, l *lifecycle, tools *mcpserver.Server, logger *slog.Logger) (*agent.Agent, func(), error) {
	if cfg.LLM.Model == "" {
		logger.Info("no llm.model configured: the bot answers with its command grammar and runbooks only")
		return nil, func() {}, nil
	}
	client, err := tools.InProcessClient(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp in-process client: %w", err)
	}
	ag, err := agent.New(agent.Config{
		Store: l.store, Tools: client,
		BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model, Headers: cfg.LLM.Headers,
		MaxIterations: cfg.LLM.MaxIterations, MaxTokens: cfg.LLM.MaxTokens, MaxToolResultBytes: cfg.LLM.MaxToolResultBytes,
		Metrics: l.metrics, Logger: logger.With("component", "agent"),
	})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return ag, func() { client.Close() }, nil
}

// front is what the bot process serves over HTTP: the status page with
// /metrics, /healthz and /readyz, /mcp, and Alertmanager's webhook.
type front struct {
	status    *web.Server
	handler   http.Handler
	rc        redis.UniversalClient
	inspector *asynq.Inspector
	listen    string
	auth      web.Authenticator
	summary   []any
	logger    *slog.Logger
	srv       *http.Server
}

func newFront(cfg *config.Config, l *lifecycle, tools *mcpserver.Server, ntokens int, botChecks []web.ReadyCheck, lastSync func() time.Time, logger *slog.Logger) (*front, error) {
	webAuth, err := cfg.Web.Authenticator()
	if err != nil {
		return nil, err
	}
	f := &front{rc: l.redis.MakeRedisClient().(redis.UniversalClient), inspector: asynq.NewInspector(l.redis),
		listen: cfg.Web.Listen, auth: webAuth, logger: logger}
	// /metrics: the page's own figures from the database, the process's
	// from its parts, asynq's queues, and the Go runtime's.
	reg, err := botMetricsRegistry(l.metrics, f.inspector)
	if err != nil {
		f.close()
		return nil, err
	}
	ready := []web.ReadyCheck{
		{Name: "postgres", Check: l.store.Ping},
		{Name: "redis", Check: func(ctx context.Context) error { return f.rc.Ping(ctx).Err() }},
	}
	f.status, err = web.New(web.Config{
		Store: l.store, Logger: logger.With("component", "web"), Auth: webAuth, Operators: cfg.Matrix.Operators,
		Ready: append(ready, botChecks...), LastSync: lastSync,
		Registry: reg,
	})
	if err == nil {
		f.handler, err = f.routes(cfg, l, tools, ntokens)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// routes puts /mcp and the webhook beside the status page. Each has its
// own bearer token, in the same Authorization header basic auth would
// use, so web.auth does not cover them; the webhook is off without one.
func (f *front) routes(cfg *config.Config, l *lifecycle, tools *mcpserver.Server, ntokens int) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/", f.status)
	if tools.HTTPEnabled() {
		mux.Handle("/mcp", tools.HTTPHandler())
	}
	if cfg.Alerts.WebhookToken != "" {
		hook, err := web.NewAlertmanagerHook(web.AlertmanagerHookConfig{Store: l.store, Token: cfg.Alerts.WebhookToken,
			Logger: f.logger.With("component", "alertmanager_hook")})
		if err != nil {
			return nil, err
		}
		mux.Handle(web.AlertmanagerPath, hook)
	}
	f.summary = []any{"web_auth", f.auth != nil, "trusted_proxies", len(cfg.Web.TrustedProxies),
		"mcp", tools.HTTPEnabled(), "mcp_tokens", ntokens, "alertmanager_hook", cfg.Alerts.WebhookToken != "", "http_allow", len(cfg.LLM.HTTPAllow)}
	return mux, nil
}

func (f *front) close() {
	f.inspector.Close()
	f.rc.Close()
}

// services serve HTTP and feed the status page's live updates. Neither
// stops the process when it fails: the bot goes on, and /readyz says so.
func (f *front) services() []supervisor.Service {
	return []supervisor.Service{
		{Name: "http", Start: f.startHTTP, Stop: f.stopHTTP},
		{Name: "web_live", Run: func(ctx context.Context) error {
			if err := f.status.Run(ctx); err != nil && ctx.Err() == nil {
				f.logger.Error("status page live updates stopped", "err", err)
			}
			return nil
		}},
	}
}

func (f *front) startHTTP(context.Context) error {
	ln, err := web.Listen(f.listen, f.auth)
	if err != nil {
		return err
	}
	f.srv = &http.Server{Handler: f.handler, ReadHeaderTimeout: 10 * time.Second}
	f.logger.Info("status page listening", append([]any{"addr", ln.Addr().String()}, f.summary...)...)
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.logger.Error("status page and MCP endpoint stopped", "err", err)
		}
	}()
	return nil
}

func (f *front) stopHTTP() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

// leaderChecks are /readyz's view of the bot: "leader" is ok on the bot
// that leads and "standby" on the other, where every bot service says
// "standby" too. On the leader, homeserver_sync is "unknown" while the bot
// logs in and waits for its first /sync, then whether /sync still
// answers; every other service is "ok" while it runs.
func leaderChecks(e *leader.Elector, svcs *supervisor.Supervisor) []web.ReadyCheck {
	checks := []web.ReadyCheck{{Name: "leader", Check: standby(e.Health)}}
	for _, name := range svcs.Names() {
		check := web.ReadyCheck{Name: name, Check: standby(func(ctx context.Context) error {
			if !e.Leading() {
				return leader.ErrStandby
			}
			err := svcs.Health(ctx, name)
			if errors.Is(err, supervisor.ErrNotStarted) || errors.Is(err, bot.ErrNotSynced) {
				return web.ErrUnknown
			}
			return err
		})}
		if name == "sync" {
			check.Name = "homeserver_sync"
		}
		checks = append(checks, check)
	}
	return checks
}

// standby reports leader.ErrStandby as the status page's "standby".
func standby(check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := check(ctx)
		if errors.Is(err, leader.ErrStandby) {
			return web.ErrStandby
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
