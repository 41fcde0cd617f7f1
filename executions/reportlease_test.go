package executions_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/lease"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// consumerEnv makes the test binary a bot's results consumer and nothing
// else (runConsumer), for a test to SIGKILL.
const consumerEnv = "NOMOS_TEST_RESULTS_CONSUMER"

// reportLeaseTTL is the report lease of the consumers in these tests, a
// fifth of the default so the test is quick.
const reportLeaseTTL = 600 * time.Millisecond

// runConsumer consumes the results queue as the bot does (leased
// reports, the sweep, the approval checks) from the settings in its
// environment, until it is killed.
func runConsumer() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(what string, err error) int {
		_, _ = os.Stderr.WriteString("results consumer: " + what + ": " + err.Error() + "\n")
		return 2
	}
	st, err := store.Open(ctx, store.Config{URL: os.Getenv(consumerEnv + "_DB"), MaxConns: 4})
	if err != nil {
		return fail("open store", err)
	}
	defer st.Close()
	signing, err := hex.DecodeString(os.Getenv(consumerEnv + "_ORDER_KEY"))
	if err != nil {
		return fail("order key", err)
	}
	verify, err := hex.DecodeString(os.Getenv(consumerEnv + "_REPORT_KEY"))
	if err != nil {
		return fail("report key", err)
	}
	opt, err := asynq.ParseRedisURI(os.Getenv(consumerEnv + "_REDIS"))
	if err != nil {
		return fail("redis", err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	rules, err := policy.NewRules(policy.RulesConfig{Operators: []string{operator}})
	if err != nil {
		return fail("rules", err)
	}
	svc, err := executions.New(executions.Config{Store: st, Queue: client, SigningKey: ed25519.PrivateKey(signing),
		ReportVerifyKey: ed25519.PublicKey(verify), Rules: rules})
	if err != nil {
		return fail("service", err)
	}
	c := startConsumer(ctx, opt, svc)
	defer c.stop()
	<-ctx.Done()
	return 0
}

// consumer is a bot's results consumer: leased reports, the sweep that
// puts back what a killed one held, and the actuator's approval checks.
type consumer struct {
	stop func()
}

func startConsumer(ctx context.Context, opt asynq.RedisConnOpt, svc *executions.Service) consumer {
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	inspector := asynq.NewInspector(opt)
	h := &executions.ResultsHandler{Service: svc, Lease: lease.Config{Redis: rdb, TTL: reportLeaseTTL, Owner: "bot"}}
	results := asynq.NewServer(opt, tasks.ResultsServerConfig(asynq.Config{
		Concurrency: tasks.ResultsConcurrency, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := results.Start(h); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { h.ServeApprovalChecks(ctx, opt); done <- struct{}{} }()
	go func() { h.SweepReports(ctx, inspector); done <- struct{}{} }()
	var once sync.Once
	return consumer{stop: func() {
		once.Do(func() {
			cancel()
			<-done
			<-done
			results.Shutdown()
			inspector.Close()
			rdb.Close()
		})
	}}
}

// TestReportHeldByAKilledBotIsAppliedOnce: a bot took a step's result
// off the results queue and was SIGKILLed while applying it, before it
// could tell asynq it was done. asynq would hold that report for its own
// lease and recoverer, a minute or two; the next bot sees the report's
// lease lapse and puts a copy back, which is applied once, and the plan
// goes on to its next step. When asynq at last gives the original back,
// it is dropped: no second application, no refusal announced as a replay.
func TestReportHeldByAKilledBotIsAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startActuator(t, fleet)
	redisURL := redisURL(b.redis)

	steps := []executions.Step{{Action: "restart", Target: "jellyfin"}, {Action: "restart", Target: "gitea"}}
	p, err := b.svc.Request(b.ctx, executions.Request{Steps: steps, RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReply}); err != nil {
		t.Fatal(err)
	}
	// Step 1's row is locked, so the doomed bot's write of its result
	// waits: it dies mid-report, holding the report's lease.
	lock, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(b.ctx)
	tx, err := lock.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.ctx) }() // the error paths; rolled back and checked below
	if _, err := tx.Exec(b.ctx, `SELECT 1 FROM executions WHERE id = $1 FOR UPDATE`, p.Execution.ID); err != nil {
		t.Fatal(err)
	}
	// The bot that will be killed: this test binary, as a consumer alone,
	// started only once the row is locked, so that it cannot apply the
	// result before the lock holds it (the actuator may well have run
	// step 1 by now).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), consumerEnv+"=1", consumerEnv+"_DB="+b.dbURL, consumerEnv+"_REDIS="+redisURL,
		consumerEnv+"_ORDER_KEY="+hex.EncodeToString(b.keys.OrderSigning), consumerEnv+"_REPORT_KEY="+hex.EncodeToString(b.keys.ReportVerify))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill() // killed already, unless the test failed before
		_ = child.Wait()
		if t.Failed() {
			t.Logf("the killed consumer's output:\n%s", out.String())
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr, DB: b.redis.DB})
	defer rdb.Close()
	held := b.awaitHeldResult(t, rdb)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // signal: killed
	if err := tx.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}

	// The next bot.
	next := startConsumer(b.ctx, b.redis, b.svc)
	t.Cleanup(next.stop)
	got := b.waitPlan(t, p.Execution.ID, allTerminal)
	diff(t, "the plan's steps", "succeeded succeeded", stepStates(got))
	ran := counter(t, fleet)
	diff(t, "restarts of jellyfin", 1, ran[restartJellyfin])
	diff(t, "restarts of gitea", 1, ran[restartGitea])
	diff(t, "step 1's successes in the audit log", 1, countOf(auditActions(t, b, got[0].ID), "execution.succeeded"))

	next.stop() // so that the server below takes what asynq gives back

	// asynq's recoverer gives the dead bot's reports back once their
	// asynq lease is 30 s past: here, the leases are made that old. The
	// plan has ended, so the dead bot's are the only ones left.
	leases := "asynq:{" + tasks.QueueResults + "}:lease"
	dead, err := rdb.ZRange(b.ctx, leases, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range dead {
		if err := rdb.ZAdd(b.ctx, leases, redis.Z{Score: float64(time.Now().Add(-2 * time.Minute).Unix()), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	originals := make(chan string, 64)
	recoverer := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	h := &executions.ResultsHandler{Service: b.svc, Lease: lease.Config{Redis: rdb, TTL: reportLeaseTTL}}
	if err := recoverer.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		originals <- id
		return h.ProcessTask(ctx, task)
	})); err != nil {
		t.Fatal(err)
	}
	defer recoverer.Shutdown()
	b.awaitDrained(t)
	close(originals)
	var back []string
	for id := range originals {
		back = append(back, id)
	}
	if !slices.Contains(back, held) {
		t.Errorf("asynq gave back %q, not the held result %s", back, held)
	}
	diff(t, "refused reports in the audit log", 0, b.auditCount(t, "report.refused"))
	diff(t, "step 1's successes after the original came back", 1, countOf(auditActions(t, b, got[0].ID), "execution.succeeded"))
}

// awaitHeldResult waits until a consumer holds a result, under its lease,
// and returns its asynq task id.
func (b *bundle) awaitHeldResult(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		active, err := b.inspector.ListActiveTasks(tasks.QueueResults)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		for _, ti := range active {
			if ti.Type != tasks.TypeExecutionResult {
				continue
			}
			if n, err := rdb.Exists(b.ctx, tasks.ReportLease(ti.ID)).Result(); err == nil && n == 1 {
				return ti.ID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no consumer ever held step 1's result")
	return ""
}

// awaitDrained waits until the results queue has nothing pending, taken
// or waiting for a retry.
func (b *bundle) awaitDrained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		q, err := b.inspector.GetQueueInfo(tasks.QueueResults)
		if err != nil {
			t.Fatal(err)
		}
		if q.Pending+q.Active+q.Retry+q.Scheduled == 0 {
			diff(t, "reports archived", 0, q.Archived)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the results queue never drained")
}

// auditCount counts the audit log's entries of one action.
func (b *bundle) auditCount(t *testing.T, action string) int {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	var n int
	if err := conn.QueryRow(b.ctx, `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func diff[T comparable](t *testing.T, what string, want, got T) {
	t.Helper()
	if want != got {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestReportAppliedByAKilledBotIsNotAnnouncedAsAReplay: the bot that took
// a result applied it and was killed before it could tell asynq. The copy
// the next bot puts back is refused as a replay, changes nothing, and is
// not announced to the operators as a replay from Redis, which it is not.
// A replay that is not such a copy is still announced (TestForgedReports…).
func TestReportAppliedByAKilledBotIsNotAnnouncedAsAReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := b.request(t, "restart", "jellyfin", "").Execution
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	// The dead bot: it applies the result, then never returns.
	applied := make(chan string, 1)
	block := make(chan struct{})
	dead := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{Concurrency: 1, TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := dead.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		if _, err := b.svc.ApplyReport(ctx, task.Type(), task.Payload()); err != nil {
			t.Errorf("the dead bot's apply: %v", err)
		}
		id, _ := asynq.GetTaskID(ctx)
		applied <- id
		<-block
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(block); dead.Shutdown() })
	task, err := tasks.NewResultTask(b.reportKey, tasks.Result{ExecutionID: x.ID.String(), Actuator: tasks.DefaultActuator,
		PlanHash: x.PlanHash, Status: tasks.StatusSucceeded, Output: "done"})
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(b.redis)
	defer client.Close()
	if _, err := client.EnqueueContext(b.ctx, task); err != nil {
		t.Fatal(err)
	}
	var orig string
	select {
	case orig = <-applied:
	case <-time.After(30 * time.Second):
		t.Fatal("the dead bot never took the result")
	}
	dead.Stop()

	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr, DB: b.redis.DB})
	defer rdb.Close()
	var announced []executions.RefusedReportError
	var mu sync.Mutex
	h := &executions.ResultsHandler{Service: b.svc, Lease: lease.Config{Redis: rdb, TTL: reportLeaseTTL},
		OnRefused: func(_ context.Context, r executions.RefusedReportError) {
			mu.Lock()
			announced = append(announced, r)
			mu.Unlock()
		}}
	next := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := next.Start(h); err != nil {
		t.Fatal(err)
	}
	defer next.Shutdown()
	inspector := asynq.NewInspector(b.redis)
	defer inspector.Close()
	ctx, cancel := context.WithCancel(b.ctx)
	swept := make(chan struct{})
	go func() { defer close(swept); h.SweepReports(ctx, inspector) }()
	defer func() { cancel(); <-swept }()

	// The copy is done with: completed, not archived as a refusal.
	deadline := time.Now().Add(30 * time.Second)
	var state asynq.TaskState
	for time.Now().Before(deadline) {
		if copyID, err := rdb.Get(b.ctx, tasks.ReportResent(orig)).Result(); err == nil {
			if ti, err := b.inspector.GetTaskInfo(tasks.QueueResults, copyID); err == nil && (ti.State == asynq.TaskStateCompleted || ti.State == asynq.TaskStateArchived) {
				state = ti.State
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	diff(t, "the copy's state", asynq.TaskStateCompleted, state)
	mu.Lock()
	diff(t, "refusals announced", 0, len(announced))
	mu.Unlock()
	diff(t, "successes in the audit log", 1, countOf(auditActions(t, b, x.ID), "execution.succeeded"))
}

// TestAReplayDressedAsAPutBackCopyChangesNothing: a Redis writer copies a
// result already applied, names the copy as the bot names what it puts
// back, and writes the mark that says so. The copy changes nothing and
// is refused in the audit log; all the disguise buys is that the room is
// not told of it.
func TestAReplayDressedAsAPutBackCopyChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := b.request(t, "restart", "jellyfin", "").Execution
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.result(t, tasks.Result{ExecutionID: x.ID.String(), PlanHash: x.PlanHash, Status: tasks.StatusSucceeded, Output: "done"}); err != nil {
		t.Fatal(err)
	}
	refusedBefore := b.auditCount(t, "report.refused")

	// The writer's copy: the genuine signed result, replayed.
	task, err := tasks.NewResultTask(b.reportKey, tasks.Result{ExecutionID: x.ID.String(), Actuator: tasks.DefaultActuator,
		PlanHash: x.PlanHash, Status: tasks.StatusSucceeded, Output: "done"})
	if err != nil {
		t.Fatal(err)
	}
	orig := "result:" + x.ID.String() + ":succeeded"
	copyID := orig + ":resent:forged"
	rdb := redis.NewClient(&redis.Options{Addr: b.redis.Addr, DB: b.redis.DB})
	defer rdb.Close()
	if err := rdb.Set(b.ctx, tasks.ReportResent(orig), copyID, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(b.redis)
	defer client.Close()
	if _, err := client.EnqueueContext(b.ctx, asynq.NewTask(task.Type(), task.Payload(), asynq.Queue(tasks.QueueResults), asynq.TaskID(copyID), asynq.Retention(time.Hour))); err != nil {
		t.Fatal(err)
	}
	var announced int
	var mu sync.Mutex
	h := &executions.ResultsHandler{Service: b.svc, Lease: lease.Config{Redis: rdb, TTL: reportLeaseTTL},
		OnRefused: func(context.Context, executions.RefusedReportError) { mu.Lock(); announced++; mu.Unlock() }}
	srv := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ti, err := b.inspector.GetTaskInfo(tasks.QueueResults, copyID); err == nil && ti.State == asynq.TaskStateCompleted {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := b.store.GetExecution(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the execution's state", "succeeded", string(got.State))
	diff(t, "successes in the audit log", 1, countOf(auditActions(t, b, x.ID), "execution.succeeded"))
	diff(t, "refusals in the audit log", refusedBefore+1, b.auditCount(t, "report.refused"))
	mu.Lock()
	diff(t, "refusals announced", 0, announced)
	mu.Unlock()
}
