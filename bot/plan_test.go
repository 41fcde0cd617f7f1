package bot_test

import (
	"encoding/json"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestDestroyingARunningContainerInTheRoom: "destroy lxc:strong/104" on a
// running container asks its host, plans stop then destroy on one card,
// and the one typed phrase runs both, in that order.
func TestDestroyingARunningContainerInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.say(t, b.operator, "destroy lxc:strong/104", "")
	card := b.waitFor(t, b.botSays("stop, then destroy", "lxc:strong/104", "🔴 destructive",
		"1. ⏳ stop", "pct shutdown 104 --timeout 60 --forceStop 1", "2. ⏳ destroy", "pct destroy 104", "type exactly"))
	if m := card.Content.AsMessage(); m.MsgType != event.MsgText {
		t.Errorf("a plan with a destructive step is a %s card, want an m.text that reaches the operators", m.MsgType)
	}
	x := b.execFor(t, card.ID)
	p, err := b.execs.Describe(b.ctx, x)
	if err != nil || len(p.Steps) != 2 || !strings.HasPrefix(p.Phrase, "destroy lxc:strong/104 ") {
		t.Fatalf("the card's plan: %d steps, phrase %q, %v", len(p.Steps), p.Phrase, err)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "1. ✅ stop", "2. ✅ destroy", "Status: ✅ succeeded"))
	var order []string
	for _, c := range b.fleet.Commands(t) {
		if strings.HasPrefix(c, "pct shutdown 104") || strings.HasPrefix(c, "pct destroy 104") {
			order = append(order, c)
		}
	}
	if len(order) != 2 || !strings.HasPrefix(order[0], "pct shutdown") || order[1] != "pct destroy 104" {
		t.Errorf("the fleet ran %q, want the stop, then the destroy, once each", order)
	}
	// The probe that asked the host posted no card of its own.
	for _, body := range b.botBodies(t) {
		if strings.Contains(body, "pct status 104") {
			t.Errorf("the state probe was shown as a plan: %s", body)
		}
	}
}

// TestRunbookOfSeveralStepsStopsAtAFailure: "upgrade and reboot 101" is
// one plan of two steps. With the container's network down the upgrade
// fails after its snapshot; the reboot is skipped, the card says so line
// by line and offers the rollback, and no reboot ran.
func TestRunbookOfSeveralStepsStopsAtAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.fleet.Sim.Inject(labsim.Fault{Kind: labsim.FaultNetDown, Target: "101"}); err != nil {
		t.Fatal(err)
	}
	b.say(t, b.operator, "upgrade and reboot 101", "")
	card := b.waitFor(t, b.botSays("upgrade, then reboot", "🟠 config_mutation", "1. ⏳ upgrade", "📸 first, the actuator snapshots CT 101",
		"2. ⏳ reboot", "waiting for step 1", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	edited := b.waitFor(t, b.cardEdited(card.ID, "1. ❌ upgrade", "2. ⏭ reboot", "skipped", "failed at step 1 of 2", "To undo: rollback lxc:strong/101 "))
	t.Logf("final card:\n%s", edited.Content.AsMessage().NewContent.Body)
	for _, c := range b.fleet.Commands(t) {
		if strings.HasPrefix(c, "pct reboot") {
			t.Errorf("the skipped reboot ran: %q", c)
		}
	}
	if n := countContaining(b.botBodies(t), "Plan "); n != 1 {
		t.Errorf("the plan took %d cards, want one:\n%s", n, strings.Join(b.botBodies(t), "\n---\n"))
	}
}

// TestSelfApprovalOffInTheRoom: with approvals.self_approval off, the
// operator who asked (or for whom the agent asked) is refused in the
// card's thread, once however often they try within the minute, and the
// other operator's approval runs the plan.
func TestSelfApprovalOffInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withTwoOperators(), func(b *bundle) {
		b.execTune = func(c *executions.Config) { c.ForbidSelfApproval = true }
	})
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	refusal := b.waitFor(t, b.botSays("was not counted: you asked for it", "another operator"))
	if refusal.Content.AsMessage().RelatesTo.GetThreadParent() != card.ID {
		t.Errorf("the refusal is not in the card's thread")
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	b.say(t, b.operator, "go ahead", card.ID)
	b.say(t, b.operator2, "go ahead", card.ID)
	b.waitFor(t, b.cardEdited(card.ID, "succeeded", "approved by "+b.operator2.UserID.String()))
	if n := countContaining(b.botBodies(t), "was not counted: you asked for it"); n != 1 {
		t.Errorf("three refused approvals within a minute got %d answers, want 1", n)
	}
	x := b.execFor(t, card.ID)
	audit, err := b.store.AuditFor(b.ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(auditString(audit), b.operator.UserID.String()+" execution.decision_refused"); n != 3 {
		t.Errorf("%d of the three refused approvals are audited: %s", n, auditString(audit))
	}

	// The agent's plan on the operator's behalf is theirs too.
	_, err = b.execs.Request(b.ctx, executions.Request{Action: "restart", Target: "gitea", RequestedBy: "agent", OnBehalfOf: b.operator.UserID.String(),
		Via: executions.ViaAgent, Reason: "gitea looks stuck", RoomID: b.room.String()})
	if err != nil {
		t.Fatal(err)
	}
	agentCard := b.waitFor(t, b.botSays("restart gitea", "asked by the agent for "+b.operator.UserID.String()))
	b.say(t, b.operator, "go ahead", agentCard.ID)
	b.waitFor(t, b.botSays("was not counted: the agent asked for it on your behalf"))
	if x := b.execFor(t, agentCard.ID); x.State != store.StateAwaitingApproval {
		t.Errorf("the agent's plan for the operator is %s after their own approval", x.State)
	}
}

// TestDestructiveQuorumInTheRoom: with approvals.destructive_quorum 2,
// one operator's phrase is recorded and shown on the card, the same
// operator's second phrase does not count, and the other operator's
// phrase runs the plan once.
func TestDestructiveQuorumInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withTwoOperators(), func(b *bundle) {
		b.execTune = func(c *executions.Config) { c.DestructiveQuorum = 2 }
	})
	b.say(t, b.operator, "destroy teddycloud", "")
	card := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "from 2 different operators"))
	p, err := b.execs.Describe(b.ctx, b.execFor(t, card.ID))
	if err != nil || p.Phrase == "" {
		t.Fatalf("phrase %q, %v", p.Phrase, err)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.botSays("is recorded (1 of 2)"))
	b.waitFor(t, b.cardEdited(card.ID, "Approved so far by "+b.operator.UserID.String()+" (1 of 2)", "awaiting approval"))
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.botSays("you have already approved plan", "another operator must type it too"))
	if n := b.count(t, "pct destroy 131"); n != 0 {
		t.Fatalf("one operator's phrase destroyed 131 (%d)", n)
	}
	b.say(t, b.operator2, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "succeeded", "approved by "+b.operator.UserID.String()+" and "+b.operator2.UserID.String()))
	if n := b.count(t, "pct destroy 131"); n != 1 {
		t.Errorf("labsim destroyed 131 %d times, want once", n)
	}
}

// TestAgentAsksForAPlanOfSteps: the agent asks for two restarts as one
// plan. One approval runs both; the model hears of the first step in its
// history without a turn of its own, and is re-invoked once, when the
// plan ends.
func TestAgentAsksForAPlanOfSteps(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("request_execution", `{"steps":[{"action":"restart","target":"jellyfin"},{"action":"restart","target":"gitea"}],"reason":"both stopped answering"}`).
			When(testenv.LastMessage("user", "restart both")),
		testenv.Reply("I asked to restart jellyfin, then gitea, as one plan."),
		testenv.Reply("Both restarted.").When(lastNote("Step 2 of 2 of plan", "restart on service:gitea", "succeeded")),
	)
	b := setup(t, withLLM(llm))
	b.say(t, b.operator, "jellyfin and gitea are down, restart both", "")
	card := b.waitFor(t, b.botSays("restart jellyfin, then restart gitea", "asked by the agent for "+b.operator.UserID.String(), "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.botSays("Both restarted."))
	if b.count(t, "pct exec 101 -- systemctl restart jellyfin.service") != 1 || b.count(t, "pct exec 102 -- systemctl restart gitea.service") != 1 {
		t.Errorf("the fleet ran %q, want each restart once", b.fleet.Commands(t))
	}
	var notes, unclaimed int
	if err := b.storeQuery(t, `SELECT count(*) FROM agent_messages WHERE role = 'note'`, &notes); err != nil {
		t.Fatal(err)
	}
	if err := b.storeQuery(t, `SELECT count(*) FROM plan_executions WHERE continued_at IS NULL`, &unclaimed); err != nil {
		t.Fatal(err)
	}
	if notes != 2 || unclaimed != 0 {
		t.Errorf("%d result notes and %d unclaimed steps, want a note per step, each claimed", notes, unclaimed)
	}
	// Two turns: the operator's message and the plan's end; the first
	// step's success started none.
	turns := 0
	for _, r := range llm.Requests() {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "user" || (last.Role == "tool" && strings.Contains(last.Content, "which you asked for, finished")) {
			turns++
		}
	}
	if turns != 2 {
		t.Errorf("%d model calls started a turn, want 2", turns)
	}
}

// TestAPhraseNamesEveryDestroyedTarget: an MCP client's plan rolls
// lxc:strong/102 back, then stops and destroys lxc:strong/101. The card
// asks for a phrase that names both; the phrase that names only the
// rollback approves nothing, and the reply says what to type instead.
func TestAPhraseNamesEveryDestroyedTarget(t *testing.T) {
	t.Parallel()
	b := setup(t, withTwoOperators())
	p, err := b.execs.Request(b.ctx, executions.Request{Steps: []executions.Step{
		{Action: "pct_rollback", Target: "lxc:strong/102", Params: json.RawMessage(`{"name":"pre-upgrade"}`)},
		{Action: "pct_stop", Target: "lxc:strong/101"},
		{Action: "pct_destroy", Target: "lxc:strong/101"},
	}, RequestedBy: "mcp:claude", Via: executions.ViaMCP, Reason: "tidy up", RoomID: b.room.String()})
	if err != nil {
		t.Fatal(err)
	}
	code := p.Execution.PlanCode
	want := "rollback lxc:strong/102 destroy lxc:strong/101 " + code
	if p.Phrase != want {
		t.Fatalf("phrase %q, want %q", p.Phrase, want)
	}
	card := b.waitFor(t, b.botSays("type exactly", want, "3. ⏳ destroy"))
	told := map[id.EventID]bool{}
	refused := func(e *event.Event) bool {
		if told[e.ID] || !b.botSays("nothing was approved", want)(e) {
			return false
		}
		told[e.ID] = true
		return true
	}
	// Typed on its own, and as a reply to the card.
	b.say(t, b.operator, "rollback lxc:strong/102 "+code, "")
	b.waitFor(t, refused)
	b.say(t, b.operator2, "destroy lxc:strong/101 "+code, card.ID)
	b.waitFor(t, refused)
	if x := b.execFor(t, card.ID); x.State != store.StateAwaitingApproval {
		t.Fatalf("a phrase that names one step moved the plan to %s", x.State)
	}
	b.say(t, b.operator, want, "")
	b.waitFor(t, b.cardEdited(card.ID, "approved by "+b.operator.UserID.String()))
}
