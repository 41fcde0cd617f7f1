package bot

import (
	"context"

	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// Reactions the bot puts under a card awaiting approval, so an operator
// on a phone taps one instead of searching for the emoji.
const (
	reactApprove = "✅"
	reactDeny    = "❌"
)

// cardReactions is what the bot reacts to a new card with. A destructive
// plan is approved by its typed phrase alone, and in a room where
// approvals must come from a verified device a reaction (which Element
// sends unencrypted) never approves: there a ✅ would be a button that
// does nothing, so only ❌ is offered. The bot's own reactions decide
// nothing (claim ignores the bot's own events).
func (b *Bot) cardReactions(ctx context.Context, room id.RoomID, x store.Execution) []string {
	if x.State != store.StateAwaitingApproval {
		return nil
	}
	if x.GateClass() == policy.Destructive.String() || b.verifiedOnly(ctx, room) {
		return []string{reactDeny}
	}
	return []string{reactApprove, reactDeny}
}

// reactToCard adds the card's reactions. A reaction that fails is only
// logged: the card works without it.
func (b *Bot) reactToCard(ctx context.Context, room id.RoomID, card id.EventID, x store.Execution) {
	for _, key := range b.cardReactions(ctx, room, x) {
		if _, err := b.cli.SendReaction(ctx, room, card, key); err != nil {
			b.logger.Warn("react to card", "execution_id", x.ID, "key", key, "err", err)
		}
	}
}
