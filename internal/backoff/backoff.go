// Package backoff paces the retries of something that failed: the first
// comes soon, each later one waits twice as long, up to a bound, so a
// short outage is over in a moment and a long one is not hammered.
package backoff

import (
	"cmp"
	"context"
	"time"
)

// Default bounds: 100 ms after the first failure, growing to 2 s.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 2 * time.Second
)

// Backoff is the pause before the next retry. The zero value starts at
// DefaultMin and grows to DefaultMax. It is not safe for concurrent use.
type Backoff struct {
	// Min is the first pause and Max the longest. Zero takes the default.
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the pause before the next retry and doubles the one after.
func (b *Backoff) Next() time.Duration {
	lo, hi := cmp.Or(b.Min, DefaultMin), cmp.Or(b.Max, DefaultMax)
	d := min(max(b.next, lo), hi)
	b.next = min(2*d, hi)
	return d
}

// Reset starts again from Min, after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Wait pauses for Next, and reports false if ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
