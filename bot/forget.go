package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/store"
)

// parseForget reads "forget session <id>".
func parseForget(c *Command, args []token) (string, bool) {
	const usage = "usage: forget session <id>, with the session's id from the status page's Agent page"
	if len(args) != 2 || (args[0].norm != "session" && args[0].norm != "conversation") {
		return usage, false
	}
	if _, err := uuid.Parse(args[1].raw); err != nil {
		return usage, false
	}
	c.Kind, c.Target = CmdForgetSession, args[1].raw
	return "", true
}

// forgetSession deletes an agent session's transcript for an operator;
// anyone else is refused, and the refusal audited.
func (b *Bot) forgetSession(ctx context.Context, evt *event.Event, target string) {
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "forget session "+target)
		return
	}
	id, err := uuid.Parse(target)
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "usage: forget session <id>", "", evt)
		return
	}
	f, err := b.store.DeleteAgentSession(ctx, id, evt.Sender.String(), "operator")
	switch {
	case errors.Is(err, store.ErrNotFound):
		b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("There is no agent session %s: nothing was deleted.", id), "", evt)
		return
	case err != nil:
		b.logger.Error("forget agent session", "session_id", id, "err", err)
		b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("I could not delete agent session %s just now; nothing was deleted. Try again shortly.", id), "", evt)
		return
	}
	b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("Forgot agent session %s: %d messages and %d stored tool outputs deleted. The executions it asked for and the audit log stay.",
		id, f.Messages, f.Blobs), "", evt)
}
