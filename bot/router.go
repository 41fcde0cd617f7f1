package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// onMember joins a room when an operator invites the bot and declines
// every other invite. A room that is not one for plans hears where plans
// belong instead of the greeting.
func (b *Bot) onMember(ctx context.Context, evt *event.Event) {
	if evt.GetStateKey() != b.cli.UserID.String() {
		return
	}
	m := evt.Content.AsMember()
	// Only a pending invite counts: the same event also comes back in a
	// joined room's state, and must not make the bot greet again.
	if m.Membership != event.MembershipInvite || evt.Mautrix.EventSource&event.SourceInvite == 0 {
		return
	}
	key := evt.ID.String()
	if key == "" { // stripped invite state carries no event id
		key = fmt.Sprintf("invite:%s:%s:%d", evt.RoomID, evt.Sender, evt.Timestamp)
	}
	if ok, err := b.store.MarkEventHandled(ctx, evt.RoomID.String(), key); err != nil || !ok {
		return
	}
	if !b.isOperator(evt.Sender) {
		b.logger.Info("declining invite from a non-operator", "room_id", evt.RoomID, "inviter", evt.Sender)
		if _, err := b.cli.LeaveRoom(ctx, evt.RoomID); err != nil {
			b.logger.Warn("decline invite", "room_id", evt.RoomID, "err", err)
		}
		return
	}
	if _, err := b.cli.JoinRoomByID(ctx, evt.RoomID); err != nil {
		b.logger.Error("join room", "room_id", evt.RoomID, "err", err)
		return
	}
	b.logger.Info("joined room", "room_id", evt.RoomID, "inviter", evt.Sender)
	if !slices.Contains(b.planRooms(), evt.RoomID) {
		b.sayWhereOnce(ctx, evt.RoomID, roomNotListed)
		return
	}
	plain, htm := Help()
	b.sendNotice(ctx, evt.RoomID, "Hello, I am Nomos. "+plain, "<p>Hello, I am Nomos.</p>"+htm, nil)
}

// claim de-duplicates events by id and skips those older than the bot's
// first sync, so neither a restart nor a first start acts on old history.
func (b *Bot) claim(ctx context.Context, evt *event.Event) bool {
	return b.claimWith(ctx, evt, b.store.MarkEventHandled)
}

// claimDecision is claim for an event that carries a decision: a decision
// that the bot was handling when it died is claimed again when the sync
// replays, instead of being lost. finishDecision ends the claim. Deciding
// twice is safe, since the first decision on a plan is the only one.
func (b *Bot) claimDecision(ctx context.Context, evt *event.Event) bool {
	return b.claimWith(ctx, evt, b.store.ClaimEvent)
}

func (b *Bot) claimWith(ctx context.Context, evt *event.Event, claim func(ctx context.Context, roomID, eventID string) (bool, error)) bool {
	if evt.Sender == b.cli.UserID || time.UnixMilli(evt.Timestamp).Before(b.startedAt.Add(-time.Minute)) {
		return false
	}
	ok, err := claim(ctx, evt.RoomID.String(), evt.ID.String())
	if err != nil {
		b.logger.Error("claim an event", "event_id", evt.ID, "err", err)
		return false
	}
	return ok
}

func (b *Bot) finishDecision(ctx context.Context, evt *event.Event) {
	if err := b.store.FinishEvent(ctx, evt.ID.String()); err != nil {
		b.logger.Error("finish a decision", "event_id", evt.ID, "err", err)
	}
}

func (b *Bot) onMessage(ctx context.Context, evt *event.Event) {
	msg := evt.Content.AsMessage()
	if msg.MsgType != event.MsgText || msg.RelatesTo.GetReplaceID() != "" {
		return // notices (other bots), media and edits are not commands
	}
	if !b.claim(ctx, evt) {
		return
	}
	if b.isOperator(evt.Sender) {
		b.mu.Lock()
		b.lastOperator[evt.RoomID] = b.now()
		b.mu.Unlock()
	}
	stopTyping := b.typingAfter(ctx, evt.RoomID, typingDelay)
	handedOff := false // the agent marks it read when its turn ends
	defer func() {
		stopTyping()
		if !handedOff {
			b.markRead(ctx, evt)
		}
	}()
	body := strings.TrimSpace(stripReplyFallback(msg.Body))
	if replyTo := msg.RelatesTo.GetReplyTo(); replyTo != "" {
		if x, err := b.executionForCard(ctx, evt.RoomID, replyTo); err == nil {
			if b.forPlans(ctx, evt, "decide "+x.PlanCode+" by a reply") {
				b.decideByText(ctx, evt, x, body, true)
			}
			return
		}
		if b.signalReply(ctx, evt, replyTo, body) {
			return
		}
	}
	b.mu.Lock()
	runbooks := b.runbooks
	b.mu.Unlock()
	cmd := ParseCommand(body, runbooks)
	if !cmd.Kind.reads() {
		// Plans, decisions and the agent (who may ask for plans) only in
		// the rooms for plans.
		if !b.forPlans(ctx, evt, clip(body, 200)) {
			return
		}
		if b.tryPhrase(ctx, evt, body) || b.tryPlanCode(ctx, evt, body) {
			return
		}
	}
	if cmd.Kind.readersOnly() && !b.mayRead(evt.Sender) {
		b.refuseReader(ctx, evt, strings.TrimSpace(cmd.Kind.String()+" "+cmd.Target))
		return
	}
	switch cmd.Kind {
	case CmdApprove, CmdDeny:
		b.decidePending(ctx, evt, cmd)
	case CmdConfirm:
		plain, htm := NoticePhraseUnmatched(cmd.Phrase)
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	case CmdResolve:
		b.resolveUnknown(ctx, evt, cmd)
	case CmdAction:
		b.requestPlan(ctx, evt, cmd)
	case CmdReadAll:
		b.readAll(ctx, evt, cmd)
	case CmdHelp:
		plain, htm := Help()
		if more, moreHTML, ok := HelpFor(cmd.Target); ok && cmd.Target != "" {
			plain, htm = more, moreHTML
		}
		if use := b.roomUse(ctx, evt.RoomID); use != roomForPlans {
			// Never an invitation to ask for plans where none are taken.
			plain, htm = NoticeNotForPlans(b.planRooms())
			if use == roomInTheClear {
				plain, htm = NoticeRoomInTheClear()
			}
		}
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	case CmdStatus:
		b.replyStatus(ctx, evt)
	case CmdListContainers:
		b.replyContainers(ctx, evt, cmd.Target)
	case CmdShow:
		b.replyShow(ctx, evt, cmd.Target)
	case CmdPending:
		b.replyPending(ctx, evt)
	case CmdSnapshots:
		b.replySnapshots(ctx, evt, cmd.Target)
	case CmdProblems:
		b.replyProblems(ctx, evt)
	case CmdBrief:
		b.replyBrief(ctx, evt, cmd.Target)
	case CmdForgetSession:
		b.forgetSession(ctx, evt, cmd.Target)
	case CmdWindows:
		b.replyWindows(ctx, evt)
	case CmdWindow:
		b.openWindow(ctx, evt, cmd)
	case CmdEndWindow:
		b.endWindow(ctx, evt, cmd)
	case CmdAllow:
		b.grantStanding(ctx, evt, cmd)
	case CmdHistory:
		b.replyHistory(ctx, evt)
	default:
		if b.cfg.Agent != nil && cmd.Hint == "" && b.isOperator(evt.Sender) {
			handedOff = true
			b.askAgentAsync(ctx, evt, body)
			return
		}
		plain, htm := NoticeUnknown(cmd)
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	}
}

// requestPlan turns a command into one plan, whose steps (a runbook's,
// or the grammar's) run in order under one approval, and posts its card.
// Only operators may request changes.
func (b *Bot) requestPlan(ctx context.Context, evt *event.Event, cmd Command) {
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "request "+string(cmd.Action)+" "+cmd.Target)
		return
	}
	steps := cmd.Steps
	if len(steps) == 0 {
		steps = []store.RunbookStep{{Action: string(cmd.Action), Params: cmd.Params}}
	}
	via := executions.ViaChat
	if cmd.Runbook != "" {
		via = executions.ViaRunbook
	}
	if cmd.Runbook == "" && cmd.Action == policy.ActionPctDestroy {
		// pct destroy refuses a running container. Ask its host rather
		// than guess, and stop it first when it runs.
		state, err := b.exec.ContainerState(ctx, cmd.Target, evt.Sender.String())
		if err != nil {
			b.logger.Info("no container state for a destroy", "target", cmd.Target, "err", err)
			b.sendNotice(ctx, evt.RoomID, containerStateErrorText(cmd.Target, err), "", evt)
			return
		}
		if state == "running" {
			steps = append([]store.RunbookStep{{Action: string(policy.ActionPctStop)}}, steps...)
		}
	}
	if cmd.Action == policy.ActionTailLog && cmd.Runbook == "" {
		cmd.Target = b.serviceOfStack(ctx, cmd.Target)
	}
	r := executions.Request{Target: cmd.Target, RequestedBy: evt.Sender.String(), Via: via, RoomID: evt.RoomID.String()}
	for _, st := range steps {
		var params json.RawMessage
		if st.Params != nil {
			if raw, err := json.Marshal(st.Params); err == nil {
				params = raw
			}
		}
		r.Steps = append(r.Steps, executions.Step{Action: st.Action, Params: params})
	}
	if len(r.Steps) == 1 {
		r.Action, r.Params, r.Steps = r.Steps[0].Action, r.Steps[0].Params, nil
	}
	p, err := b.exec.Request(ctx, r)
	var waiting *executions.AlreadyWaitingError
	if errors.As(err, &waiting) {
		plain, htm := NoticeAlreadyWaiting(waiting.Waiting, b.cfg.StatusURL)
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
		return
	}
	if err != nil {
		text := requestErrorText(err)
		if errors.Is(err, executions.ErrUnknownTarget) {
			if name := b.nearTarget(ctx, cmd.Target); name != "" {
				text += didYouMean(cmd.Raw, cmd.Target, name)
			}
		}
		b.sendNotice(ctx, evt.RoomID, text, "", evt)
		return
	}
	b.postCard(ctx, evt.RoomID, p, evt)
}

// serviceOfStack is the slug of the service ref names when it names a
// service and the container it runs in, one stack to a person ("logs
// jellyfin"): the unit's journal is the one meant. Otherwise ref as given,
// and an ambiguity is asked about as usual.
func (b *Bot) serviceOfStack(ctx context.Context, ref string) string {
	matches, err := b.store.ResolveTargets(ctx, ref, "service", "lxc")
	if err != nil || len(matches) < 2 {
		return ref
	}
	rels, err := b.store.Relationships(ctx)
	if err != nil || !related(matches, rels) {
		return ref
	}
	var services []string
	for _, m := range matches {
		if m.Type == "service" {
			services = append(services, m.Slug)
		}
	}
	if len(services) != 1 {
		return ref
	}
	return services[0]
}

// containerStateErrorText is what an operator reads when a destroy could
// not be planned because the host did not say whether the container runs.
func containerStateErrorText(target string, err error) string {
	if errors.Is(err, executions.ErrNoContainerState) {
		return fmt.Sprintf("I could not tell from its host whether %s is running, so I planned nothing: a running container has to be stopped "+
			"before it can be destroyed, and I do not guess. Try again in a moment, or check `show %s`.", target, target)
	}
	return requestErrorText(err)
}

// requestErrorText is what an operator reads when a request is refused.
func requestErrorText(err error) string {
	var amb *executions.AmbiguousTargetError
	switch {
	case errors.As(err, &amb):
		return fmt.Sprintf("%q could mean %s. Say which one, for example by its slug.", amb.Ref, strings.Join(amb.Candidates, " or "))
	case errors.Is(err, executions.ErrUnknownTarget):
		return "I don't know that target: " + strings.TrimPrefix(err.Error(), executions.ErrUnknownTarget.Error()+": ") + ". Try `list containers` or `status`."
	case errors.Is(err, policy.ErrInvalidParams), errors.Is(err, policy.ErrInvalidTarget), errors.Is(err, policy.ErrUnknownAction):
		return "I can't plan that: " + err.Error()
	}
	return "Something went wrong while planning that; nothing was changed. The log has the details."
}

func (b *Bot) refuseNonOperator(ctx context.Context, evt *event.Event, what string) {
	err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "chat.refused",
		Detail: map[string]any{"what": what, "event_id": evt.ID.String(), "room_id": evt.RoomID.String()}})
	if err != nil {
		b.logger.Error("audit refusal", "err", err)
	}
	plain, htm := NoticeNotOperator(evt.Sender.String())
	b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
}

// tryPhrase approves the destructive plan in this room whose typed phrase
// the message is. A phrase-shaped message that ends in the code of a
// destructive plan here but is not its phrase (it names fewer of the
// plan's destructive steps, or others) is put to that plan and refused:
// the refusal is audited, and the reply says the phrase to type.
func (b *Bot) tryPhrase(ctx context.Context, evt *event.Event, body string) bool {
	if !policy.MayBePhrase(body) {
		return false
	}
	pending, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval},
		RoomID: evt.RoomID.String(), RiskClass: policy.Destructive.String()})
	if err != nil {
		return false
	}
	for _, x := range pending {
		p, err := b.exec.Describe(ctx, x)
		if err != nil || p.Phrase == "" || !policy.MatchPhrase(body, p.Phrase) {
			continue
		}
		b.decide(ctx, evt, x, policy.Approve, policy.MethodPhrase, body)
		return true
	}
	words := strings.Fields(body)
	code := words[len(words)-1]
	for _, x := range pending {
		if strings.EqualFold(x.PlanCode, code) {
			b.decide(ctx, evt, x, policy.Approve, policy.MethodPhrase, body)
			return true
		}
	}
	return false
}

// tryPlanCode approves the plan waiting in this room whose code is the
// whole message ("k7q2"): naming the code binds the approval to that plan,
// whoever asked for it. Any other message goes on to the grammar, and so
// does a code that spells a decision word (the code alphabet holds "deny",
// "sure", "yeah"): "deny" must refuse, never approve the plan coded deny.
func (b *Bot) tryPlanCode(ctx context.Context, evt *event.Event, body string) bool {
	code := strings.Trim(stripMention(body), " .!")
	if !isPlanCode(code) {
		return false
	}
	if _, isDecision := policy.ParseDecision(code); isDecision {
		return false
	}
	pending, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, RoomID: evt.RoomID.String()})
	if err != nil {
		return false
	}
	for _, x := range pending {
		if strings.EqualFold(x.PlanCode, code) {
			b.decide(ctx, evt, x, policy.Approve, policy.MethodReply, body)
			return true
		}
	}
	return false
}

// decidePending applies an approve or deny that names no card: to the
// plan whose code it gives, or to the one plan waiting in the room. With
// several waiting and no code it asks which, and never guesses. A bare
// assent, which names no plan, approves only a plan its sender asked for
// with a command: a plan the agent or an MCP client asked for, or another
// operator's, needs a reply to its card, a reaction or its code.
func (b *Bot) decidePending(ctx context.Context, evt *event.Event, cmd Command) {
	pending, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, RoomID: evt.RoomID.String()})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the pending plans; nothing was decided.", "", evt)
		return
	}
	if cmd.Target != "" {
		var match []store.Execution
		for _, x := range pending {
			if strings.EqualFold(x.PlanCode, cmd.Target) {
				match = append(match, x)
			}
		}
		pending = match
		if len(pending) == 0 {
			b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("No plan with code %s is waiting here. Say `pending` to see the codes.", cmd.Target), "", evt)
			return
		}
	}
	d := policy.Approve
	if cmd.Kind == CmdDeny {
		d = policy.Deny
	}
	switch len(pending) {
	case 0:
		plain, htm := NoticeNoPending()
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	case 1:
		x := pending[0]
		if d == policy.Approve && cmd.Target == "" && !ownCommand(x, evt.Sender) && b.isOperator(evt.Sender) {
			b.auditUnboundAssent(ctx, evt, x)
			plain, htm := NoticeAssentNotBound(x, b.verifiedOnly(ctx, evt.RoomID))
			b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
			return
		}
		b.decide(ctx, evt, x, d, policy.MethodReply, cmd.Raw)
	default:
		plain, htm := NoticeWhichPlan(pending, b.now())
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	}
}

// auditUnboundAssent records a bare assent that was not taken as an
// approval, so the log shows the operator's words were not enough.
func (b *Bot) auditUnboundAssent(ctx context.Context, evt *event.Event, x store.Execution) {
	err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "execution.decision_refused", ExecutionID: &x.ID,
		Detail: map[string]any{"decision": "approve", "reason": "a bare assent approves only the sender's own command; this plan was asked for by " +
			x.RequestedBy + " via " + x.RequestedVia, "event_id": evt.ID.String()}})
	if err != nil {
		b.logger.Error("audit refused approval", "execution_id", x.ID, "err", err)
	}
}

// resolveUnknown records what an operator found out about an execution
// whose outcome was unknown.
func (b *Bot) resolveUnknown(ctx context.Context, evt *event.Event, cmd Command) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateOutcomeUnknown}, RoomID: evt.RoomID.String()})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the executions; nothing was recorded.", "", evt)
		return
	}
	note, _ := cmd.Params["note"].(string)
	for _, x := range xs {
		if !strings.EqualFold(x.PlanCode, cmd.Target) {
			continue
		}
		if _, err := b.exec.Reconciled(ctx, x.ID, evt.Sender.String(), note); err != nil {
			if errors.Is(err, policy.ErrNotOperator) {
				plain, htm := NoticeNotOperator(evt.Sender.String())
				b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
				return
			}
			b.sendNotice(ctx, evt.RoomID, "I could not record that; nothing was changed.", "", evt)
			return
		}
		b.cards.update(x.ID)
		return
	}
	b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("No execution with code %s has an unknown outcome here.", cmd.Target), "", evt)
}

// decideByText reads a reply to a card: the typed phrase, assent or
// refusal. On a destructive card, anything shaped like a phrase is put to
// the plan as its phrase, so one that names fewer of its steps is refused
// with the phrase to type.
func (b *Bot) decideByText(ctx context.Context, evt *event.Event, x store.Execution, body string, isReply bool) {
	if x.GateClass() == policy.Destructive.String() {
		if p, err := b.exec.Describe(ctx, x); (err == nil && p.Phrase != "" && policy.MatchPhrase(body, p.Phrase)) || policy.MayBePhrase(body) {
			b.decide(ctx, evt, x, policy.Approve, policy.MethodPhrase, body)
			return
		}
	}
	d, ok := policy.ParseDecision(body)
	if !ok {
		if isReply {
			plain, htm := NoticeNotADecision()
			b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
		}
		return
	}
	b.decide(ctx, evt, x, d, policy.MethodReply, body)
}

func (b *Bot) onReaction(ctx context.Context, evt *event.Event) {
	if evt.Sender == b.cli.UserID {
		return // its own ✅ and ❌ on each card; claim refuses them, but only after a query
	}
	r := evt.Content.AsReaction()
	target := r.RelatesTo.GetAnnotationID()
	if target == "" {
		return
	}
	if b.signalReaction(ctx, evt, target, r.RelatesTo.GetAnnotationKey()) {
		return
	}
	d, ok := policy.ParseReaction(r.RelatesTo.GetAnnotationKey())
	if !ok {
		return
	}
	if b.roomUse(ctx, evt.RoomID) != roomForPlans {
		// A decision on a card outside the rooms for plans is refused;
		// a ✅ on anything else there is nobody's business.
		if x, err := b.store.ExecutionByCard(ctx, target.String()); err == nil && b.claim(ctx, evt) {
			b.forPlans(ctx, evt, "decide "+x.PlanCode+" by a reaction")
		}
		return
	}
	x, err := b.executionForCard(ctx, evt.RoomID, target)
	for err != nil && b.awaitStore(ctx) {
		x, err = b.executionForCard(ctx, evt.RoomID, target)
	}
	if err != nil {
		return // reactions on anything but a card are not decisions
	}
	if !b.claimDecision(ctx, evt) {
		return
	}
	defer b.finishDecision(ctx, evt)
	if x.Approval != nil && x.Approval.EventID == evt.ID.String() {
		return // decided by this very reaction before the bot restarted
	}
	if b.isOperator(evt.Sender) {
		b.mu.Lock()
		b.lastOperator[evt.RoomID] = b.now()
		b.mu.Unlock()
	}
	b.decide(ctx, evt, x, d, policy.MethodReaction, "")
}

// decide applies one decision and answers only when something needs
// saying; a successful decision shows as the card's next edit.
func (b *Bot) decide(ctx context.Context, evt *event.Event, x store.Execution, d policy.Decision, m policy.Method, phrase string) {
	if b.roomUse(ctx, evt.RoomID) != roomForPlans {
		return // every way here checked already; this is the last line
	}
	if d == policy.Approve && x.State == store.StateAwaitingApproval && !b.approvalCounts(ctx, evt, x) {
		return
	}
	dec := executions.Decision{ExecutionID: x.ID, By: evt.Sender.String(), Method: m, EventID: evt.ID.String(), Phrase: phrase}
	var err error
	// The event is claimed already: a decision cut off by Postgres going
	// away is tried again once it is back, or it would be lost. A retry of
	// one that did commit meets the first decision and is refused as such.
	for retry := true; retry; retry = err != nil && b.awaitStore(ctx) {
		if d == policy.Approve {
			_, err = b.exec.Approve(ctx, dec)
		} else {
			_, err = b.exec.Deny(ctx, dec)
		}
	}
	if err == nil {
		b.cards.update(x.ID)
		if d == policy.Approve && b.cfg.Agent != nil {
			if err := b.cfg.Agent.NoteApproval(ctx, x.ID); err != nil {
				b.logger.Warn("note approval for the agent", "execution_id", x.ID, "err", err)
			}
		}
		return
	}
	var pending *executions.QuorumPendingError
	if errors.As(err, &pending) {
		// Not a refusal: the approval counts toward the quorum, and the
		// card shows who has approved so far.
		b.cards.update(x.ID)
		plain, htm := NoticeQuorumPending(evt.Sender.String(), x.PlanCode, pending.Votes, pending.Quorum)
		b.sendInThread(ctx, evt.RoomID, id.EventID(x.CardEventID), plain, htm, evt)
		return
	}
	plain, htm := b.decisionErrorText(ctx, err, x, evt.Sender)
	b.refuseInThread(ctx, evt, x, plain, htm)
}

// refusalInterval is how often one person is told, per card, why their
// decision did not count: a burst of reactions gets one answer.
const refusalInterval = time.Minute

// refuseInThread answers a decision that did not count, in the card's
// thread, at most once per refusalInterval per person and card. The
// refusal itself is already audited by the gate.
func (b *Bot) refuseInThread(ctx context.Context, evt *event.Event, x store.Execution, plain, htm string) {
	key := evt.Sender.String() + "|" + x.Head().String()
	now := b.now()
	b.mu.Lock()
	last, seen := b.refusedAt[key]
	if seen && now.Sub(last) < refusalInterval {
		b.mu.Unlock()
		b.logger.Debug("refusal already answered in the last minute", "execution_id", x.ID, "sender", evt.Sender)
		return
	}
	b.refusedAt[key] = now
	for k, at := range b.refusedAt {
		if now.Sub(at) >= refusalInterval {
			delete(b.refusedAt, k)
		}
	}
	b.mu.Unlock()
	card := id.EventID(x.CardEventID)
	if x.IsFollower() {
		if head, err := b.store.GetExecution(ctx, x.Head()); err == nil {
			card = id.EventID(head.CardEventID)
		}
	}
	b.sendInThread(ctx, evt.RoomID, card, plain, htm, evt)
}

func (b *Bot) phraseFor(ctx context.Context, x store.Execution) string {
	p, err := b.exec.Describe(ctx, x)
	if err != nil {
		return ""
	}
	return p.Phrase
}

// decisionErrorText is what the room reads when a decision does not count.
func (b *Bot) decisionErrorText(ctx context.Context, err error, x store.Execution, by id.UserID) (plain, html string) {
	var decided *executions.AlreadyDecidedError
	switch {
	case errors.As(err, &decided):
		return NoticeAlreadyDecided(decided.Existing)
	case errors.Is(err, policy.ErrNotOperator):
		return NoticeNotOperator(by.String())
	case errors.Is(err, executions.ErrSelfApproval):
		return NoticeSelfApproval(by.String(), x)
	case errors.Is(err, executions.ErrSameApprover):
		return NoticeSameApprover(by.String(), x.PlanCode, b.exec.Quorum(policy.Destructive))
	case errors.Is(err, executions.ErrPhraseMismatch):
		return NoticePhraseMismatch(x.PlanCode, b.phraseFor(ctx, x))
	case errors.Is(err, policy.ErrMethodNotAllowed):
		return NoticeNeedsPhrase(b.phraseFor(ctx, x))
	case errors.Is(err, executions.ErrExpired):
		cur, _ := b.store.GetExecution(ctx, x.ID)
		return NoticeExpired(cur, b.now())
	case errors.Is(err, executions.ErrNotPending):
		cur, _ := b.store.GetExecution(ctx, x.ID)
		return NoticeNotPending(cur)
	}
	b.logger.Error("decision failed", "execution_id", x.ID, "err", err)
	p := "I could not record that decision; nothing was changed. The log has the details."
	return p, p
}
