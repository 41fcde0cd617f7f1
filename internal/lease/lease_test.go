package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// setup gives a test a Redis database of its own, as asynq and as a
// client.
func setup(t *testing.T) (context.Context, asynq.RedisConnOpt, redis.UniversalClient) {
	t.Helper()
	opt, err := asynq.ParseRedisURI(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	t.Cleanup(func() { rdb.Close() })
	return testenv.Context(t), opt, rdb
}

// TestSweeperResendsOnlyTasksWhoseHolderStopped: a task taken by a
// holder that renews its lease is left alone however long it runs; once
// the holder stops renewing (it was killed), the task is resent, once,
// after two looks without a lease.
func TestSweeperResendsOnlyTasksWhoseHolderStopped(t *testing.T) {
	t.Parallel()
	ctx, opt, rdb := setup(t)
	cfg := lease.Config{Redis: rdb, TTL: 300 * time.Millisecond, Logger: testenv.Logger(t)}
	const queue = "lease-test"

	// Two tasks taken: one by a holder that lives, one by one that dies.
	taken := make(chan string, 2)
	dying, die := context.WithCancel(ctx)
	block := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 2, Queues: map[string]int{queue: 1}, TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel})
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		holder := ctx
		if string(task.Payload()) == "dies" {
			holder = dying
		}
		lease.Hold(holder, cfg, "lease-test:"+string(task.Payload())) // never released: both are still "running"
		taken <- string(task.Payload())
		<-block
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	defer close(block)
	client := asynq.NewClient(opt)
	defer client.Close()
	for _, p := range []string{"lives", "dies"} {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte(p), asynq.Queue(queue))); err != nil {
			t.Fatal(err)
		}
	}
	<-taken
	<-taken

	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	var resent []string
	s := &lease.Sweeper{Config: cfg, Inspector: inspector, Queue: queue,
		Key: func(ti *asynq.TaskInfo) string { return "lease-test:" + string(ti.Payload) },
		Resend: func(_ context.Context, ti *asynq.TaskInfo) error {
			resent = append(resent, string(ti.Payload))
			return nil
		}}
	sweep := func() {
		t.Helper()
		if err := s.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Both alive: many looks across several TTLs resend nothing.
	for range 6 {
		sweep()
		time.Sleep(cfg.TTL / 2)
	}
	if len(resent) != 0 {
		t.Fatalf("resent %q while both holders renewed their leases", resent)
	}

	die()
	time.Sleep(2 * cfg.TTL) // the dead holder's lease lapses
	sweep()
	if len(resent) != 0 {
		t.Fatalf("resent %q on the first look without a lease; want a second look first", resent)
	}
	for range 3 {
		sweep()
	}
	if len(resent) != 1 || resent[0] != "dies" {
		t.Fatalf("resent %q, want the dead holder's task once", resent)
	}
}

// TestReleaseDeletesTheLease: a holder that finishes gives its lease up
// at once rather than letting it lapse.
func TestReleaseDeletesTheLease(t *testing.T) {
	t.Parallel()
	ctx, _, rdb := setup(t)
	release := lease.Hold(ctx, lease.Config{Redis: rdb, TTL: time.Minute, Owner: "me"}, "lease-test:k")
	if v, err := rdb.Get(ctx, "lease-test:k").Result(); err != nil || v != "me" {
		t.Fatalf("while held the lease reads %q, %v; want me", v, err)
	}
	release()
	if n, err := rdb.Exists(ctx, "lease-test:k").Result(); err != nil || n != 0 {
		t.Fatalf("after release the lease exists: %d, %v", n, err)
	}
}
