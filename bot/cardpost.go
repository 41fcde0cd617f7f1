package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"time"

	"github.com/google/uuid"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// postCard posts the plan card once per execution. A destructive plan's
// card is an escalation (m.text mentioning the operators); every other
// card is a notice. A plan for a room that is not one for plans is carded
// in the ops room instead, and one carded in another room for plans is
// copied to the ops room.
func (b *Bot) postCard(ctx context.Context, room id.RoomID, p executions.Planned, replyTo *event.Event) {
	x := p.Execution
	if to := b.cardRoom(ctx, room); to != room {
		b.logger.Warn("plan for a room that is not one for plans; carding it in the ops room", "execution_id", x.ID, "room_id", room, "ops_room", to)
		room, replyTo = to, nil
	}
	if room == "" {
		b.logger.Error("plan for a room that is not one for plans, and no ops room to card it in; it waits uncarded until it expires", "execution_id", x.ID)
		return
	}
	claimed, err := b.store.ClaimNotice(ctx, x.ID, "card")
	if err != nil || !claimed {
		return
	}
	view := b.cardView(ctx, p)
	plain, htm := RenderCard(view)
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: plain, Mentions: &event.Mentions{}}
	if x.GateClass() == policy.Destructive.String() && x.State == store.StateAwaitingApproval {
		content.MsgType = event.MsgText
		content.Mentions.UserIDs = b.operatorMentions()
	}
	eventID, err := b.trySend(ctx, room, content, htm, replyTo, map[string]any{cardKey: x.ID.String()})
	if err != nil {
		// Given back, so that postUncarded tries again: a plan nobody can
		// see cannot be decided.
		b.logger.Error("post card; it is tried again shortly", "execution_id", x.ID, "room_id", room, "err", err)
		if rerr := b.store.ReleaseNotice(context.WithoutCancel(ctx), x.ID, "card"); rerr != nil {
			b.logger.Error("release the card's claim; the plan stays uncarded", "execution_id", x.ID, "err", rerr)
		}
		return
	}
	if err := b.store.SetCardEvent(ctx, x.ID, room.String(), eventID.String()); err != nil {
		b.logger.Error("record card", "execution_id", x.ID, "err", err)
	}
	b.awaitPreview(ctx, view)
	b.reactToCard(ctx, room, eventID, x)
	b.copyToOpsRoom(ctx, room, plain, htm, x)
	// The execution may have moved while the card was being posted.
	if cur, err := b.store.GetExecution(ctx, x.ID); err == nil && cur.State != x.State {
		b.cards.update(x.ID)
	}
}

// executionForCard finds the execution a card in room shows: by the
// recorded card event, or, for a card whose event id is not recorded yet,
// by the execution id the bot put in the card itself. A reply or reaction
// names its card by event id alone, so a plan whose room is not room is
// never found here: answering a card from another room (one in the clear,
// where the verified-device rule of an encrypted ops room does not apply)
// decides nothing.
func (b *Bot) executionForCard(ctx context.Context, room id.RoomID, card id.EventID) (store.Execution, error) {
	x, err := b.store.ExecutionByCard(ctx, card.String())
	if err == nil {
		if x.RoomID != room.String() {
			return store.Execution{}, fmt.Errorf("execution for card %s: %w: the card is in another room", card, store.ErrNotFound)
		}
		return x, nil
	}
	evt, gerr := b.cli.GetEvent(ctx, room, card)
	if gerr != nil || evt.Sender != b.cli.UserID {
		return store.Execution{}, err
	}
	if evt.Type == event.EventEncrypted && b.crypto != nil {
		_ = evt.Content.ParseRaw(evt.Type)
		if dec, derr := b.crypto.Decrypt(ctx, evt); derr == nil {
			evt = dec
		}
	}
	raw, _ := evt.Content.Raw[cardKey].(string)
	execID, perr := uuid.Parse(raw)
	if perr != nil {
		return store.Execution{}, err
	}
	if x, gerr := b.store.GetExecution(ctx, execID); gerr != nil || x.RoomID != room.String() {
		return store.Execution{}, err
	}
	if serr := b.store.SetCardEvent(ctx, execID, room.String(), card.String()); serr != nil {
		b.logger.Warn("record card", "execution_id", execID, "err", serr)
	}
	return b.store.GetExecution(ctx, execID)
}

// cardMsgType keeps an edit's msgtype the card's own.
func cardMsgType(x store.Execution) event.MessageType {
	if x.GateClass() == policy.Destructive.String() {
		return event.MsgText
	}
	return event.MsgNotice
}

// editCard renders the execution's current state into its card.
// It returns an error when the card should be edited again later: the
// homeserver or the database did not answer.
func (b *Bot) editCard(ctx context.Context, execID uuid.UUID) error {
	x, err := b.store.GetExecution(ctx, execID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	if x.CardEventID == "" || x.RoomID == "" {
		return nil
	}
	p, err := b.exec.Describe(ctx, x)
	if err != nil {
		b.logger.Warn("describe execution for its card", "execution_id", execID, "err", err)
		p = executions.Planned{Execution: x}
	}
	view := b.cardView(ctx, p)
	plain, htm := RenderCard(view)
	if err := b.editMessage(ctx, id.RoomID(x.RoomID), id.EventID(x.CardEventID), cardMsgType(x), plain, htm); err != nil {
		b.logger.Warn("edit card; trying again", "execution_id", execID, "err", err)
		return err
	}
	if err := b.editOpsCopy(ctx, x, plain, htm); err != nil {
		b.logger.Warn("edit the ops room's copy of a card; trying again", "execution_id", execID, "err", err)
		return err
	}
	b.awaitPreview(ctx, view)
	return nil
}

func (b *Bot) cardView(ctx context.Context, p executions.Planned) CardView {
	x := p.Execution
	v := CardView{Planned: p, StatusURL: b.cfg.StatusURL, Now: b.now(), Tail: x.ProgressTail}
	if x.State == store.StateAwaitingApproval && x.RoomID != "" {
		v.VerifiedOnly = b.verifiedOnly(ctx, id.RoomID(x.RoomID))
	}
	if x.State == store.StateAwaitingApproval {
		v.OwnPath = b.cfg.OwnPath
		if len(p.Steps) == 0 {
			v.Preview = b.cardPreview(ctx, x.ID)
		}
		if x.Action == string(policy.ActionNodeReboot) && p.Target.Type == "host" {
			v.HostGuests = b.guestsOn(ctx, p.Target.Name)
		}
		for _, st := range p.Steps {
			v.StepPreviews = append(v.StepPreviews, b.cardPreview(ctx, st.Execution.ID))
		}
	}
	if class, err := policy.ParseClass(x.GateClass()); err == nil {
		v.Quorum = b.exec.Quorum(class)
	}
	v.TargetName = p.Target.Name
	if h, ok := p.Target.Attrs["host"].(string); ok {
		v.Host = h
	} else if p.Target.Type == "host" {
		v.Host = p.Target.Name
	}
	if n, ok := p.Target.Attrs["vmid"].(float64); ok {
		v.VMID = int(n)
	}
	if x.Approval != nil && x.Approval.StandingID != nil {
		if w, err := b.store.WindowByStanding(ctx, *x.Approval.StandingID); err == nil {
			v.Standing = &w
		} else {
			b.logger.Warn("load the standing approval a plan ran under", "execution_id", x.ID, "err", err)
		}
	}
	if x.Approval != nil {
		v.ApprovedBy, v.DecidedMethod = x.Approval.DecidedBy, x.Approval.Method
		if x.State == store.StateRunning || x.State.Terminal() {
			v.Elapsed = x.UpdatedAt.Sub(x.Approval.DecidedAt)
		}
	}
	if x.State == store.StateRunning && x.HeartbeatAt != nil && x.Approval != nil {
		v.Elapsed = b.now().Sub(x.Approval.DecidedAt)
	}
	if len(p.Steps) > 0 {
		// A plan's card shows each step's own output and result.
		v.Tail, v.Result, v.Elapsed = "", nil, 0
		if x.Approval != nil {
			v.Elapsed = planElapsed(p.Steps, x.Approval.DecidedAt)
		}
		return v
	}
	if len(x.Result) > 0 {
		var r tasks.Result
		if json.Unmarshal(x.Result, &r) == nil {
			v.Result = &r
			if !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() {
				v.Elapsed = r.FinishedAt.Sub(r.StartedAt)
			}
		}
	}
	return v
}

// onExecutionEvent follows every committed change: it posts the card of a
// plan requested elsewhere (the agent, MCP), edits existing cards and
// escalates failures.
func (b *Bot) onExecutionEvent(listenCtx context.Context, ev store.ExecutionEvent) {
	// A change seen before shutdown still reaches its card.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(listenCtx), 30*time.Second)
	defer cancel()
	x, err := b.store.GetExecution(ctx, ev.ID)
	if err != nil || x.RoomID == "" {
		return
	}
	b.logger.Debug("execution changed", "execution_id", x.ID, "state", x.State, "card", x.CardEventID)
	// A finished step re-invokes the agent whether or not its card is up.
	if x.State.Terminal() && b.cfg.Agent != nil {
		b.continueAgent(listenCtx, x)
	}
	if x.IsFollower() {
		// A later step of a plan shows on its plan's card.
		head, err := b.store.GetExecution(ctx, x.Head())
		if err != nil || head.CardEventID == "" {
			return
		}
		b.cards.update(head.ID)
		if x.State == store.StateFailed || x.State == store.StateOutcomeUnknown {
			x.CardEventID = head.CardEventID
			b.escalateFailure(ctx, x)
		}
		return
	}
	if x.CardEventID == "" {
		// Chat requests get their card from the message handler, as a reply
		// to the operator; only plans asked for elsewhere (the agent, MCP),
		// or a chat plan whose card never went out, are posted from here.
		elsewhere := x.RequestedVia == "agent" || x.RequestedVia == "mcp" || b.now().Sub(x.CreatedAt) > 10*time.Second
		if elsewhere && (x.State == store.StateAwaitingApproval || x.State == store.StateApproved || x.State == store.StateDispatched) {
			if p, err := b.exec.Describe(ctx, x); err == nil {
				b.postCard(ctx, id.RoomID(x.RoomID), p, nil)
			}
		}
		return
	}
	b.cards.update(x.ID)
	if x.State == store.StateFailed || x.State == store.StateOutcomeUnknown {
		b.escalateFailure(ctx, x)
	}
}

// escalateFailure mentions the operators when a step failed or its outcome
// is unknown and nobody is watching the room.
func (b *Bot) escalateFailure(ctx context.Context, x store.Execution) {
	room := id.RoomID(x.RoomID)
	if !b.operatorsAway(room) {
		return
	}
	claimed, err := b.store.ClaimNotice(ctx, x.ID, "escalation")
	if err != nil || !claimed {
		return
	}
	what := "failed"
	detail := x.Error
	if x.State == store.StateOutcomeUnknown {
		what = "ended with an unknown outcome"
		detail = "It may or may not have run. Check the target, then tell me what happened (it will not be retried on its own). " + x.Error
	}
	detail = redact.String(detail)
	plain := fmt.Sprintf("⚠️ %s on %s %s. %s", x.Action, x.TargetSlug, what, detail)
	htm := fmt.Sprintf("<p>⚠️ <b>%s</b> on <code>%s</code> %s.</p><p>%s</p>", html.EscapeString(x.Action), html.EscapeString(x.TargetSlug), what, html.EscapeString(detail))
	b.sendEscalation(ctx, room, plain, htm, &event.Event{ID: id.EventID(x.CardEventID)})
}

// operatorsAway reports whether no operator has spoken in room for
// QuietPeriod: then what needs them is an escalation that reaches a phone.
func (b *Bot) operatorsAway(room id.RoomID) bool {
	b.mu.Lock()
	last := b.lastOperator[room]
	b.mu.Unlock()
	return last.IsZero() || b.now().Sub(last) >= b.cfg.QuietPeriod
}

// catchUpCards brings recent cards up to date after a start or a lost
// listener connection, when change events may have been missed.
func (b *Bot) catchUpCards(ctx context.Context) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{Limit: 50})
	if err != nil {
		return
	}
	for _, x := range xs {
		if x.CardEventID != "" && (!x.State.Terminal() || b.now().Sub(x.UpdatedAt) < time.Hour) {
			b.cards.update(x.ID)
		}
	}
}

// uncardedAfter is how old a plan with no card must be before
// postUncarded posts it: younger ones are still being carded by whoever
// made them.
const uncardedAfter = 10 * time.Second

// postUncarded posts the card of every live plan that has none: one whose
// send the homeserver failed, every retry included, or that was made while
// the bot was away from Matrix.
func (b *Bot) postUncarded(ctx context.Context) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{
		store.StateAwaitingApproval, store.StateApproved, store.StateDispatched, store.StateRunning,
	}, Limit: 200})
	if err != nil {
		return
	}
	for _, x := range xs {
		if x.CardEventID != "" || x.RoomID == "" || x.IsFollower() || b.now().Sub(x.CreatedAt) < uncardedAfter ||
			b.cardRoom(ctx, id.RoomID(x.RoomID)) == "" { // nowhere to card it; postCard said so once
			continue
		}
		if p, err := b.exec.Describe(ctx, x); err == nil {
			b.postCard(ctx, id.RoomID(x.RoomID), p, nil)
		}
	}
}

// warnExpiring warns, with a mention, about plans close to expiring.
func (b *Bot) warnExpiring(ctx context.Context) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, Limit: 200})
	if err != nil {
		return
	}
	now := b.now()
	for _, x := range xs {
		left := x.ExpiresAt.Sub(now)
		if x.RoomID == "" || x.CardEventID == "" || left <= 0 || left > b.cfg.ExpiryWarning {
			continue
		}
		if ok, err := b.store.ClaimNotice(ctx, x.ID, "expiry_warning"); err != nil || !ok {
			continue
		}
		plain := fmt.Sprintf("⏳ The plan to %s %s expires in %d min (code %s). Approve or deny it before then.", x.Action, x.TargetSlug, int(left.Minutes()+0.5), x.PlanCode)
		b.sendEscalation(ctx, id.RoomID(x.RoomID), plain, "", &event.Event{ID: id.EventID(x.CardEventID)})
	}
}

// guestsOn lists the containers and VMs on host, by vmid; nil when the
// fleet could not be read (the card then says so).
func (b *Bot) guestsOn(ctx context.Context, host string) []store.Entity {
	gs, err := b.store.ListGuests(ctx, "lxc", "vm")
	if err != nil {
		b.logger.Warn("list a node's guests for its reboot card", "host", host, "err", err)
		return nil
	}
	var out []store.Entity
	for _, g := range gs {
		if g.AttrString("host") == host && g.Lifecycle == "active" {
			out = append(out, g.Entity)
		}
	}
	return out
}
