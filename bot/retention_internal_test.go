package bot

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// retentionSetup is a database with one agent session, touched now.
func retentionSetup(t *testing.T) (context.Context, *store.Store, store.AgentSession) {
	t.Helper()
	ctx := testenv.Context(t)
	st := testenv.Store(t)
	old, err := st.EnsureAgentSession(ctx, "!ops:test", "$old")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, st, old
}

// TestSessionRetentionPrunesOnTheBotsClock: the retention job deletes the
// sessions untouched for longer than SessionRetention at the bot's clock,
// and keeps a session touched since.
func TestSessionRetentionPrunesOnTheBotsClock(t *testing.T) {
	t.Parallel()
	ctx, st, old := retentionSetup(t)
	now := time.Now().Add(31 * 24 * time.Hour) // a month on, the session is old
	b := &Bot{store: st, logger: testenv.Logger(t), now: func() time.Time { return now },
		cfg: Config{SessionRetention: 30 * 24 * time.Hour}}
	fresh, err := st.EnsureAgentSession(ctx, "!ops:test", "$fresh")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgentSessionTitle(ctx, fresh.ID, "touched"); err != nil {
		t.Fatal(err)
	}
	// Both were touched just now, a month before the bot's clock: both go.
	if n := b.pruneSessions(ctx); n != 2 {
		t.Fatalf("pruned %d sessions a month on, want 2", n)
	}
	if _, err := st.AgentSession(ctx, old.ID); err == nil {
		t.Error("the old session is still there")
	}
	// Retention is measured from now: nothing younger goes.
	if _, err := st.EnsureAgentSession(ctx, "!ops:test", "$new"); err != nil {
		t.Fatal(err)
	}
	now = time.Now().Add(29 * 24 * time.Hour)
	if n := b.pruneSessions(ctx); n != 0 {
		t.Errorf("pruned %d sessions 29 days on, want none", n)
	}
}

// TestSessionRetentionRunsOnTheScheduler: the prune is a leader-only job
// of the bot's one scheduler, not a ticker of its own. A pass of the
// scheduler a month on deletes the old session; with retention 0 there is
// no job at all.
func TestSessionRetentionRunsOnTheScheduler(t *testing.T) {
	t.Parallel()
	ctx, st, old := retentionSetup(t)
	now := time.Now()
	clock := func() time.Time { return now }
	b := &Bot{store: st, logger: testenv.Logger(t), now: clock, cfg: Config{SessionRetention: 30 * 24 * time.Hour},
		sched: schedule.New(schedule.Config{Slots: st, Clock: clock, Logger: testenv.Logger(t)})}
	if err := b.addJobs(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(b.sched.Names(), sessionPruneJob) {
		t.Fatalf("scheduler jobs = %v, want %s among them", b.sched.Names(), sessionPruneJob)
	}
	b.sched.RunDue(ctx) // first seen now: no slot from before runs
	if _, err := st.AgentSession(ctx, old.ID); err != nil {
		t.Fatalf("the session is gone before any slot fell due: %v", err)
	}
	now = now.Add(31 * 24 * time.Hour)
	b.sched.RunDue(ctx)
	if _, err := st.AgentSession(ctx, old.ID); err == nil {
		t.Error("a scheduler pass a month on left the old session")
	}

	off := &Bot{store: st, logger: testenv.Logger(t), now: clock, sched: schedule.New(schedule.Config{Slots: st})}
	if err := off.addJobs(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(off.sched.Names(), sessionPruneJob) {
		t.Errorf("with retention 0 the scheduler has %v, want no prune", off.sched.Names())
	}
}
