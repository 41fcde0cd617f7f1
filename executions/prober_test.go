package executions_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/tasks"
)

// TestProberSendsEachSlotOnceAndNotBeforeIt: the prober claims the checks
// of its next two ticks ahead, in passes that overlap, and sends each at
// its slot. Every check due is sent once for its slot, none before it.
func TestProberSendsEachSlotOnceAndNotBeforeIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := asynq.NewClient(b.redis)
	defer client.Close()
	const tick = 100 * time.Millisecond
	svc := b.newService(t, client, func(c *executions.Config) { c.Clock = time.Now; c.ProbeInterval = tick })

	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	// Slots spread over the next second, so they fall inside, between
	// and across the passes' windows.
	start := time.Now().Add(300 * time.Millisecond)
	if _, err := conn.Exec(b.ctx, `UPDATE check_defs SET next_run_at = $1::timestamptz + random() * interval '1 second' WHERE enabled`, start); err != nil {
		t.Fatal(err)
	}
	slots := map[string]time.Time{}
	rows, err := conn.Query(b.ctx, `SELECT id::text, next_run_at FROM check_defs WHERE enabled`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		slots[id] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.RunProber(ctx) }()
	// Every slot sent; then ten more ticks, in which none is sent again
	// (each check's next slot is 30 s or more away).
	queue := tasks.ProbeQueue(tasks.DefaultSite)
	deadline := time.Now().Add(30 * time.Second)
	for pending(t, b, queue) < len(slots) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(10 * tick)
	cancel()
	<-done

	tasksOf, err := b.inspector.ListPendingTasks(queue, asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]int{}
	for _, ti := range tasksOf {
		c, err := tasks.VerifyCheckRun(tasks.VerifyKeys{b.pub}, ti.Payload, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		sent[c.CheckID]++
		slot, ok := slots[c.CheckID]
		if !ok {
			t.Errorf("check %s was sent and was not due", c.CheckID)
			continue
		}
		// Postgres keeps microseconds; the clock may read a hair apart.
		if c.IssuedAt.Before(slot.Add(-time.Millisecond)) {
			t.Errorf("check %s was sent at %s, %s before its slot", c.CheckID, c.IssuedAt.Format(time.RFC3339Nano), slot.Sub(c.IssuedAt))
		}
	}
	for id := range slots {
		if sent[id] != 1 {
			t.Errorf("check %s was sent %d times for its slot, want once", id, sent[id])
		}
	}
}

// pending counts the tasks waiting on queue.
func pending(t *testing.T, b *bundle, queue string) int {
	t.Helper()
	q, err := b.inspector.GetQueueInfo(queue)
	if err != nil {
		return 0 // no task yet: the queue does not exist
	}
	return q.Pending
}

// TestProberSkipsDestroyedTargets: a check whose target is destroyed is
// counted skipped and never sent, while the checks of the rest of the
// fleet go out in the same pass. The prober resolves its copy of the
// fleet to probe targets once per read and leaves the destroyed out.
func TestProberSkipsDestroyedTargets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := pgx.Connect(b.ctx, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	var slug string
	var onIt int
	if err := conn.QueryRow(b.ctx, `SELECT e.slug, count(*) FROM check_defs c JOIN entities e ON e.id = c.target_id
		WHERE c.enabled AND e.type = 'lxc' GROUP BY e.slug ORDER BY count(*) DESC, e.slug LIMIT 1`).Scan(&slug, &onIt); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := conn.QueryRow(b.ctx, `SELECT count(*) FROM check_defs WHERE enabled`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	gone, err := b.store.EntityBySlug(b.ctx, slug)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.SetLifecycle(b.ctx, gone.ID, "destroyed"); err != nil {
		t.Fatal(err)
	}

	rep, err := b.svc.ProbeDue(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != onIt || rep.Sent != total-onIt {
		t.Errorf("pass = %+v; want the %d checks on %s skipped and the other %d sent", rep, onIt, slug, total-onIt)
	}
	queued, err := b.inspector.ListPendingTasks(tasks.ProbeQueue(tasks.DefaultSite), asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range queued {
		c, err := tasks.VerifyCheckRun(tasks.VerifyKeys{b.pub}, ti.Payload, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if c.TargetID == gone.ID.String() {
			t.Errorf("check %s sent to the destroyed %s", c.CheckID, slug)
		}
	}
}
