package bot

import (
	"context"
	"time"

	"github.com/nomoshq/nomos/internal/schedule"
)

// sessionPruneJob is the scheduler's job that deletes agent sessions past
// their retention, at the top of every hour, on the leading bot.
const sessionPruneJob = "agent_sessions:prune"

// sessionPruneBatch bounds the sessions deleted in one transaction.
const sessionPruneBatch = 200

// sessionRetentionJob deletes, every hour, the agent sessions untouched
// for longer than SessionRetention. It is leader-only, so of several bots
// one prunes, and an hour missed while none led is pruned once, late.
func (b *Bot) sessionRetentionJob() schedule.Job {
	return schedule.Job{Name: sessionPruneJob, Spec: "@hourly", LeaderOnly: true,
		Run: func(ctx context.Context, _ time.Time) error {
			b.pruneSessions(ctx)
			return nil
		}}
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
