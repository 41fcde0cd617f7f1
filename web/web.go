// Package web serves Nomos's read-only control room: the fleet's health,
// signals, executions and their audit trail, the agent's activity and the
// knowledge base, updated live over Server-Sent Events, with /healthz,
// /readyz and /metrics beside them. It only reads the store: the router
// registers GET and HEAD alone, so nothing on it can change the fleet.
// Off a loopback address it asks who is looking (Auth, Listen).
//
// AlertmanagerHook, which turns Prometheus Alertmanager's webhook into
// signals, is served on the same listener but beside that router, behind
// its own bearer token.
package web

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/store"
)

// Config configures the status page.
type Config struct {
	// Store is read, never written. Required.
	Store *store.Store
	// Logger receives errors behind the fixed sentences the page shows;
	// nil means slog.Default().
	Logger *slog.Logger
	// Clock is the source of "now" for ages and countdowns; nil means
	// time.Now.
	Clock func() time.Time
	// Auth guards every page, /events and /metrics; /healthz and /readyz
	// stay open for probes, since they show nothing about the fleet. nil
	// lets every request in, for a loopback address.
	Auth Authenticator
	// Operators are the Matrix users who may approve, shown beside each
	// pending approval.
	Operators []string
	// Ready are the dependencies /readyz reports, in order.
	Ready []ReadyCheck
	// LastSync, when set, says when the homeserver last answered the
	// bot's /sync; /readyz reports its age as last_sync_age_seconds, for
	// the watchdog. The zero time (a standby, a bot not yet synced) is
	// left out.
	LastSync func() time.Time
	// Registry collects /metrics. nil means a new registry; pass one to
	// add the process's own collectors (and asynq's queue figures) beside
	// the page's.
	Registry *prometheus.Registry
	// FleetPoll is how often the live feed looks for changes in health
	// and signals, which have no notification of their own; 0 means 2 s.
	FleetPoll time.Duration
	// ClientBuffer is how many events a live client may fall behind
	// before it is dropped; 0 means 32.
	ClientBuffer int
	// MaxClients bounds the live clients at once; 0 means 256.
	MaxClients int
}

// ReadyCheck is one dependency /readyz names. A nil Check reports
// "unknown" without failing readiness.
type ReadyCheck struct {
	Name  string
	Check func(context.Context) error
}

// Server is the status page. It is an http.Handler; Run feeds its live
// updates.
type Server struct {
	cfg    Config
	store  *store.Store
	logger *slog.Logger
	now    func() time.Time
	mux    *http.ServeMux
	hub    *hub
	reg    *prometheus.Registry
	bufs   sync.Pool
}

var _ http.Handler = (*Server)(nil)

// New validates cfg and builds the status page.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("web: Store is required")
	}
	cfg.FleetPoll = cmp.Or(cfg.FleetPoll, 2*time.Second)
	cfg.ClientBuffer = cmp.Or(cfg.ClientBuffer, 32)
	cfg.MaxClients = cmp.Or(cfg.MaxClients, 256)
	s := &Server{cfg: cfg, store: cfg.Store, logger: cfg.Logger, now: cfg.Clock, reg: cfg.Registry}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.hub = newHub(cfg.ClientBuffer, cfg.MaxClients)
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	s.mux = s.routes()
	return s, nil
}

// route is one registered path. Every route is GET (which also answers
// HEAD); ServeMux answers any other method with 405.
type route struct {
	pattern string
	// example is a concrete path for tests that walk every route.
	example string
	handler http.HandlerFunc
	// open routes skip Auth: probes must reach them.
	open bool
}

func (s *Server) routeTable() []route {
	return []route{
		{"/{$}", "/", s.overview, false},
		{"/e/{slug...}", "/e/lxc:strong/101", s.entity, false},
		{"/executions", "/executions", s.executions, false},
		{"/executions/{id}", "/executions/00000000-0000-0000-0000-000000000000", s.execution, false},
		{"/signals", "/signals", s.signals, false},
		{"/agent", "/agent", s.agent, false},
		{"/agent/{id}", "/agent/00000000-0000-0000-0000-000000000000", s.session, false},
		{"/audit", "/audit", s.audit, false},
		{"/knowledge", "/knowledge", s.knowledge, false},
		{"/events", "/events", s.events, false},
		{"/static/{file}", "/static/app.css", s.static, false},
		{"/metrics", "/metrics", s.metrics, false},
		{"/healthz", "/healthz", s.healthz, true},
		{"/readyz", "/readyz", s.readyz, true},
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range s.routeTable() {
		var h http.Handler = r.handler
		if !r.open {
			h = RequireAuth(s.cfg.Auth, h)
		}
		mux.Handle("GET "+r.pattern, h)
	}
	return mux
}

// ServeHTTP sets the security headers every answer carries and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No inline script or style anywhere: what the page shows can never
	// run, even if escaping failed somewhere.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	s.mux.ServeHTTP(w, r)
}

// Run feeds the live updates: one LISTEN connection for executions and a
// poll of the fleet's health and signals, fanned out to every open page.
// It returns when ctx ends.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pollFleet(ctx)
	}()
	err := s.store.ListenExecutions(ctx, func(ev store.ExecutionEvent) {
		s.hub.publish(liveEvent{Kind: "execution", ID: ev.ID.String(), State: string(ev.State)})
	}, func() {
		// Events were missed while reconnecting: every page re-reads.
		s.hub.publish(liveEvent{Kind: "resync"})
	})
	wg.Wait()
	s.hub.closeAll()
	return err
}

func (s *Server) pollFleet(ctx context.Context) {
	last := ""
	loop.Every(ctx, s.cfg.FleetPoll, func(ctx context.Context) {
		mark, err := s.store.FleetMark(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.logger.Warn("live feed: read fleet mark", "err", err)
		case last != "" && mark != last:
			s.hub.publish(liveEvent{Kind: "fleet"})
		}
		if err == nil {
			last = mark
		}
	})
}

// fail shows a fixed sentence; the log keeps the cause.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		s.notFound(w, r)
		return
	}
	s.logger.Error("status page", "path", r.URL.Path, "err", err)
	http.Error(w, "The status page cannot read the database right now.", http.StatusServiceUnavailable)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "Nothing here: it may have been removed, or the link is wrong.", http.StatusNotFound)
}
