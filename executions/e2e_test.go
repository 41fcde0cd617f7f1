package executions_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/executions"
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
	b.clock.Advance(time.Minute)
	if rep, err := b.svc.Reconcile(b.ctx); err != nil || rep.Resent != 1 {
		t.Fatalf("reconcile = %+v %v, want one resend", rep, err)
	}
	// Reconcile again: the order is queued once, not twice.
	if rep, err := b.svc.Reconcile(b.ctx); err != nil || rep.Resent != 1 {
		t.Fatalf("second reconcile = %+v %v", rep, err)
	}

	// The results consumer and the actuator come up.
	results := asynq.NewServer(b.redis, asynq.Config{Queues: map[string]int{tasks.QueueResults: 1}, TaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.ErrorLevel})
	if err := results.Start(&executions.ResultsHandler{Service: b.svc}); err != nil {
		t.Fatal(err)
	}
	defer results.Shutdown()
	act, err := actuator.New(actuator.Config{
		RedisURL: redisURL(b.redis), VerifyKey: b.pub, SSHSigner: fleet.SSHSigner,
		KnownHostsFile: fleet.KnownHostsFile, JournalPath: filepath.Join(t.TempDir(), "journal"),
		Logger: testenv.Logger(t), Clock: b.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); act.Run(ctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(60 * time.Second)
	var got store.Execution
	for time.Now().Before(deadline) {
		got, err = b.store.GetExecution(b.ctx, x.ID)
		if err == nil && got.State.Terminal() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.State != store.StateSucceeded {
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

func redisURL(o asynq.RedisClientOpt) string {
	return fmt.Sprintf("redis://%s/%d", o.Addr, o.DB)
}
