package bot_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/store"
)

// TestBareAssentApprovesOnlyYourOwnCommand: a bare "yes" names no plan, so
// it approves only a plan its sender asked for with a command. The
// agent's plan, an MCP client's plan and another operator's plan each
// wait, alone in the room, through it; a reply to the card, the plan's
// code, or its own operator's "yes" approves each.
func TestBareAssentApprovesOnlyYourOwnCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, withTwoOperators())
	request := func(r executions.Request) {
		t.Helper()
		r.RoomID = b.room.String()
		if _, err := b.execs.Request(b.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(card *event.Event, assent string) {
		t.Helper()
		x := b.execFor(t, card.ID)
		b.say(t, b.operator, assent, "")
		b.waitFor(t, b.botSays("Nothing was approved", "approve "+x.PlanCode))
		if x = b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
			t.Fatalf("%q moved %s's plan to %s", assent, x.RequestedVia, x.State)
		}
	}

	// The agent asked, on the operator's behalf.
	request(executions.Request{Action: "restart", Target: "gitea", RequestedBy: b.operator.UserID.String(), Via: executions.ViaAgent, Reason: "gitea looks stuck"})
	agentCard := b.waitFor(t, b.botSays("restart gitea", "awaiting approval", "via agent"))
	refused(agentCard, "yes")
	b.say(t, b.operator, "go ahead", agentCard.ID)
	b.waitFor(t, b.cardEdited(agentCard.ID, "succeeded"))

	// An MCP client asked; the code alone approves it.
	request(executions.Request{Action: "restart", Target: "jellyfin", RequestedBy: "mcp", Via: executions.ViaMCP, Reason: "external check"})
	mcpCard := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval", "via mcp"))
	refused(mcpCard, "ok")
	b.say(t, b.operator, b.execFor(t, mcpCard.ID).PlanCode, "")
	b.waitFor(t, b.cardEdited(mcpCard.ID, "succeeded"))

	// The other operator asked; only their own "yes" approves it.
	b.say(t, b.operator2, "restart gitea", "")
	theirs := b.waitFor(t, func(e *event.Event) bool {
		return b.botSays("restart gitea", "awaiting approval")(e) && e.ID != agentCard.ID
	})
	refused(theirs, "go ahead")
	b.say(t, b.operator2, "yes", "")
	b.waitFor(t, b.cardEdited(theirs.ID, "succeeded"))

	if n := b.count(t, "pct exec 102 -- systemctl restart gitea.service"); n != 2 {
		t.Errorf("labsim restarted gitea %d times, want twice", n)
	}
	x := b.execFor(t, theirs.ID)
	if x.Approval == nil || x.Approval.DecidedBy != b.operator2.UserID.String() {
		t.Errorf("the second operator's plan was approved by %+v, want them", x.Approval)
	}
}

// TestRemovingApprovalBeforeDispatchCancelsIt: with Redis unreachable an
// approved plan waits to be dispatched; removing the ✅ meanwhile cancels
// it, audited. When Redis is back, the other approved plan goes out and the
// withdrawn one never runs.
func TestRemovingApprovalBeforeDispatchCancelsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *bundle) { b.deadQueue = true })
	b.say(t, b.operator, "restart jellyfin", "")
	withdrawn := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	b.say(t, b.operator, "restart gitea", "")
	kept := b.waitFor(t, b.botSays("restart gitea", "awaiting approval"))
	approval, err := b.operator.Client.SendReaction(b.ctx, b.room, withdrawn.ID, "✅")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, kept.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(withdrawn.ID, "Approved by", "queuing"))
	b.waitFor(t, b.cardEdited(kept.ID, "Approved by", "queuing"))
	if x := b.execFor(t, withdrawn.ID); x.State != store.StateApproved {
		t.Fatalf("with Redis down the approved plan is %s, want approved and not dispatched", x.State)
	}

	if _, err := b.operator.Client.RedactEvent(b.ctx, b.room, approval.EventID); err != nil {
		t.Fatal(err)
	}
	code := b.execFor(t, withdrawn.ID).PlanCode
	notice := b.waitFor(t, b.botSays("Approval withdrawn: plan "+code+" is cancelled"))
	if notice.Content.AsMessage().RelatesTo.GetThreadParent() != withdrawn.ID {
		t.Errorf("the withdrawal notice is not in the card's thread")
	}
	b.waitFor(t, b.cardEdited(withdrawn.ID, "cancelled", "nothing ran"))
	x := b.execFor(t, withdrawn.ID)
	audit, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := auditString(audit); x.State != store.StateCancelled || !strings.Contains(got, b.operator.UserID.String()+" execution.approval_revoked") {
		t.Fatalf("after the ✅ was removed: state %s, audit %s; want cancelled with the revocation audited", x.State, got)
	}

	// Redis is back: the reconciler dispatches what is still approved.
	b.stopBot()
	b.deadQueue = false
	b.startBot(t)
	b.waitFor(t, b.cardEdited(kept.ID, "succeeded"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran the withdrawn restart %d times", n)
	}
	if x := b.execFor(t, withdrawn.ID); x.State != store.StateCancelled {
		t.Errorf("the withdrawn plan is %s after Redis came back, want cancelled", x.State)
	}

	// Once the order is out, removing the ✅ is too late, and says so. The
	// command runs long enough that the card says running (its first report
	// comes 2 s in) well before it ends, even on a loaded machine.
	b.say(t, b.operator, "exec 101 sleep 8", "")
	slow := b.waitFor(t, b.botSays("sleep 8", "awaiting approval"))
	approval, err = b.operator.Client.SendReaction(b.ctx, b.room, slow.ID, "✅")
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(slow.ID, "running"))
	if _, err := b.operator.Client.RedactEvent(b.ctx, b.room, approval.EventID); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("Too late to withdraw the approval of plan "+b.execFor(t, slow.ID).PlanCode))
	b.waitFor(t, b.cardEdited(slow.ID, "succeeded"))
}

// TestHistoryAndShowAreForOperatorsAndReaders: someone in the room who is
// neither an operator nor a listed reader gets a short refusal for history
// and show; listed in matrix.readers, they get the answer.
func TestHistoryAndShowAreForOperatorsAndReaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "restart jellyfin", "")
	b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))

	b.say(t, b.guest, "history", "")
	first := b.waitFor(t, b.botSays("only the operators and the readers", b.guest.UserID.String()))
	b.say(t, b.guest, "show service:jellyfin", "")
	b.waitFor(t, func(e *event.Event) bool {
		return b.botSays("only the operators and the readers", b.guest.UserID.String())(e) && e.ID != first.ID
	})
	bodies := b.botBodies(t)
	if n := countContaining(bodies, "Latest plans here"); n != 0 {
		t.Errorf("the guest was shown the history")
	}
	if n := countContaining(bodies, "jellyfin (service:jellyfin), "); n != 0 {
		t.Errorf("the guest was shown jellyfin's details")
	}
	var refusals int
	if err := b.storeQuery(t, fmt.Sprintf(`SELECT count(*) FROM audit_log WHERE actor = '%s' AND action = 'chat.refused'`, b.guest.UserID), &refusals); err != nil {
		t.Fatal(err)
	}
	if refusals != 2 {
		t.Errorf("%d of the guest's two reads are audited", refusals)
	}
	// The operator reads as before.
	b.say(t, b.operator, "history", "")
	b.waitFor(t, b.botSays("Latest plans here", "restart"))

	b.stopBot()
	b.tune = func(c *bot.Config) { c.Readers = []string{b.guest.UserID.String()} }
	b.startBot(t)
	asked := b.say(t, b.guest, "history", "")
	b.waitFor(t, func(e *event.Event) bool {
		return b.botSays("Latest plans here")(e) && e.Content.AsMessage().RelatesTo.GetReplyTo() == asked
	})
	b.say(t, b.guest, "show service:jellyfin", "")
	b.waitFor(t, b.botSays("jellyfin (service:jellyfin), "))
}

// TestADecisionWordIsNeverAPlanCode: a message that is only a plan's code
// approves that plan, but a code can spell a word of the decision grammar
// (the code alphabet holds "deny", "sure", "yeah", "sgtm"). Such a message
// is read as the word: "deny" refuses the one plan waiting, even when its
// code is deny, and a bare "sure" approves only the sender's own plan.
func TestADecisionWordIsNeverAPlanCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var cards []id.EventID
	codeAs := func(code string) *event.Event {
		t.Helper()
		p, err := b.execs.Request(b.ctx, executions.Request{Action: "restart", Target: "jellyfin", RequestedBy: "mcp:claude",
			Via: executions.ViaMCP, Reason: "external check", RoomID: b.room.String()})
		if err != nil {
			t.Fatal(err)
		}
		// Codes derive from a random execution id; set the one under test.
		var id string
		if err := b.storeQuery(t, fmt.Sprintf(`UPDATE executions SET plan_code = '%s' WHERE id = '%s' RETURNING id`, code, p.Execution.ID), &id); err != nil {
			t.Fatal(err)
		}
		card := b.waitFor(t, func(e *event.Event) bool {
			return b.botSays("restart jellyfin", "awaiting approval")(e) && !slices.Contains(cards, e.ID)
		})
		cards = append(cards, card.ID)
		return card
	}

	card := codeAs("deny")
	b.say(t, b.operator, "deny", "")
	b.waitFor(t, func(e *event.Event) bool {
		return b.cardEdited(card.ID, "denied")(e) || b.cardEdited(card.ID, "Approved by")(e)
	})
	if x := b.execFor(t, card.ID); x.State != store.StateDenied {
		t.Fatalf(`"deny" moved the plan coded deny to %s, want denied`, x.State)
	}

	card = codeAs("sure")
	b.say(t, b.operator, "sure", "")
	b.waitFor(t, b.botSays("Nothing was approved"))
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf(`a bare "sure" moved the MCP client's plan coded sure to %s, want it waiting`, x.State)
	}
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran the restart %d times", n)
	}
}
