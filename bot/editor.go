package bot

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// editor coalesces card edits: at most one edit per card every interval,
// always rendering the newest state when it fires, so a burst of progress
// becomes one edit and the last state is never skipped.
type editor struct {
	interval time.Duration
	now      func() time.Time
	edit     func(context.Context, uuid.UUID)
	logger   *slog.Logger

	mu      sync.Mutex
	last    map[uuid.UUID]time.Time
	pending map[uuid.UUID]*time.Timer
	wg      sync.WaitGroup
	stopped bool
}

func newEditor(interval time.Duration, now func() time.Time, edit func(context.Context, uuid.UUID), logger *slog.Logger) *editor {
	return &editor{interval: interval, now: now, edit: edit, logger: logger,
		last: map[uuid.UUID]time.Time{}, pending: map[uuid.UUID]*time.Timer{}}
}

// update asks for the card of execution id to be brought up to date.
func (e *editor) update(id uuid.UUID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.pending[id] != nil {
		return // an edit is already scheduled and will render the newest state
	}
	wait := e.interval - e.now().Sub(e.last[id])
	if wait < 0 {
		wait = 0
	}
	e.wg.Add(1)
	e.pending[id] = time.AfterFunc(wait, func() {
		defer e.wg.Done()
		e.mu.Lock()
		delete(e.pending, id)
		e.last[id] = e.now()
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.edit(ctx, id)
	})
}

// stop cancels scheduled edits that have not started and waits for the
// running ones.
func (e *editor) stop() {
	e.mu.Lock()
	e.stopped = true
	for id, t := range e.pending {
		if t.Stop() {
			e.wg.Done()
		}
		delete(e.pending, id)
	}
	e.mu.Unlock()
	e.wg.Wait()
}
