package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// ownCommand reports whether x is a plan user asked for with a plain
// command (or a runbook) in the room: the only plans a bare assent, which
// names no plan, may approve.
func ownCommand(x store.Execution, user id.UserID) bool {
	return (x.RequestedVia == executions.ViaChat || x.RequestedVia == executions.ViaRunbook) && x.RequestedBy == user.String()
}

// verifiedOnly reports whether approvals in room count only from verified
// devices: the room is encrypted and the config does not waive the rule.
func (b *Bot) verifiedOnly(ctx context.Context, room id.RoomID) bool {
	if b.cfg.AllowUnverifiedDevices || b.cli == nil || b.cli.StateStore == nil {
		return false
	}
	enc, err := b.cli.StateStore.IsEncrypted(ctx, room)
	for err != nil && b.awaitStore(ctx) {
		// Postgres went away and is back: ask again rather than refuse an
		// approval for a moment's outage.
		enc, err = b.cli.StateStore.IsEncrypted(ctx, room)
	}
	if err != nil {
		// Not knowing is treated as encrypted: the stricter rule.
		b.logger.Warn("room encryption state", "room_id", room, "err", err)
		return true
	}
	return enc
}

// trustedStates are the trust levels of a device its owner has
// cross-signed (or that this bot verified itself). A master key that
// changed since it was first seen (CrossSignedUntrusted) does not count.
var trustedStates = map[id.TrustState]bool{
	id.TrustStateCrossSignedTOFU:     true,
	id.TrustStateCrossSignedVerified: true,
	id.TrustStateVerified:            true,
}

// unverifiedReason says why an approval event does not count.
type unverifiedReason int

const (
	verifiedDevice   unverifiedReason = iota
	notEncrypted                      // the event was sent in the clear
	unverifiedDevice                  // encrypted, from a device its owner has not cross-signed
	identityChanged                   // cross-signed, by a master key that is not the one first seen, and not verified since
)

// deviceCheck decides whether an approval event may count in a room where
// only verified devices do. The trust resolved when the event was
// decrypted may predate a cross-signing the bot has not synced yet, so a
// device that does not count is looked up again on the server first.
func (b *Bot) deviceCheck(ctx context.Context, evt *event.Event) (unverifiedReason, id.DeviceID) {
	if !evt.Mautrix.WasEncrypted {
		return notEncrypted, ""
	}
	dev := evt.Mautrix.TrustSource
	if trustedStates[evt.Mautrix.TrustState] && dev != nil {
		return verifiedDevice, dev.DeviceID
	}
	if dev == nil || b.crypto == nil {
		return unverifiedDevice, ""
	}
	mach := b.crypto.Machine()
	if _, err := mach.FetchKeys(ctx, []id.UserID{evt.Sender}, true); err != nil {
		b.logger.Warn("refresh the sender's device keys", "sender", evt.Sender, "err", err)
		return unverifiedDevice, dev.DeviceID
	}
	cur, err := mach.CryptoStore.GetDevice(ctx, evt.Sender, dev.DeviceID)
	if err != nil || cur == nil || cur.SigningKey != dev.SigningKey || cur.IdentityKey != dev.IdentityKey {
		return unverifiedDevice, dev.DeviceID
	}
	trust, err := mach.ResolveTrustContext(ctx, cur)
	switch {
	case err == nil && trust == id.TrustStateCrossSignedUntrusted:
		return identityChanged, dev.DeviceID
	case err != nil || !trustedStates[trust]:
		return unverifiedDevice, dev.DeviceID
	}
	return verifiedDevice, dev.DeviceID
}

// approvalCounts applies the verified-device rule to an operator's
// approval of x. When the approval does not count it is audited and the
// sender is told once per device and card, in the card's thread, how to
// make it count.
func (b *Bot) approvalCounts(ctx context.Context, evt *event.Event, x store.Execution) bool {
	if !b.isOperator(evt.Sender) || !b.verifiedOnly(ctx, evt.RoomID) {
		return true
	}
	reason, device := b.deviceCheck(ctx, evt)
	if reason == verifiedDevice {
		return true
	}
	why := "the approval was not encrypted"
	switch reason {
	case unverifiedDevice:
		why = "the approval came from a device its owner has not cross-signed: " + cmp.Or(device.String(), "unknown")
	case identityChanged:
		why = "the sender's identity (cross-signing master key) changed since it was first seen, and was not verified since: " + cmp.Or(device.String(), "unknown")
	}
	b.logger.Info("approval from an unverified device not counted", "execution_id", x.ID, "sender", evt.Sender, "device_id", device, "reason", why)
	err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "execution.decision_refused", ExecutionID: &x.ID,
		Detail: map[string]any{"decision": "approve", "reason": why, "event_id": evt.ID.String()}})
	if err != nil {
		b.logger.Error("audit refused approval", "execution_id", x.ID, "err", err)
	}
	key := "verify_device:" + evt.Sender.String() + ":" + cmp.Or(device.String(), "-")
	switch reason {
	case notEncrypted:
		key = "verify_plaintext:" + evt.Sender.String()
	case identityChanged:
		key = "identity_changed:" + evt.Sender.String()
	}
	if claimed, err := b.store.ClaimNotice(ctx, x.ID, key); err != nil || !claimed {
		return false
	}
	var plain, htm string
	switch reason {
	case notEncrypted:
		plain, htm = NoticeApprovalNotEncrypted(evt.Sender.String(), x.PlanCode)
	case identityChanged:
		plain, htm = NoticeIdentityChanged(evt.Sender.String(), b.cli.UserID.String(), b.cli.DeviceID.String())
	default:
		plain, htm = NoticeUnverifiedDevice(evt.Sender.String(), device.String())
	}
	b.sendInThread(ctx, evt.RoomID, id.EventID(x.CardEventID), plain, htm, evt)
	return false
}

// sendInThread posts a notice in the thread under card, or as a reply to
// fallback when the card is not known.
func (b *Bot) sendInThread(ctx context.Context, room id.RoomID, card id.EventID, plain, htm string, fallback *event.Event) {
	if card == "" {
		b.sendNotice(ctx, room, plain, htm, fallback)
		return
	}
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: plain, Mentions: &event.Mentions{}}
	content.RelatesTo = (&event.RelatesTo{}).SetThread(card, card)
	b.send(ctx, room, content, htm, nil)
}

// onRedaction withdraws an approval whose event (a ✅, a "yes") an
// operator removed before the order went out: the plan is cancelled, with
// an audit entry, and nothing runs. Once the order is dispatched it is too
// late, and the room is told so.
func (b *Bot) onRedaction(ctx context.Context, evt *event.Event) {
	redacted := evt.Redacts
	if redacted == "" {
		if r, ok := evt.Content.Parsed.(*event.RedactionEventContent); ok {
			redacted = r.Redacts
		}
	}
	if redacted == "" || !b.isOperator(evt.Sender) {
		return
	}
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{RoomID: evt.RoomID.String(), States: []store.ExecutionState{
		store.StateApproved, store.StateDispatched, store.StateRunning}, Limit: 200})
	if err != nil {
		b.logger.Error("find the approval a redaction removes", "room_id", evt.RoomID, "err", err)
		return
	}
	var x store.Execution
	for _, c := range xs {
		if c.Approval != nil && c.Approval.Decision == "approved" && c.Approval.EventID == redacted.String() {
			x = c
		}
	}
	if x.Approval == nil || !b.claim(ctx, evt) {
		return
	}
	b.revoke(ctx, evt, x)
}

// revoke cancels an approved plan whose approval was withdrawn: of a plan
// of several steps, every step not yet sent.
func (b *Bot) revoke(ctx context.Context, evt *event.Event, x store.Execution) {
	if x.IsFollower() {
		head, err := b.store.GetExecution(ctx, x.Head())
		if err != nil {
			b.logger.Error("load the plan of a withdrawn approval", "execution_id", x.ID, "err", err)
			return
		}
		x = head
	}
	card := id.EventID(x.CardEventID)
	cancelled, err := b.exec.Cancel(ctx, x.ID, evt.Sender.String())
	if err != nil {
		var decided *executions.AlreadyDecidedError
		if !errors.Is(err, executions.ErrNotPending) && !errors.As(err, &decided) {
			b.logger.Error("revoke an approval", "execution_id", x.ID, "err", err)
		}
		cur, _ := b.store.GetExecution(ctx, x.ID)
		plain := fmt.Sprintf("Too late to withdraw the approval of plan %s: it is already %s. Watch its card for the result.",
			x.PlanCode, strings.ReplaceAll(string(cmp.Or(cur.State, x.State)), "_", " "))
		b.sendInThread(ctx, evt.RoomID, card, plain, escape(plain), evt)
		return
	}
	if err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "execution.approval_revoked", ExecutionID: &x.ID,
		Detail: map[string]any{"approval_event_id": x.Approval.EventID, "redaction_event_id": evt.ID.String()}}); err != nil {
		b.logger.Error("audit revoked approval", "execution_id", x.ID, "err", err)
	}
	b.withdrawOrder(ctx, x)
	b.logger.Info("approval withdrawn; plan cancelled", "execution_id", x.ID, "by", evt.Sender)
	b.cards.update(cancelled.ID)
	plain := fmt.Sprintf("Approval withdrawn: plan %s is cancelled and will not run. Ask again for a fresh plan.", x.PlanCode)
	if cancelled.State != store.StateCancelled {
		// A plan of several steps whose first steps had already gone out.
		plain = fmt.Sprintf("Approval withdrawn: the steps of plan %s that had not started are cancelled and will not run; "+
			"the ones already sent to the actuator finish. Watch its card for what ran.", x.PlanCode)
	}
	b.sendInThread(ctx, evt.RoomID, card, plain, escape(plain), evt)
}

// withdrawTimeout bounds withdrawOrder's reads of the plan and the sites.
const withdrawTimeout = 30 * time.Second

// withdrawOrder deletes a cancelled plan's order from the queue in case a
// dispatch raced the cancel: the order is enqueued a moment before its
// dispatch is recorded. An order the actuator already took cannot be
// withdrawn; its late result is kept in the audit log only.
func (b *Bot) withdrawOrder(ctx context.Context, x store.Execution) {
	if b.inspector == nil {
		return
	}
	// A database that does not answer must not hold up the handler that
	// withdrew the approval: the plan is cancelled already.
	ctx, cancel := context.WithTimeout(ctx, withdrawTimeout)
	defer cancel()
	if x.PlanID != nil {
		// Of a plan, every step that was cancelled.
		steps, err := b.store.PlanSteps(ctx, *x.PlanID)
		if err != nil {
			b.logger.Error("load the steps of a cancelled plan", "execution_id", x.ID, "err", err)
			return
		}
		for _, st := range steps {
			if st.State == store.StateCancelled {
				b.deleteOrder(ctx, st.ID.String())
			}
		}
		return
	}
	b.deleteOrder(ctx, x.ID.String())
}

// deleteOrder deletes one order from its site's queue, if it is still
// there. The order may be on any site's queue, and there are few.
func (b *Bot) deleteOrder(ctx context.Context, executionID string) {
	sites, err := b.store.Sites(ctx)
	if err != nil {
		b.logger.Error("withdraw the order of a cancelled plan", "execution_id", executionID, "err", err)
		return
	}
	for _, site := range sites {
		err := b.inspector.DeleteTask(tasks.OrderQueue(site), executionID)
		switch {
		case err == nil:
			b.logger.Warn("withdrew the order of a cancelled plan from the queue", "execution_id", executionID, "site", site)
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		default:
			b.logger.Error("withdraw the order of a cancelled plan", "execution_id", executionID, "site", site, "err", err)
		}
	}
}

// mayRead reports whether u may read the history of executions and the
// details of entities: operators and the configured readers.
func (b *Bot) mayRead(u id.UserID) bool { return b.isOperator(u) || b.readers[u] }

// refuseReader answers someone who may not read history or details.
func (b *Bot) refuseReader(ctx context.Context, evt *event.Event, what string) {
	err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "chat.refused",
		Detail: map[string]any{"what": what, "event_id": evt.ID.String(), "room_id": evt.RoomID.String()}})
	if err != nil {
		b.logger.Error("audit refusal", "err", err)
	}
	plain, htm := NoticeNotReader(evt.Sender.String())
	b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
}
