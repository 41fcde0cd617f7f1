package executions_test

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// redisWriter is someone who can write to the test's Redis database and
// holds no key: it enqueues raw tasks on the results queue, which a real
// results consumer takes off. Every refusal the consumer makes arrives on
// refused, so a test knows a message was handled without waiting on time.
type redisWriter struct {
	client  *asynq.Client
	refused chan executions.RefusedReportError
}

func (b *bundle) startResults(t *testing.T) *redisWriter {
	t.Helper()
	w := &redisWriter{client: asynq.NewClient(b.redis), refused: make(chan executions.RefusedReportError, 64)}
	t.Cleanup(func() { w.client.Close() })
	srv := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{
		Concurrency: 1, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel,
	}))
	h := &executions.ResultsHandler{Service: b.svc, OnRefused: func(_ context.Context, r executions.RefusedReportError) { w.refused <- r }}
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return w
}

// enqueue puts payload on the results queue as typ, under a new task id.
func (w *redisWriter) enqueue(t *testing.T, typ string, payload []byte) {
	t.Helper()
	task := asynq.NewTask(typ, payload, asynq.Queue(tasks.QueueResults), asynq.TaskID("forged-"+uuid.NewString()), asynq.MaxRetry(5))
	if _, err := w.client.Enqueue(task); err != nil {
		t.Fatalf("enqueue %s: %v", typ, err)
	}
}

func (w *redisWriter) next(t *testing.T) executions.RefusedReportError {
	t.Helper()
	select {
	case r := <-w.refused:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("the results consumer refused nothing")
		return executions.RefusedReportError{}
	}
}

// world is what a forged report could change in Postgres.
type world struct {
	Executions []store.Execution
	Entities   []store.Entity
	Signals    []store.Signal
}

func (b *bundle) world(t *testing.T) world {
	t.Helper()
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	es, err := b.store.ListEntities(b.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := b.store.ListSignals(b.ctx, store.SignalFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return world{Executions: xs, Entities: es, Signals: sigs}
}

// refusedReasons lists the reasons of every report.refused audit row.
func (b *bundle) refusedReasons(t *testing.T) []string {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	rows, err := conn.Query(b.ctx, `SELECT detail->>'reason' FROM audit_log WHERE action = 'report.refused' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return reasons
}

func (b *bundle) sealProgress(t *testing.T, key ed25519.PrivateKey, p tasks.Progress) []byte {
	t.Helper()
	p.Actuator = cmp.Or(p.Actuator, tasks.DefaultActuator)
	payload, err := tasks.SignProgress(key, p)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func (b *bundle) sealResult(t *testing.T, key ed25519.PrivateKey, r tasks.Result) []byte {
	t.Helper()
	r.Actuator = cmp.Or(r.Actuator, tasks.DefaultActuator)
	if r.StartedAt.IsZero() {
		r.StartedAt, r.FinishedAt = b.clock.Now(), b.clock.Now()
	}
	payload, err := tasks.SignResult(key, r)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func (b *bundle) sealCheck(t *testing.T, key ed25519.PrivateKey, c tasks.CheckResult) []byte {
	t.Helper()
	c.Actuator = cmp.Or(c.Actuator, tasks.DefaultActuator)
	payload, err := tasks.SignCheckResult(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// tamper changes one field of a signed envelope's body and keeps the
// signature.
func tamper(t *testing.T, payload []byte, field string, value any) []byte {
	t.Helper()
	var env tasks.Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(env.Body, &body); err != nil {
		t.Fatal(err)
	}
	body[field] = value
	env.Body, _ = json.Marshal(body)
	out, _ := json.Marshal(env)
	return out
}

func (b *bundle) approve(t *testing.T, x store.Execution) store.Execution {
	t.Helper()
	got, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction})
	if err != nil {
		t.Fatalf("approve %s: %v", x.ID, err)
	}
	return got
}

// apply hands a genuine report straight to the service.
func (b *bundle) apply(t *testing.T, typ string, payload []byte) {
	t.Helper()
	if _, err := b.svc.ApplyReport(b.ctx, typ, payload); err != nil {
		t.Fatalf("a genuine %s was not applied: %v", typ, err)
	}
}

// TestForgedReportsChangeNothing writes, straight into Redis, every kind
// of report a Redis writer could forge or replay, and checks that each is
// refused for the right reason and audited, and that nothing in Postgres
// moved: no execution's state, output or result, no entity's health,
// lifecycle or attributes, no signal.
func TestForgedReportsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startResults(t)
	_, strangerKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, orderKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := b.reportKey

	// A running restart of jellyfin, with two genuine progress reports.
	running := b.approve(t, b.request(t, "restart", "jellyfin", "").Execution)
	progress2 := b.sealProgress(t, key, tasks.Progress{ExecutionID: running.ID.String(), Seq: 2, Tail: "restarting", At: b.clock.Now()})
	b.apply(t, tasks.TypeExecutionProgress, b.sealProgress(t, key, tasks.Progress{ExecutionID: running.ID.String(), Seq: 1, At: b.clock.Now()}))
	b.apply(t, tasks.TypeExecutionProgress, progress2)
	// A finished restart of gitea, with its genuine result.
	finished := b.approve(t, b.request(t, "restart", "gitea", "").Execution)
	finishedResult := b.sealResult(t, key, tasks.Result{ExecutionID: finished.ID.String(), PlanHash: finished.PlanHash, Status: tasks.StatusSucceeded, Output: "done"})
	b.apply(t, tasks.TypeExecutionResult, finishedResult)
	// A plan nobody approved, and a container being created on strong.
	pending := b.request(t, "restart", "caddy", "").Execution
	create := b.approve(t, b.request(t, "pct_create", "host:strong", `{"hostname":"scratch","ip":"10.40.0.150/24","gw":"10.40.0.1"}`).Execution)
	// jellyfin's HTTP check has just seen it unhealthy.
	due, err := b.store.ClaimDueChecks(b.ctx, b.clock.Now(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	jellyfin, err := b.store.EntityBySlug(b.ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(due, func(c store.DueCheck) bool { return c.TargetID == jellyfin.ID })
	if i < 0 {
		t.Fatal("the seed has no check on service:jellyfin")
	}
	check := due[i]
	unhealthy := b.sealCheck(t, key, tasks.CheckResult{CheckID: check.ID.String(), TargetID: jellyfin.ID.String(), Health: "unhealthy", Detail: "connection refused", At: b.clock.Now()})
	b.apply(t, tasks.TypeCheckResult, unhealthy)
	b.clock.Add(time.Second)
	healthy := tasks.CheckResult{CheckID: check.ID.String(), TargetID: jellyfin.ID.String(), Health: "healthy", Detail: "answered 200", At: b.clock.Now()}
	earlierHealthy := healthy
	earlierHealthy.At = b.clock.Now().Add(-time.Hour)

	before := b.world(t)
	if e := entityBySlug(before, "service:jellyfin"); e.Health != "unhealthy" {
		t.Fatalf("jellyfin is %s before the forgeries, want unhealthy", e.Health)
	}
	// The refusals of these name an execution that exists.
	inRoom := map[string]bool{}
	for _, tc := range []struct {
		name    string
		typ     string
		payload []byte
		want    executions.ReportRefusal
	}{
		{"unsigned progress", tasks.TypeExecutionProgress, mustJSON(t, tasks.Progress{Version: tasks.Version, ExecutionID: running.ID.String(), Actuator: "actuator", Seq: 99, Tail: "all good"}), executions.RefusedUnsigned},
		{"unsigned result", tasks.TypeExecutionResult, mustJSON(t, tasks.Result{Version: tasks.Version, ExecutionID: running.ID.String(), Actuator: "actuator", PlanHash: running.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedUnsigned},
		{"tampered result", tasks.TypeExecutionResult, tamper(t, b.sealResult(t, key, tasks.Result{ExecutionID: running.ID.String(), PlanHash: running.PlanHash, Status: tasks.StatusFailed, Error: "boom"}), "status", "succeeded"), executions.RefusedBadSignature},
		{"a result moved to another execution", tasks.TypeExecutionResult, tamper(t, finishedResult, "execution_id", running.ID.String()), executions.RefusedBadSignature},
		{"result signed by another key", tasks.TypeExecutionResult, b.sealResult(t, strangerKey, tasks.Result{ExecutionID: running.ID.String(), PlanHash: running.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedBadSignature},
		{"result signed by the bot's order key", tasks.TypeExecutionResult, b.sealResult(t, orderKey, tasks.Result{ExecutionID: running.ID.String(), PlanHash: running.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedBadSignature},
		{"progress delivered as a result", tasks.TypeExecutionResult, progress2, executions.RefusedBadSignature},
		{"result for a plan nobody approved", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: pending.ID.String(), PlanHash: pending.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedNotDispatched},
		{"progress for a plan nobody approved", tasks.TypeExecutionProgress, b.sealProgress(t, key, tasks.Progress{ExecutionID: pending.ID.String(), Seq: 1}), executions.RefusedNotDispatched},
		{"result for an execution that never was", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: uuid.Must(uuid.NewV7()).String(), Status: tasks.StatusSucceeded}), executions.RefusedNotDispatched},
		{"replayed progress", tasks.TypeExecutionProgress, progress2, executions.RefusedReplayed},
		{"replayed result", tasks.TypeExecutionResult, finishedResult, executions.RefusedReplayed},
		{"result from another actuator", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: running.ID.String(), Actuator: "actuator-west", PlanHash: running.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedWrongActuator},
		{"result for another plan", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: running.ID.String(), PlanHash: pending.PlanHash, Status: tasks.StatusSucceeded}), executions.RefusedWrongOrder},
		{"the actuator's refusal of a forged order", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: running.ID.String(), Status: tasks.StatusRefused, Refusal: tasks.RefusedBadSignature, Error: "Nothing ran"}), executions.RefusedForgedOrder},
		{"a created container from a restart", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: running.ID.String(), PlanHash: running.PlanHash, Status: tasks.StatusSucceeded,
			Created: &tasks.CreatedContainer{VMID: 150, Host: "strong", Hostname: "scratch", IP: "10.40.0.150/24"}}), executions.RefusedCreated},
		{"a created container over jellyfin's", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: create.ID.String(), PlanHash: create.PlanHash, Status: tasks.StatusSucceeded,
			Created: &tasks.CreatedContainer{VMID: 101, Host: "strong", Hostname: "scratch", IP: "10.40.0.150/24"}}), executions.RefusedCreated},
		{"a created container on another host", tasks.TypeExecutionResult, b.sealResult(t, key, tasks.Result{ExecutionID: create.ID.String(), PlanHash: create.PlanHash, Status: tasks.StatusSucceeded,
			Created: &tasks.CreatedContainer{VMID: 150, Host: "weak", Hostname: "scratch", IP: "10.40.0.150/24"}}), executions.RefusedCreated},
		{"probe result marking jellyfin healthy, unsigned", tasks.TypeCheckResult, mustJSON(t, healthy), executions.RefusedUnsigned},
		{"probe result marking jellyfin healthy, another key", tasks.TypeCheckResult, b.sealCheck(t, strangerKey, healthy), executions.RefusedBadSignature},
		{"probe result with its health changed", tasks.TypeCheckResult, tamper(t, unhealthy, "health", "healthy"), executions.RefusedBadSignature},
		{"probe result for a check that does not exist", tasks.TypeCheckResult, b.sealCheck(t, key, tasks.CheckResult{CheckID: uuid.NewString(), TargetID: jellyfin.ID.String(), Health: "healthy", At: b.clock.Now()}), executions.RefusedNotDispatched},
		{"probe result against another target", tasks.TypeCheckResult, b.sealCheck(t, key, tasks.CheckResult{CheckID: check.ID.String(), TargetID: pending.TargetID.String(), Health: "healthy", At: b.clock.Now()}), executions.RefusedNotDispatched},
		{"replayed probe result", tasks.TypeCheckResult, unhealthy, executions.RefusedReplayed},
		{"probe result older than the one on record", tasks.TypeCheckResult, b.sealCheck(t, key, earlierHealthy), executions.RefusedReplayed},
		{"a task type the results queue does not carry", "execution:approve", []byte(`{"execution_id":"` + pending.ID.String() + `"}`), executions.RefusedMalformed},
	} {
		w.enqueue(t, tc.typ, tc.payload)
		got := w.next(t)
		if got.Reason != tc.want {
			t.Errorf("%s: refused as %s (%s), want %s", tc.name, got.Reason, got.Detail, tc.want)
		}
		if got.Warning() == "" || got.TaskID == "" {
			t.Errorf("%s: refusal %+v lacks a warning or the task id", tc.name, got)
		}
		if got.RoomID != "" {
			inRoom[tc.name] = true
		}
	}
	if !inRoom["replayed result"] || !inRoom["unsigned progress"] {
		t.Errorf("refusals naming an execution should carry its room; got rooms for %v", inRoom)
	}
	if diff := gocmp.Diff(before, b.world(t)); diff != "" {
		t.Errorf("the forged reports changed Postgres (-before +after):\n%s", diff)
	}
	if n := len(b.refusedReasons(t)); n != 26 {
		t.Errorf("%d refusals in the audit log, want one per forged report (26)", n)
	}
}

// TestRefusedReportsAreAuditedAgainstTheirExecution: a refusal that names
// an execution is in that execution's audit trail, with its reason.
func TestRefusedReportsAreAuditedAgainstTheirExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := b.approve(t, b.request(t, "restart", "jellyfin", "").Execution)
	_, strangerKey, _ := ed25519.GenerateKey(nil)
	_, err := b.svc.ApplyReport(b.ctx, tasks.TypeExecutionResult, b.sealResult(t, strangerKey, tasks.Result{ExecutionID: x.ID.String(), Status: tasks.StatusSucceeded}))
	refusal(t, err, executions.RefusedBadSignature)
	rows, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := rows[len(rows)-1]
	if last.Action != "report.refused" || last.Detail["reason"] != "bad_signature" || last.Detail["type"] != tasks.TypeExecutionResult {
		t.Errorf("last audit row = %s %v, want report.refused for a bad signature", last.Action, last.Detail)
	}
	if got, _ := b.store.GetExecution(b.ctx, x.ID); got.State != store.StateDispatched {
		t.Errorf("state = %s, want dispatched", got.State)
	}
}

// TestCreatedContainerAccepted: the genuine result of a pct_create adds
// its container, also on the vmid of a destroyed one, which Proxmox hands
// out again.
func TestCreatedContainerAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name     string
		vmid     int
		hostname string
		ip       string
		before   func(t *testing.T)
	}{
		{"a new vmid", 150, "scratch", "10.40.0.150/24", nil},
		{"the vmid of a destroyed container", 107, "again", "10.40.0.151/24", func(t *testing.T) {
			e, err := b.store.EntityBySlug(b.ctx, "lxc:strong/107")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.store.SetLifecycle(b.ctx, e.ID, "destroyed"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			params := `{"hostname":"` + tc.hostname + `","ip":"` + tc.ip + `","gw":"10.40.0.1"}`
			x := b.approve(t, b.request(t, "pct_create", "host:strong", params).Execution)
			a, err := b.result(t, tasks.Result{ExecutionID: x.ID.String(), PlanHash: x.PlanHash, Status: tasks.StatusSucceeded,
				Created: &tasks.CreatedContainer{VMID: tc.vmid, Host: "strong", Hostname: tc.hostname, IP: tc.ip}})
			if err != nil || a.Execution.State != store.StateSucceeded {
				t.Fatalf("result: %s %v", a.Execution.State, err)
			}
			slug := "lxc:strong/" + strconv.Itoa(tc.vmid)
			e, err := b.store.EntityBySlug(b.ctx, slug)
			if err != nil || e.Lifecycle != "active" || e.Name != tc.hostname {
				t.Errorf("%s = %+v %v, want the active %s", slug, e, err, tc.hostname)
			}
		})
	}
}

func entityBySlug(w world, slug string) store.Entity {
	for _, e := range w.Entities {
		if e.Slug == slug {
			return e
		}
	}
	return store.Entity{}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForgedOrderFailsNothing: a Redis writer puts an order of its own on
// the actuator's queue under the id of an approved execution. The real
// actuator refuses it and says so, signed; the bot takes that as a sign of
// a forged order, not as the execution's result, so the execution is not
// failed, and the genuine order still runs once when it goes out.
func TestForgedOrderFailsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.queue.setDown(true) // the genuine order does not go out yet
	x := b.approve(t, b.request(t, "restart", "jellyfin", "").Execution)
	refused := b.startWorkers(t, fleet)

	_, strangerKey, _ := ed25519.GenerateKey(nil)
	forged, err := tasks.SignOrder(strangerKey, tasks.Order{
		ExecutionID: x.ID.String(), Actuator: tasks.DefaultActuator, Action: "pct_exec", Params: json.RawMessage(`{"command":"reboot"}`),
		Steps: []string{"reboot"}, PlanHash: x.PlanHash, IssuedAt: b.clock.Now(), ExpiresAt: b.clock.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(b.redis)
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask(tasks.TypeExecutionRun, forged, asynq.Queue(tasks.OrderQueue(tasks.DefaultSite)), asynq.MaxRetry(0))); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-refused:
		if r.Reason != executions.RefusedForgedOrder || r.ExecutionID != x.ID.String() {
			t.Fatalf("refused %+v, want the forged order reported against %s", r, x.ID)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the forged order was never reported")
	}
	if got, _ := b.store.GetExecution(b.ctx, x.ID); got.State != store.StateApproved {
		t.Fatalf("after the forged order the execution is %s, want still approved", got.State)
	}
	if cmds := fleet.Commands(t); len(cmds) != 0 {
		t.Fatalf("the forged order ran %q", cmds)
	}

	b.queue.setDown(false)
	if _, err := b.svc.Reconcile(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.waitDone(t, x.ID); got.State != store.StateSucceeded {
		t.Fatalf("the genuine order ended %s (%s), want succeeded", got.State, got.Error)
	}
	if diff := gocmp.Diff([]string{"pct exec 101 -- systemctl restart jellyfin.service"}, fleet.Commands(t)); diff != "" {
		t.Errorf("labsim commands (-want +got):\n%s", diff)
	}
}
