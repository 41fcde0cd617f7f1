package leader_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/nomoshq/nomos/internal/leader"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// noLeak fails t if a goroutine the test started outlives it.
func noLeak(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt, testenv.IgnoreDrops()) })
}

// contender is one process's elector with the work it runs as leader.
type contender struct {
	e       *leader.Elector
	running atomic.Int32 // 1 while its leader work runs
	starts  atomic.Int32
	stops   atomic.Int32 // times its leader work ended
	done    chan error
	cancel  context.CancelFunc
}

func start(t *testing.T, url string, who ...string) *contender {
	t.Helper()
	e, err := leader.New(leader.Config{Lock: store.NewLeaderLock(url, store.LeaderLockBot), Poll: 50 * time.Millisecond, Logger: testenv.Logger(t).With("who", who)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &contender{e: e, done: make(chan error, 1), cancel: cancel}
	go func() {
		c.done <- e.Run(ctx, func(ctx context.Context) error {
			c.starts.Add(1)
			c.running.Store(1)
			defer c.stops.Add(1)
			defer c.running.Store(0)
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *contender) stop(t *testing.T) {
	c.cancel()
	if err := <-c.done; err != nil {
		t.Errorf("Run = %v", err)
	}
	c.done <- nil // a second stop returns at once
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testenv.Context(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestOneLeadsAndTheStandbyTakesOverWhenItStops(t *testing.T) {
	noLeak(t)
	url := testenv.DatabaseURL(t)
	a := start(t, url, "a")
	waitFor(t, "a leads", a.e.Leading)
	b := start(t, url, "b")
	// b tries the lock several times while a holds it.
	time.Sleep(200 * time.Millisecond)
	if b.e.Leading() || b.starts.Load() != 0 {
		t.Fatal("b leads while a holds the lock")
	}
	if err := b.e.Health(context.Background()); !errors.Is(err, leader.ErrStandby) {
		t.Errorf("standby Health = %v, want ErrStandby", err)
	}
	a.stop(t)
	if a.running.Load() != 0 {
		t.Error("a's leader work still runs after Run returned")
	}
	waitFor(t, "b leads", b.e.Leading)
	waitFor(t, "b's leader work runs", func() bool { return b.running.Load() == 1 })
	if err := b.e.Health(context.Background()); err != nil {
		t.Errorf("leader Health = %v, want nil", err)
	}
}

// TestLostConnectionStopsTheLeadersWork: when the leader's lock
// connection dies, its leader work stops without the process being told,
// and the other contender leads.
func TestLostConnectionStopsTheLeadersWork(t *testing.T) {
	noLeak(t)
	url := testenv.DatabaseURL(t)
	a := start(t, url, "a")
	waitFor(t, "a leads", a.e.Leading)
	waitFor(t, "a's leader work runs", func() bool { return a.running.Load() == 1 })
	b := start(t, url, "b")
	ctx := testenv.Context(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// Kill the connection holding this database's leader lock: a's.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() AND l.pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	// a may lead again at once, before b tries: its work stopping once is
	// what counts.
	waitFor(t, "a's leader work stops", func() bool { return a.stops.Load() == 1 })
	waitFor(t, "someone leads again", func() bool { return a.e.Leading() || b.e.Leading() })
	if a.e.Leading() && b.e.Leading() {
		t.Fatal("both lead")
	}
	if a.starts.Load()+b.starts.Load() != 2 {
		t.Errorf("leader work started %d+%d times, want 2 in all", a.starts.Load(), b.starts.Load())
	}
}

// TestLeaderWorkErrorEndsRun: a failure of the leader's work is not a lost
// lock: Run returns it.
func TestLeaderWorkErrorEndsRun(t *testing.T) {
	e, err := leader.New(leader.Config{Lock: store.NewLeaderLock(testenv.DatabaseURL(t), store.LeaderLockBot), Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := e.Run(testenv.Context(t), func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	if e.Leading() {
		t.Error("still leading after Run returned")
	}
}
