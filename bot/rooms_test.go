package bot_test

import (
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// pointer is what the bot says, once, in a room that is not one for plans.
const pointer = "plans are asked for and decided only in the ops room"

// inviteBot makes a room of the operator's with the bot in it and waits
// until the bot has joined. direct makes it a direct message.
func (b *bundle) inviteBot(t *testing.T, name string, direct bool) id.RoomID {
	t.Helper()
	req := &mautrix.ReqCreateRoom{Preset: "private_chat", Name: name, Invite: []id.UserID{b.botUser.UserID}}
	if direct {
		req = &mautrix.ReqCreateRoom{Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{b.botUser.UserID}}
	}
	resp, err := b.operator.Client.CreateRoom(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b.in(resp.RoomID, func() {
		b.waitFor(t, func(e *event.Event) bool {
			return e.Type == event.StateMember && e.GetStateKey() == b.botUser.UserID.String() && e.Content.AsMember().Membership == event.MembershipJoin
		})
	})
	return resp.RoomID
}

// in runs f with the bundle's room set to room: say, waitFor and botBodies
// then read and write there.
func (b *bundle) in(room id.RoomID, f func()) {
	prev := b.room
	b.room = room
	defer func() { b.room = prev }()
	f()
}

// barrier asks for status in the bundle's room and waits for the answer:
// the bot handles a room's events in order, so everything sent before has
// been handled.
func (b *bundle) barrier(t *testing.T) {
	t.Helper()
	ev := b.say(t, b.operator, "status", "")
	b.waitFor(t, func(e *event.Event) bool {
		return e.Sender == b.botUser.UserID && e.Type == event.EventMessage && e.Content.AsMessage().RelatesTo.GetReplyTo() == ev
	})
}

// fakeCard posts, as the bot's account, a card for a plan waiting in room,
// as the bot posted them before plans were kept to their rooms (or as a
// configuration that listed room once did), and records it.
func (b *bundle) fakeCard(t *testing.T, room id.RoomID) store.Execution {
	t.Helper()
	p, err := b.execs.Request(b.ctx, executions.Request{Action: "restart", Target: "jellyfin",
		RequestedBy: b.operator.UserID.String(), Via: executions.ViaChat, RoomID: room.String()})
	if err != nil {
		t.Fatal(err)
	}
	x := p.Execution
	content := map[string]any{"msgtype": "m.notice", "body": "Plan " + x.PlanCode + ": restart service:jellyfin — awaiting approval",
		"io.nomos.execution": x.ID.String()}
	resp, err := b.botUser.Client.SendMessageEvent(b.ctx, room, event.EventMessage, content)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.SetCardEvent(b.ctx, x.ID, room.String(), resp.EventID.String()); err != nil {
		t.Fatal(err)
	}
	x.CardEventID, x.RoomID = resp.EventID.String(), room.String()
	return x
}

// TestPlansAndDecisionsOnlyInTheirRooms: someone holding an operator's
// access token makes a fresh room in the clear and invites the bot. The
// bot joins and answers reads there, but says once (and never again, not
// after a restart) that plans belong in the ops room; a plan asked for
// there, by command or in words to the agent, makes no plan and no card,
// and a ✅, a reply, a plan's code or "approve" there decides nothing,
// even on a card that is in that room. A direct message is such a room
// too. A plan made for a room that is not one for plans (an agent
// session's, say) is carded in the ops room.
func TestPlansAndDecisionsOnlyInTheirRooms(t *testing.T) {
	t.Parallel()
	llm := testenv.NewScriptedLLM(t)
	b := setup(t, withLLM(llm), withOpsRoom())
	ops := b.room
	side := b.inviteBot(t, "side room", false)
	dm := b.inviteBot(t, "", true)

	for _, room := range []id.RoomID{side, dm} {
		b.in(room, func() {
			b.waitFor(t, b.botSays(pointer))
			b.say(t, b.operator, "restart jellyfin", "")
			b.say(t, b.operator, "could you bounce jellyfin for me?", "")
			b.barrier(t)
		})
	}
	if xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{}); err != nil || len(xs) != 0 {
		t.Fatalf("asking outside the rooms for plans made %d plans (err %v), want none", len(xs), err)
	}
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("the agent was asked %d times outside the rooms for plans, want never", n)
	}

	// A card already in the side room decides nothing there.
	x := b.fakeCard(t, side)
	b.in(side, func() {
		if _, err := b.operator.Client.SendReaction(b.ctx, side, id.EventID(x.CardEventID), "✅"); err != nil {
			t.Fatal(err)
		}
		b.say(t, b.operator, "go ahead", id.EventID(x.CardEventID))
		b.say(t, b.operator, "approve "+x.PlanCode, "")
		b.say(t, b.operator, x.PlanCode, "")
		b.barrier(t)
	})
	if cur, err := b.store.GetExecution(b.ctx, x.ID); err != nil || cur.State != store.StateAwaitingApproval || cur.Approval != nil {
		t.Fatalf("decisions in the side room moved its plan to %s, approval %+v (err %v); want it still waiting", cur.State, cur.Approval, err)
	}
	var refused int
	if err := b.storeQuery(t, `SELECT count(*) FROM audit_log WHERE action = 'chat.refused' AND detail->>'room_id' = '`+side.String()+`'`, &refused); err != nil {
		t.Fatal(err)
	}
	if refused < 6 {
		t.Errorf("%d refusals audited in the side room, want one for each plan and decision asked there (6)", refused)
	}

	// Said once per room, and a restart does not say it again.
	b.stopBot()
	b.startBot(t)
	for _, room := range []id.RoomID{side, dm} {
		b.in(room, func() {
			b.say(t, b.operator, "restart jellyfin", "")
			b.barrier(t)
			if n := countContaining(b.botBodies(t), pointer); n != 1 {
				t.Errorf("the bot said where plans belong %d times in %s, want once", n, room)
			}
		})
	}

	// A plan made for a room that is not for plans is carded in the ops
	// room, never there. (gitea: the restart of jellyfin already waits
	// there, and a repeat would point at it.)
	p, err := b.execs.Request(b.ctx, executions.Request{Action: "restart", Target: "gitea", RequestedBy: "agent",
		OnBehalfOf: b.operator.UserID.String(), Via: executions.ViaAgent, Reason: "it stopped answering", RoomID: side.String()})
	if err != nil {
		t.Fatal(err)
	}
	card := b.waitFor(t, b.botSays("restart", "Why: it stopped answering"))
	if got := b.execFor(t, card.ID); got.ID != p.Execution.ID || got.RoomID != ops.String() {
		t.Errorf("the agent's plan for the side room is carded as %s in %s, want %s in the ops room %s", got.ID, got.RoomID, p.Execution.ID, ops)
	}
	b.in(side, func() {
		if n := countContaining(b.botBodies(t), "it stopped answering"); n != 0 {
			t.Errorf("the side room got %d cards of the agent's plan", n)
		}
	})
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 0 {
		t.Errorf("labsim ran the restart %d times", n)
	}
}

// TestARoomForPlansInTheClearTakesNone: while verified devices are
// required, the ops room must be encrypted. In one that is not, a plan
// asked for makes no card and the bot says why once.
func TestARoomForPlansInTheClearTakesNone(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *bot.Config) { c.AllowUnverifiedDevices = false }))
	b.say(t, b.operator, "restart jellyfin", "")
	b.waitFor(t, b.botSays("not encrypted", "take no plans"))
	b.say(t, b.operator, "restart jellyfin", "")
	b.barrier(t)
	if n := countContaining(b.botBodies(t), "not encrypted"); n != 1 {
		t.Errorf("the bot said why %d times, want once", n)
	}
	if xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{}); err != nil || len(xs) != 0 {
		t.Fatalf("a room in the clear made %d plans (err %v), want none", len(xs), err)
	}
}

// TestAPlanInAnotherRoomForPlansIsCopiedToTheOpsRoom: a room listed in
// Config.Rooms takes plans and decides them, and the ops room gets a copy
// of each card there, which decides nothing itself and is edited as the
// card is.
func TestAPlanInAnotherRoomForPlansIsCopiedToTheOpsRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withOpsRoom())
	ops := b.room
	listed := b.inviteBot(t, "listed room", false)
	b.stopBot()
	b.tune = func(c *bot.Config) { c.Rooms = append(c.Rooms, listed.String()) }
	b.startBot(t)

	var card *event.Event
	b.in(listed, func() {
		b.say(t, b.operator, "restart jellyfin", "")
		card = b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	})
	x := b.execFor(t, card.ID)
	copied := b.waitFor(t, b.botSays("Plan "+x.PlanCode+" was asked for in "+listed.String()+" and is decided there", "restart jellyfin"))
	if _, err := b.operator.Client.SendReaction(b.ctx, ops, copied.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.barrier(t)
	if cur := b.execFor(t, card.ID); cur.State != store.StateAwaitingApproval || cur.RoomID != listed.String() {
		t.Fatalf("after a ✅ on the ops room's copy the plan is %s in %s, want still awaiting approval in %s", cur.State, cur.RoomID, listed)
	}
	b.in(listed, func() {
		if _, err := b.operator.Client.SendReaction(b.ctx, listed, card.ID, "✅"); err != nil {
			t.Fatal(err)
		}
		b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	})
	// The copy follows the plan, so the ops room does not show it awaiting
	// approval for ever.
	b.waitFor(t, b.cardEdited(copied.ID, "Plan "+x.PlanCode+" was asked for in", "succeeded"))
}
