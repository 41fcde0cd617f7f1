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
// becomes one edit and the last state is never skipped. An edit the
// homeserver did not take is tried again, backing off to maxEditRetry,
// so results that end while it is away reach their cards once it is back.
type editor struct {
	interval time.Duration
	now      func() time.Time
	edit     func(context.Context, uuid.UUID) error
	logger   *slog.Logger

	mu      sync.Mutex
	last    map[uuid.UUID]time.Time
	pending map[uuid.UUID]*time.Timer
	// failures counts the edits of a card that failed in a row.
	failures map[uuid.UUID]int
	wg       sync.WaitGroup
	stopped  bool
}

func newEditor(interval time.Duration, now func() time.Time, edit func(context.Context, uuid.UUID) error, logger *slog.Logger) *editor {
	return &editor{interval: interval, now: now, edit: edit, logger: logger,
		last: map[uuid.UUID]time.Time{}, pending: map[uuid.UUID]*time.Timer{}, failures: map[uuid.UUID]int{}}
}

// maxEditRetry bounds the wait before a failed edit is tried again.
const maxEditRetry = 5 * time.Second

// maxEditFailures is how many failed edits in a row, about ten minutes of
// them, end the retries: a homeserver away for longer, or one that
// refuses the edit outright.
const maxEditFailures = 120

// update asks for the card of execution id to be brought up to date.
func (e *editor) update(id uuid.UUID) {
	e.schedule(id, 0)
}

// schedule runs the card's edit no sooner than after, nor within interval
// of its last one.
//
//nolint:contextcheck // the edit runs later on its own timer, after the caller has returned, with its own deadline.
func (e *editor) schedule(id uuid.UUID, after time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.pending[id] != nil {
		return // an edit is already scheduled and will render the newest state
	}
	wait := max(e.interval-e.now().Sub(e.last[id]), after, 0)
	e.wg.Add(1)
	e.pending[id] = time.AfterFunc(wait, func() {
		defer e.wg.Done()
		e.mu.Lock()
		delete(e.pending, id)
		e.last[id] = e.now()
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := e.edit(ctx, id)
		e.mu.Lock()
		n := 0
		if err != nil {
			e.failures[id]++
			n = e.failures[id]
		} else {
			delete(e.failures, id)
		}
		e.mu.Unlock()
		switch {
		case err == nil:
		case n > maxEditFailures:
			e.logger.Error("card edit failed too often; giving up until the execution changes again", "execution_id", id, "err", err)
			e.mu.Lock()
			delete(e.failures, id)
			e.mu.Unlock()
		default:
			e.schedule(id, min(time.Duration(1<<min(n, 10))*100*time.Millisecond, maxEditRetry))
		}
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
