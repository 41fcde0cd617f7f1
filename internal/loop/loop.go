// Package loop runs the periodic jobs of the bot and the executions
// service (reconciler, prober, expiry warnings, the status page's fleet
// poll) with one shape: run now, then once a tick, until the context ends.
package loop

import (
	"context"
	"time"
)

// Every runs fn at once and then every d until ctx ends. A run that takes
// longer than d delays the next one rather than stacking them.
func Every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
