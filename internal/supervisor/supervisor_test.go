package supervisor_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/nomoshq/nomos/internal/supervisor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal records what the services did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) { j.mu.Lock(); j.lines = append(j.lines, s); j.mu.Unlock() }
func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// waiter is a service that runs until its context ends.
func waiter(j *journal, name string) supervisor.Service {
	return supervisor.Service{
		Name:  name,
		Start: func(context.Context) error { j.add("start " + name); return nil },
		Run:   func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		Stop:  func() { j.add("stop " + name) },
	}
}

func TestStartsInOrderAndStopsInReverseOnCancel(t *testing.T) {
	var j journal
	ctx, cancel := context.WithCancel(context.Background())
	// The last service cancels once it has started: every earlier one
	// must have started by then.
	last := waiter(&j, "c")
	last.Start = func(context.Context) error { j.add("start c"); cancel(); return nil }
	s := supervisor.New(nil, waiter(&j, "a"), waiter(&j, "b"), last)
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("journal = %q, want %q", got, want)
	}
}

func TestOneFailureStopsTheRestWithItsError(t *testing.T) {
	var j journal
	boom := errors.New("boom")
	ready := make(chan struct{})
	failing := supervisor.Service{
		Name: "failing",
		Run: func(ctx context.Context) error {
			<-ready
			return boom
		},
	}
	third := waiter(&j, "third")
	third.Start = func(context.Context) error { j.add("start third"); close(ready); return nil }
	s := supervisor.New(nil, waiter(&j, "first"), failing, third)
	err := s.Run(context.Background())
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the failing service's error", err)
	}
	if got, want := err.Error(), "failing: boom"; got != want {
		t.Errorf("Run error = %q, want %q", got, want)
	}
	want := []string{"start first", "start third", "stop third", "stop first"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("journal = %q, want %q", got, want)
	}
	if h := s.Health(context.Background(), "failing"); !errors.Is(h, supervisor.ErrStopped) || !errors.Is(h, boom) {
		t.Errorf("Health(failing) = %v, want ErrStopped wrapping boom", h)
	}
}

func TestStartFailureStopsWhatStarted(t *testing.T) {
	var j journal
	bad := errors.New("no database")
	broken := supervisor.Service{Name: "broken", Start: func(context.Context) error { return bad }}
	s := supervisor.New(nil, waiter(&j, "a"), broken, waiter(&j, "never"))
	err := s.Run(context.Background())
	if !errors.Is(err, bad) || err.Error() != "start broken: no database" {
		t.Fatalf("Run = %v, want start broken: no database", err)
	}
	want := []string{"start a", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("journal = %q, want %q", got, want)
	}
	if h := s.Health(context.Background(), "never"); !errors.Is(h, supervisor.ErrNotStarted) {
		t.Errorf("Health(never) = %v, want ErrNotStarted", h)
	}
}

func TestHealthFollowsTheService(t *testing.T) {
	sick := errors.New("homeserver unreachable")
	var mu sync.Mutex
	var health error
	running := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s := supervisor.New(nil, supervisor.Service{
		Name: "sync",
		Run:  func(ctx context.Context) error { close(running); <-ctx.Done(); return nil },
		Health: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return health
		},
	})
	if h := s.Health(ctx, "sync"); !errors.Is(h, supervisor.ErrNotStarted) {
		t.Errorf("before Run: Health = %v, want ErrNotStarted", h)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	<-running
	if h := s.Health(ctx, "sync"); h != nil {
		t.Errorf("running: Health = %v, want nil", h)
	}
	mu.Lock()
	health = sick
	mu.Unlock()
	if h := s.Health(ctx, "sync"); !errors.Is(h, sick) {
		t.Errorf("running, sick: Health = %v, want %v", h, sick)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if h := s.Health(context.Background(), "sync"); !errors.Is(h, supervisor.ErrStopped) {
		t.Errorf("after Run: Health = %v, want ErrStopped", h)
	}
	if h := s.Health(context.Background(), "nope"); h == nil {
		t.Error("Health of an unknown service = nil, want an error")
	}
}

func TestFinishedServiceLeavesTheOthersRunning(t *testing.T) {
	var j journal
	ctx, cancel := context.WithCancel(context.Background())
	once := supervisor.Service{Name: "once", Run: func(context.Context) error { j.add("once ran"); return nil }}
	// The watcher waits for once to have stopped, then ends the run: the
	// supervisor must still be up, so stop w is recorded after.
	var s *supervisor.Supervisor
	w := waiter(&j, "w")
	w.Run = func(ctx context.Context) error {
		for !errors.Is(s.Health(ctx, "once"), supervisor.ErrStopped) {
			select {
			case <-ctx.Done():
				return nil
			default:
			}
		}
		j.add("once stopped, w still running")
		cancel()
		<-ctx.Done()
		return nil
	}
	s = supervisor.New(nil, once, w)
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []string{"once ran", "start w", "once stopped, w still running", "stop w"}
	got := j.get()
	// once may run before or after w starts; the rest is ordered.
	slices.Sort(got[:2])
	slices.Sort(want[:2])
	if !slices.Equal(got, want) {
		t.Errorf("journal = %q, want %q", got, want)
	}
}

func TestRunTwiceAtOnceIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	s := supervisor.New(nil, supervisor.Service{Name: "x", Run: func(ctx context.Context) error { close(started); <-ctx.Done(); return nil }})
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	<-started
	if err := s.Run(ctx); err == nil {
		t.Error("second Run while the first runs = nil, want an error")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// notes records a Notifier's calls in the services' journal.
type notes struct{ j *journal }

func (n notes) Ready()    { n.j.add("ready") }
func (n notes) Stopping() { n.j.add("stopping") }

// TestNotifierHearsReadyAfterEveryStart: Ready comes after the last
// service started, and Stopping before the first one stops.
func TestNotifierHearsReadyAfterEveryStart(t *testing.T) {
	j := &journal{}
	ctx, cancel := context.WithCancel(context.Background())
	s := supervisor.New(nil, waiter(j, "a"), waiter(j, "b")).Notify(notes{j})
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	for !slices.Contains(j.get(), "ready") {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "ready", "stopping", "stop b", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestNotifierNotReadyWhenAStartFails: a service that fails to start
// means the process never was ready.
func TestNotifierNotReadyWhenAStartFails(t *testing.T) {
	j := &journal{}
	bad := supervisor.Service{Name: "bad", Start: func(context.Context) error { return errors.New("no port") }}
	err := supervisor.New(nil, waiter(j, "a"), bad).Notify(notes{j}).Run(context.Background())
	if err == nil {
		t.Fatal("Run succeeded although a start failed")
	}
	want := []string{"start a", "stopping", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestHealthyNamesEachUnhealthyService: Healthy is nil only while every
// service runs and says it is healthy, and names each one that is not.
func TestHealthyNamesEachUnhealthyService(t *testing.T) {
	j := &journal{}
	var mu sync.Mutex
	var redisErr error
	redis := waiter(j, "redis")
	redis.Health = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return redisErr }
	s := supervisor.New(nil, waiter(j, "http"), redis).Notify(notes{j})
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Healthy(ctx); !errors.Is(err, supervisor.ErrNotStarted) {
		t.Errorf("before Run: %v, want not started", err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	for !slices.Contains(j.get(), "ready") {
		runtime.Gosched()
	}
	if err := s.Healthy(ctx); err != nil {
		t.Errorf("all running: %v", err)
	}
	mu.Lock()
	redisErr = errors.New("no consumer")
	mu.Unlock()
	err := s.Healthy(ctx)
	if err == nil || err.Error() != "redis: no consumer" {
		t.Errorf("redis unhealthy: %v, want \"redis: no consumer\"", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := s.Healthy(context.Background()); !errors.Is(err, supervisor.ErrStopped) {
		t.Errorf("after Run: %v, want stopped", err)
	}
}
