package bot

import (
	"context"
	"time"

	"github.com/nomoshq/nomos/internal/loop"
)

// sessionPruneInterval is how often the leading bot looks for agent
// sessions past their retention.
const sessionPruneInterval = time.Hour

// sessionPruneBatch bounds the sessions deleted in one transaction.
const sessionPruneBatch = 200

// runSessionRetention deletes, every sessionPruneInterval, the agent
// sessions untouched for longer than SessionRetention. It is a job of its
// own, apart from the rest of the bot, so a shared scheduler can take it
// over as it is.
func (b *Bot) runSessionRetention(ctx context.Context) error {
	loop.Every(ctx, sessionPruneInterval, func(ctx context.Context) { b.pruneSessions(ctx) })
	return nil
}

// pruneSessions deletes every session past its retention at b.now, a
// batch at a time, and returns how many went.
func (b *Bot) pruneSessions(ctx context.Context) int {
	before := b.now().Add(-b.cfg.SessionRetention)
	total := 0
	for {
		n, err := b.store.PruneAgentSessions(ctx, before, sessionPruneBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				b.logger.Warn("prune agent sessions", "err", err)
			}
			break
		}
		if n < sessionPruneBatch {
			break
		}
	}
	if total > 0 {
		b.logger.Info("pruned agent sessions past their retention", "sessions", total, "retention", b.cfg.SessionRetention.String())
	}
	return total
}
