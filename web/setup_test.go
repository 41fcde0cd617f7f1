package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/web"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// queryCounter counts the statements a store sends on behalf of an HTTP
// request (not the live feed's own), to prove a page's queries do not
// grow with the fleet.
type queryCounter struct{ n atomic.Int64 }

type requestKey struct{}

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(requestKey{}) != nil {
		c.n.Add(1)
	}
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// bundle is one test's status page over a seeded database.
type bundle struct {
	st      *store.Store
	srv     *web.Server
	http    *httptest.Server
	queries *queryCounter
	ctx     context.Context
}

type option func(*web.Config)

// setup seeds the demo fleet into a fresh database and serves the status
// page over it, with its live feed running.
func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	ctx := testenv.Context(t)
	qc := &queryCounter{}
	st, err := store.Open(ctx, store.Config{URL: testenv.DatabaseURL(t), MaxConns: 8, Logger: testenv.Logger(t), Tracer: qc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{Store: st, Logger: testenv.Logger(t), Operators: []string{"@operator:nomos.test"}, FleetPoll: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(runCtx); err != nil && runCtx.Err() == nil {
			t.Errorf("web: Run: %v", err)
		}
	}()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, true)))
	}))
	t.Cleanup(func() {
		cancel()
		<-done
		hs.Close()
	})
	return &bundle{st: st, srv: srv, http: hs, queries: qc, ctx: ctx}
}

// get fetches a path and checks its status.
func (b *bundle) get(t testing.TB, path string, want int) string {
	t.Helper()
	resp, err := http.Get(b.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d, want %d:\n%s", path, resp.StatusCode, want, body)
	}
	return string(body)
}

// count returns how many queries fetching path costs.
func (b *bundle) count(t testing.TB, path string) int64 {
	t.Helper()
	before := b.queries.n.Load()
	b.get(t, path, http.StatusOK)
	return b.queries.n.Load() - before
}

// plan creates an execution as a chat request would, with the given state.
func (b *bundle) plan(t testing.TB, target, reason string, state store.ExecutionState, steps ...string) store.Execution {
	t.Helper()
	if len(steps) == 0 {
		steps = []string{"pct exec 101 -- systemctl restart jellyfin.service"}
	}
	x, err := b.st.CreateExecution(b.ctx, store.NewExecution{
		Request: store.Request{
			ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: target, Params: json.RawMessage(`{}`),
			Steps: steps, RiskClass: "reversible_low", PlanHash: strings.Repeat("a", 64), PlanCode: "abcd",
			State: state, RequestedBy: "@operator:nomos.test", RequestedVia: "chat", Reason: reason,
			ExpiresAt: time.Now().Add(30 * time.Minute),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// move transitions an execution as the lifecycle would.
func (b *bundle) move(t testing.TB, id uuid.UUID, from, to store.ExecutionState, mutate func(*store.Transition)) {
	t.Helper()
	tr := store.Transition{ID: id, From: []store.ExecutionState{from}, To: to, Audit: store.AuditEntry{Actor: "nomos", Action: "execution." + string(to)}}
	if mutate != nil {
		mutate(&tr)
	}
	tr.Audit.Action = "execution." + string(to)
	if _, err := b.st.Transition(b.ctx, tr); err != nil {
		t.Fatal(err)
	}
}

func containsAll(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func containsNone(t testing.TB, what, body string, bad ...string) {
	t.Helper()
	for _, w := range bad {
		if strings.Contains(body, w) {
			t.Errorf("%s shows %q", what, w)
		}
	}
}
