package executions_test

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestFlushedRedisStillRunsOnce approves a plan while the actuator is down,
// loses Redis, and checks that the reconciler's resend runs the step
// exactly once and the result comes back through the results queue.
func TestFlushedRedisStillRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	x := b.request(t, "restart", "jellyfin", "").Execution
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr, DB: b.redis.DB})
	defer rdb.Close()
	if err := rdb.FlushDB(b.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(time.Minute)
	if rep, err := b.svc.Reconcile(b.ctx); err != nil || rep.Resent != 1 {
		t.Fatalf("reconcile = %+v %v, want one resend", rep, err)
	}
	// Reconcile again: the order is queued once, not twice.
	if rep, err := b.svc.Reconcile(b.ctx); err != nil || rep.Resent != 1 {
		t.Fatalf("second reconcile = %+v %v", rep, err)
	}

	// The results consumer and the actuator come up.
	b.startWorkers(t, fleet)

	if got := b.waitDone(t, x.ID); got.State != store.StateSucceeded {
		t.Fatalf("state = %s (%s), want succeeded", got.State, got.Error)
	}
	n := 0
	for _, c := range fleet.Commands(t) {
		if c == "pct exec 101 -- systemctl restart jellyfin.service" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the restart ran %d times, want once", n)
	}
}

// waitDone polls an execution until it is in a final state, and returns it.
func (b *bundle) waitDone(t *testing.T, id uuid.UUID) store.Execution {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := b.store.GetExecution(b.ctx, id)
		if err == nil && got.State.Terminal() {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never finished: %s (%v)", id, got.State, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startWorkers runs the results consumer and a real actuator against the
// fleet until the test ends. What the consumer refuses comes out of the
// returned channel.
func (b *bundle) startWorkers(t *testing.T, fleet *testenv.Fleet) <-chan executions.RefusedReportError {
	t.Helper()
	refused := make(chan executions.RefusedReportError, 64)
	results := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	h := &executions.ResultsHandler{Service: b.svc, OnRefused: func(_ context.Context, r executions.RefusedReportError) { refused <- r }}
	if err := results.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(results.Shutdown)
	testenv.Go(t, func(ctx context.Context) { h.ServeApprovalChecks(ctx, b.redis) })
	act, err := actuator.New(actuator.Config{
		RedisURL: cmp.Or(b.actuatorRedisURL, redisURL(b.redis)), VerifyKey: b.pub, ReportSigningKey: b.reportKey, SSHSigner: fleet.SSHSigner,
		KnownHostsFile: fleet.KnownHostsFile, JournalPath: filepath.Join(t.TempDir(), "journal"),
		Logger: testenv.Logger(t), Clock: b.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := act.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("actuator: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return refused
}

// TestProberKeepsFleetHealth runs the seeded checks through the real
// actuator and labsim: results land on the entities they observe, a
// failing check opens a signal, and its next good result resolves it.
func TestProberKeepsFleetHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultNetDown, Target: "112"}); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)

	rep, err := b.svc.ProbeDue(b.ctx)
	if err != nil || rep.Sent != 22 || rep.Skipped != 0 {
		t.Fatalf("first pass = %+v, %v; want the 22 enabled checks sent", rep, err)
	}
	if rep, err := b.svc.ProbeDue(b.ctx); err != nil || rep.Sent != 0 {
		t.Errorf("a second pass in the same slot = %+v, %v; want nothing sent", rep, err)
	}
	adguard := b.waitHealth(t, "service:adguard", func(h string) bool { return h != "unknown" })
	if adguard.Health != "unhealthy" || !strings.Contains(adguard.Detail, "adguard-dns") {
		t.Errorf("adguard with its network down is %s (%q), want unhealthy from adguard-dns", adguard.Health, adguard.Detail)
	}
	sigs, err := b.store.ListSignals(b.ctx, store.SignalFilter{EntityID: &adguard.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0].Kind != "check:adguard-dns" || sigs[0].Severity != "critical" {
		t.Errorf("adguard signals %+v, want one critical check:adguard-dns", sigs)
	}
	for _, slug := range []string{"service:jellyfin", "service:postgres", "service:caddy"} {
		if e := b.waitHealth(t, slug, func(h string) bool { return h != "unknown" }); e.Health != "healthy" {
			t.Errorf("%s is %s (%q), want healthy", slug, e.Health, e.Detail)
		}
	}

	// The network comes back; adguard's next slot (30 s on) finds it healthy.
	if _, err := fleet.Sim.Clear(labsim.FaultNetDown, "112"); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(30 * time.Second)
	if rep, err := b.svc.ProbeDue(b.ctx); err != nil || rep.Sent != 2 {
		t.Fatalf("30s on = %+v, %v; want the two 30 s checks sent", rep, err)
	}
	b.waitHealth(t, "service:adguard", func(h string) bool { return h == "healthy" })
	if sigs, err := b.store.ListSignals(b.ctx, store.SignalFilter{EntityID: &adguard.ID}); err != nil || len(sigs) != 0 {
		t.Errorf("adguard open signals after recovery: %+v %v", sigs, err)
	}
	// The probes only looked.
	for _, c := range fleet.Commands(t) {
		for _, verb := range []string{"restart", "pct stop", "pct start", "apt-get"} {
			if strings.Contains(c, verb) {
				t.Errorf("a probe ran %q", c)
			}
		}
	}
}

// waitHealth polls an entity until ok accepts its health.
func (b *bundle) waitHealth(t *testing.T, slug string, ok func(string) bool) store.Entity {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		e, err := b.store.EntityBySlug(b.ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		if ok(e.Health) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %s (%q)", slug, e.Health, e.Detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func redisURL(o tasks.RedisOpt) string {
	return fmt.Sprintf("redis://%s/%d", o.Addr, o.DB)
}
