package executions_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/tasks"
)

// batchCounter is a results consumer that counts what asynq hands it.
type batchCounter struct {
	mu      sync.Mutex
	batches []int // the size of each check:results batch
	lone    int   // check:result tasks that came alone
	refused chan executions.RefusedReportError
	next    asynq.Handler
}

func (c *batchCounter) ProcessTask(ctx context.Context, t *asynq.Task) error {
	c.mu.Lock()
	switch t.Type() {
	case tasks.TypeCheckResults:
		payloads, _ := tasks.SplitCheckResults(t.Payload())
		c.batches = append(c.batches, len(payloads))
	case tasks.TypeCheckResult:
		c.lone++
	}
	c.mu.Unlock()
	return c.next.ProcessTask(ctx, t)
}

// Probe results reach the bot in batches through Redis, and a batch
// stores every result in it that verifies, while each forged result in it
// is refused on its own and changes nothing.
func TestCheckResultBatchesStoreEveryResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := &batchCounter{refused: make(chan executions.RefusedReportError, 16)}
	c.next = &executions.ResultsHandler{Service: b.svc, OnRefused: func(_ context.Context, r executions.RefusedReportError) { c.refused <- r }}
	srv := asynq.NewServer(b.redis, tasks.ResultsServerConfig(asynq.Config{Concurrency: 2, TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.ErrorLevel}))
	if err := srv.Start(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClient(b.redis)
	t.Cleanup(func() { client.Close() })

	due, err := b.store.ClaimDueChecks(b.ctx, b.clock.Now(), 1000)
	if err != nil || len(due) < 10 {
		t.Fatalf("claimed %d checks: %v", len(due), err)
	}
	_, stranger, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	at := b.clock.Now()
	// The stranger's result comes first and is newer: were it believed,
	// it would stand over the genuine one.
	forged, err := tasks.NewCheckResultTask(stranger, tasks.CheckResult{CheckID: due[0].ID.String(), TargetID: due[0].TargetID.String(),
		Actuator: tasks.DefaultActuator, Health: "healthy", Detail: "forged", At: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(forged); err != nil {
		t.Fatal(err)
	}
	for i, d := range due {
		task, err := tasks.NewCheckResultTask(b.reportKey, tasks.CheckResult{CheckID: d.ID.String(), TargetID: d.TargetID.String(),
			Actuator: tasks.DefaultActuator, Health: "degraded", Detail: "batched", Metrics: map[string]float64{"probe_ms": float64(i)},
			At: at.Add(time.Duration(i) * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(task); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-c.refused:
		if r.Reason != executions.RefusedBadSignature || r.CheckID != due[0].ID.String() {
			t.Errorf("refused %+v, want the stranger's result with a bad signature", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stranger's result was not refused")
	}
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	var stored, forgedSeen int
	if err := conn.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE last_health = 'degraded' AND last_detail = 'batched'),
		count(*) FILTER (WHERE last_detail = 'forged') FROM check_defs`).Scan(&stored, &forgedSeen); err != nil {
		t.Fatal(err)
	}
	// The refusal and the batch's write are one task: once it is refused,
	// the batch it came in is stored; the rest may be in a second batch.
	deadline := time.Now().Add(60 * time.Second)
	for stored < len(due) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if err := conn.QueryRow(b.ctx, `SELECT count(*) FROM check_defs WHERE last_health = 'degraded' AND last_detail = 'batched'`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
	}
	if stored != len(due) || forgedSeen != 0 {
		t.Errorf("%d of %d genuine results stored, %d forged", stored, len(due), forgedSeen)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, n := range c.batches {
		total += n
	}
	if c.lone != 0 || total != len(due)+1 || len(c.batches) >= total {
		t.Errorf("the results came as batches of %v and %d alone; want all %d in fewer batches than results", c.batches, c.lone, len(due)+1)
	}
}

// A batch that a writer to Redis put together is checked whole before
// anything of it is read.
func TestMalformedBatchesAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startResults(t)
	w.enqueue(t, tasks.TypeCheckResults, []byte("not a batch"))
	if r := w.next(t); r.Reason != executions.RefusedMalformed {
		t.Errorf("a batch that is not one: refused as %s", r.Reason)
	}
	many := make([][]byte, tasks.MaxCheckResultBatch+1)
	for i := range many {
		many[i] = []byte(`{}`)
	}
	body, err := json.Marshal(many)
	if err != nil {
		t.Fatal(err)
	}
	w.enqueue(t, tasks.TypeCheckResults, body)
	if r := w.next(t); r.Reason != executions.RefusedMalformed {
		t.Errorf("a batch of %d: refused as %s", len(many), r.Reason)
	}
	w.enqueue(t, tasks.TypeCheckResults, mustJSON(t, [][]byte{[]byte("unsigned"), b.sealCheck(t, b.reportKey,
		tasks.CheckResult{CheckID: uuid.NewString(), TargetID: uuid.NewString(), Health: "healthy", At: b.clock.Now()})}))
	got := []executions.ReportRefusal{w.next(t).Reason, w.next(t).Reason}
	if got[0] != executions.RefusedUnsigned && got[1] != executions.RefusedUnsigned {
		t.Errorf("a batch with an unsigned result and one of an unknown check: refusals %v", got)
	}
}
