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
