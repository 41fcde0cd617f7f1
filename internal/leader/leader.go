// Package leader lets one of several processes lead: it holds a lock, runs
// the leader's work while it holds it, and stops that work as soon as it
// may have lost it. The others stand by and try the lock until it is free.
package leader

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nomoshq/nomos/internal/backoff"
)

// Lock is a lock that dies with its holder, such as a Postgres session
// advisory lock (store.LeaderLock).
type Lock interface {
	// TryAcquire takes the lock if it is free, without waiting.
	TryAcquire(ctx context.Context) (bool, error)
	// Held returns nil while the lock is certainly held.
	Held(ctx context.Context) error
	// Release gives the lock up.
	Release()
}

// Config configures an Elector.
type Config struct {
	// Lock is the lock to lead by. Required.
	Lock Lock
	// Poll is how often a standby tries the lock and the leader checks
	// that it still holds it. Default 1s.
	Poll time.Duration
	// Logger receives the elector's logs. Default: discarded.
	Logger *slog.Logger
}

// Elector runs the leader's work while it holds the lock.
type Elector struct {
	cfg     Config
	log     *slog.Logger
	leading atomic.Bool
}

// ErrStandby is what a check of a leader-only part answers on a standby.
var ErrStandby = errors.New("standby")

// New builds an elector.
func New(cfg Config) (*Elector, error) {
	if cfg.Lock == nil {
		return nil, errors.New("leader: Lock is required")
	}
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Elector{cfg: cfg, log: log}, nil
}

// Leading reports whether the leader's work is running here.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Health is nil while leading and ErrStandby otherwise.
func (e *Elector) Health(context.Context) error {
	if e.Leading() {
		return nil
	}
	return ErrStandby
}

// Run waits for the lock and runs lead while it holds it, until ctx ends.
// lead's context ends as soon as the lock may be lost; Run then stands by
// again. An error from lead ends Run with it, and gives the lock up.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error) error {
	defer e.cfg.Lock.Release()
	for {
		if !e.await(ctx) {
			return nil
		}
		e.log.Info("leading: this process holds the leader lock")
		e.leading.Store(true)
		lost, err := e.lead(ctx, lead)
		e.leading.Store(false)
		e.cfg.Lock.Release()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case lost:
			e.log.Warn("standing by: the leader lock was lost, and the leader's work has stopped")
		}
	}
}

// await tries the lock every Poll until it has it (true) or ctx ends.
// While the lock cannot be tried at all (Postgres restarting), it tries
// again 100 ms later, growing to Poll, so the leader is back within a
// moment of the database.
func (e *Elector) await(ctx context.Context) bool {
	said := false
	pause := backoff.Backoff{Max: e.cfg.Poll}
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*e.cfg.Poll)
		ok, err := e.cfg.Lock.TryAcquire(tctx)
		cancel()
		switch {
		case ok:
			return true
		case err != nil && ctx.Err() == nil:
			e.log.Warn("cannot try the leader lock; trying again", "err", err)
			if !pause.Wait(ctx) {
				return false
			}
			continue
		case err == nil && !said:
			e.log.Info("standing by: another process holds the leader lock")
			said = true
		}
		pause.Reset()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(e.cfg.Poll):
		}
	}
}

// lead runs lead, checking every Poll that the lock is still held; when
// it may not be, lead's context ends at once and lost is true.
func (e *Elector) lead(ctx context.Context, lead func(context.Context) error) (lost bool, err error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- lead(lctx) }()
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return false, err
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, 2*e.cfg.Poll)
		herr := e.cfg.Lock.Held(hctx)
		hcancel()
		if herr != nil && ctx.Err() == nil {
			e.log.Error("the leader lock may be lost: stopping the leader's work", "err", herr)
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				e.log.Error("the leader's work, stopped for the lost lock, ended with an error", "err", err)
			}
			return true, nil
		}
	}
}
