// Package supervisor runs a process's long-lived services under one
// start/stop contract: started in order, stopped in reverse order, one
// failure stops them all, and each one's health can be asked while it runs.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Service is one long-lived part of a process. Every field but Name is
// optional.
type Service struct {
	// Name identifies the service in logs, errors and Health.
	Name string
	// Start prepares the service; the next service starts only once it
	// returns. An error stops the services already started and ends Run.
	Start func(ctx context.Context) error
	// Run does the service's work until ctx ends. Returning nil earlier
	// means the service is done; returning an error stops every service.
	Run func(ctx context.Context) error
	// Stop releases what Start took. It is called once Run has returned
	// and every service started after this one has stopped.
	Stop func()
	// Health reports the service's own health while it runs; nil means
	// running is healthy.
	Health func(ctx context.Context) error
}

var (
	// ErrNotStarted is Health's answer for a service not started yet.
	ErrNotStarted = errors.New("not started")
	// ErrStopped is Health's answer for a service that is no longer
	// running; a failure is wrapped with it.
	ErrStopped = errors.New("stopped")
)

// Notifier hears when a Run has started every service and when it
// begins to stop them: what a service manager such as systemd wants to
// know (sd_notify READY and STOPPING).
type Notifier interface {
	// Ready is called once per Run, when every service has started.
	Ready()
	// Stopping is called once per Run, before the first service stops.
	Stopping()
}

// Supervisor runs a list of services. Build one with New; Run may be
// called again once it has returned.
type Supervisor struct {
	logger   *slog.Logger
	services []Service
	notifier Notifier

	mu      sync.Mutex
	running bool
	states  []error // per service: ErrNotStarted, nil (running) or ErrStopped
}

// New builds a supervisor for services, which start in the order given.
// A nil logger discards.
func New(logger *slog.Logger, services ...Service) *Supervisor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Supervisor{logger: logger, services: services, states: make([]error, len(services))}
	for i := range s.states {
		s.states[i] = ErrNotStarted
	}
	return s
}

// Notify makes n hear each Run's start and stop; call it before Run.
func (s *Supervisor) Notify(n Notifier) *Supervisor {
	s.notifier = n
	return s
}

// started is a service whose Run goroutine is going.
type started struct {
	idx    int
	cancel context.CancelFunc
	done   chan struct{}
}

// Run starts every service in order and waits until ctx ends or one
// service fails; then it stops them in reverse order. It returns the first
// failure, named for its service, or nil when ctx ended.
func (s *Supervisor) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("supervisor: Run is already running")
	}
	s.running = true
	for i := range s.states {
		s.states[i] = ErrNotStarted
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.running = false; s.mu.Unlock() }()

	failed := make(chan error, len(s.services))
	var up []started
	err := s.startAll(ctx, failed, &up)
	if err == nil && ctx.Err() == nil && s.notifier != nil {
		s.notifier.Ready()
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-failed:
		}
	}
	if err != nil {
		s.logger.Error("service failed; stopping the others", "err", err)
	}
	if s.notifier != nil {
		s.notifier.Stopping()
	}
	for i := len(up) - 1; i >= 0; i-- {
		st := up[i]
		st.cancel()
		<-st.done
		if stop := s.services[st.idx].Stop; stop != nil {
			stop()
		}
		s.setState(st.idx, ErrStopped)
	}
	return err
}

// startAll starts each service in turn, appending it to up, until one
// fails to start, one already running fails, or ctx ends.
func (s *Supervisor) startAll(ctx context.Context, failed chan error, up *[]started) error {
	for i := range s.services {
		if ctx.Err() != nil {
			return nil
		}
		svc := s.services[i]
		sctx, cancel := context.WithCancel(ctx)
		if svc.Start != nil {
			if err := svc.Start(sctx); err != nil {
				cancel()
				s.setState(i, fmt.Errorf("%w: %w", ErrStopped, err))
				return fmt.Errorf("start %s: %w", svc.Name, err)
			}
		}
		st := started{idx: i, cancel: cancel, done: make(chan struct{})}
		s.setState(i, nil)
		go s.run(sctx, st, failed)
		*up = append(*up, st)
		select {
		case err := <-failed:
			return err
		default:
		}
	}
	return nil
}

func (s *Supervisor) run(ctx context.Context, st started, failed chan<- error) {
	defer close(st.done)
	svc := s.services[st.idx]
	if svc.Run == nil {
		<-ctx.Done()
		return
	}
	err := svc.Run(ctx)
	switch {
	case ctx.Err() != nil:
		// Stopping: whatever Run says now is about the stop.
	case err != nil:
		s.setState(st.idx, fmt.Errorf("%w: %w", ErrStopped, err))
		failed <- fmt.Errorf("%s: %w", svc.Name, err)
	default:
		s.logger.Info("service finished", "service", svc.Name)
		s.setState(st.idx, ErrStopped)
	}
}

func (s *Supervisor) setState(i int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.states[i] != nil && errors.Is(s.states[i], ErrStopped) && err == ErrStopped {
		return // keep the failure that stopped it
	}
	s.states[i] = err
}

// Names lists the services in start order.
func (s *Supervisor) Names() []string {
	names := make([]string, len(s.services))
	for i, svc := range s.services {
		names[i] = svc.Name
	}
	return names
}

// Healthy reports whether every service is running and healthy: nil, or
// each one that is not, named, with why.
func (s *Supervisor) Healthy(ctx context.Context) error {
	var errs []error
	for _, name := range s.Names() {
		if err := s.Health(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Health reports the named service: ErrNotStarted before it starts, its
// own Health (or nil) while it runs, and ErrStopped, wrapping its failure
// if it failed, once it has stopped.
func (s *Supervisor) Health(ctx context.Context, name string) error {
	for i, svc := range s.services {
		if svc.Name != name {
			continue
		}
		s.mu.Lock()
		state := s.states[i]
		s.mu.Unlock()
		if state != nil || svc.Health == nil {
			return state
		}
		return svc.Health(ctx)
	}
	return fmt.Errorf("supervisor: no service named %q", name)
}
