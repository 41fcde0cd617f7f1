package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(testenv.Context(t), store.Config{URL: testenv.DatabaseURL(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// process is one bot's scheduler with a daily job that counts its runs.
func process(t *testing.T, st *store.Store, c *testenv.Clock, runs *atomic.Int32, slots *sync.Map) *schedule.Scheduler {
	t.Helper()
	s := schedule.New(schedule.Config{Slots: st, Clock: c.Now})
	err := s.Add(schedule.Job{Name: "daily", Spec: "0 8 * * *", LeaderOnly: true, Run: func(_ context.Context, slot time.Time) error {
		runs.Add(1)
		if _, dup := slots.LoadOrStore(slot, true); dup {
			t.Errorf("slot %s ran twice", slot)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLeaderOnlySlotRunsOnceAcrossProcesses: two schedulers on one
// database (a leader and the standby that took over) run the 08:00 slot
// once between them, even when both look at once; a slot missed while
// neither ran is run once, late, and only the latest of several missed.
func TestLeaderOnlySlotRunsOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := testenv.Context(t)
	day := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	c := testenv.NewClock(day.Add(7*time.Hour + 59*time.Minute))
	var runs atomic.Int32
	var slots sync.Map
	a, b := process(t, st, c, &runs, &slots), process(t, st, c, &runs, &slots)
	a.RunDue(ctx)
	b.RunDue(ctx)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs before 08:00", n)
	}
	c.Set(day.Add(8*time.Hour + time.Second))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { a.RunDue(ctx) })
		wg.Go(func() { b.RunDue(ctx) })
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs of the 08:00 slot, want 1", n)
	}
	// Three days pass with no scheduler running; the next one runs the
	// latest slot once, late.
	c.Set(day.Add(3*24*time.Hour + 11*time.Hour))
	fresh := process(t, st, c, &runs, &slots)
	fresh.RunDue(ctx)
	fresh.RunDue(ctx)
	a.RunDue(ctx)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs after three missed days, want 2 (the latest missed slot once)", n)
	}
	if _, ok := slots.Load(day.Add(3*24*time.Hour + 8*time.Hour)); !ok {
		t.Error("the late run was not the latest missed slot")
	}
}

// TestNewJobSkipsPastSlotsAndRetryRunsAgain: a job first seen after its
// slot of the day does not run it; a run that fails with ErrRetry gives
// its slot back and runs again on the next pass, and any other error
// counts as run.
func TestNewJobSkipsPastSlotsAndRetryRunsAgain(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := testenv.Context(t)
	day := time.Date(2030, 2, 4, 0, 0, 0, 0, time.UTC)
	c := testenv.NewClock(day.Add(9 * time.Hour))
	var calls atomic.Int32
	fail := errors.New("homeserver away")
	s := schedule.New(schedule.Config{Slots: st, Clock: c.Now})
	if err := s.Add(schedule.Job{Name: "retry", Spec: "0 8 * * *", LeaderOnly: true, Run: func(context.Context, time.Time) error {
		switch calls.Add(1) {
		case 1:
			return errors.Join(fail, schedule.ErrRetry)
		case 3:
			return fail
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	s.RunDue(ctx)
	if n := calls.Load(); n != 0 {
		t.Fatalf("a job first seen at 09:00 ran %d times for 08:00", n)
	}
	c.Add(24 * time.Hour)
	s.RunDue(ctx) // fails, retry
	s.RunDue(ctx) // runs
	s.RunDue(ctx) // nothing due
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want a failed one and its retry", n)
	}
	c.Add(24 * time.Hour)
	s.RunDue(ctx) // fails without retry
	s.RunDue(ctx)
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want a plain failure to count as run", n)
	}
}

// TestBadSpecsAreRefused: a job with a malformed spec, or a leader-only
// job without Slots, is refused when added, naming what is wrong.
func TestBadSpecsAreRefused(t *testing.T) {
	t.Parallel()
	run := func(context.Context, time.Time) error { return nil }
	s := schedule.New(schedule.Config{})
	for _, spec := range []string{"", "0 8 * *", "61 * * * *", "@sometimes", "0 8 * * mon extra"} {
		if err := s.Add(schedule.Job{Name: "x", Spec: spec, Run: run}); err == nil {
			t.Errorf("spec %q was accepted", spec)
		}
	}
	if err := s.Add(schedule.Job{Name: "lead", Spec: "@daily", LeaderOnly: true, Run: run}); err == nil {
		t.Error("a leader-only job was accepted without Slots")
	}
	if err := s.Add(schedule.Job{Name: "ok", Spec: "*/15 * * * *", Run: run}); err != nil {
		t.Errorf("a good spec was refused: %v", err)
	}
	if err := s.Add(schedule.Job{Name: "ok", Spec: "@hourly", Run: run}); err == nil {
		t.Error("a second job of the same name was accepted")
	}
}
