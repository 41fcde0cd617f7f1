package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// timeline follows the room as the operator's client does, through /sync,
// and reports when each event id first appeared.
type timeline struct {
	seen chan *event.Event
}

func followRoom(b *testing.B, bun *bundle) *timeline {
	tl := &timeline{seen: make(chan *event.Event, 1024)}
	cli := bun.guest.Client // a second client in the room: it sees what the operator sees
	syncer := cli.Syncer.(interface {
		OnEventType(event.Type, func(context.Context, *event.Event))
	})
	syncer.OnEventType(event.EventMessage, func(_ context.Context, e *event.Event) { tl.seen <- e })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cli.SyncWithContext(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return tl
}

// next waits for a message matching match and returns it and when it
// arrived.
func (tl *timeline) next(b *testing.B, what string, match func(*event.Event) bool) (time.Time, *event.Event) {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-tl.seen:
			if match(e) {
				return time.Now(), e
			}
		case <-deadline:
			b.Fatalf("timed out waiting for %s", what)
		}
	}
}

// BenchmarkE2EMessageToCard measures, as a second client sees it, the time
// from an operator's "restart jellyfin" to the bot's plan card, and two
// floors in the same run: the homeserver's, the time for the operator's
// message itself to reach that client, and the echo floor, what a bare
// mautrix bot on the same homeserver adds to answer a message in another
// room. Nomos's share (nomos-added) is the card's time past the message's;
// echo-added is the least any bot could add on this stack.
func BenchmarkE2EMessageToCard(b *testing.B) {
	bun := setup(b)
	echoRoom := startEcho(b, bun)
	tl := followRoom(b, bun)
	var total, floor, added, echoed []time.Duration
	for b.Loop() {
		sent := time.Now()
		evID := bun.say(b, bun.operator, "restart jellyfin", "")
		arrived, _ := tl.next(b, "the operator's message", func(e *event.Event) bool { return e.ID == evID })
		card, cardEvt := tl.next(b, "the card", func(e *event.Event) bool {
			m := e.Content.AsMessage()
			return e.Sender == bun.botUser.UserID && m.RelatesTo.GetReplyTo() == evID && m.RelatesTo.GetReplaceID() == ""
		})
		total = append(total, card.Sub(sent))
		floor = append(floor, arrived.Sub(sent))
		added = append(added, card.Sub(arrived))
		// Deny it, so plans do not pile up.
		if _, err := bun.operator.Client.SendReaction(bun.ctx, bun.room, cardEvt.ID, "❌"); err != nil {
			b.Fatal(err)
		}
		tl.next(b, "the denied edit", func(e *event.Event) bool {
			m := e.Content.AsMessage()
			return m.RelatesTo.GetReplaceID() == cardEvt.ID && m.NewContent != nil && strings.Contains(m.NewContent.Body, "denied")
		})
	}
	// The echo floor, as many times, paced the same way: the next ping
	// goes as soon as the last answer is seen.
	for range total {
		pingID := bun.sayIn(b, echoRoom, bun.operator, "ping", "")
		pinged, _ := tl.next(b, "the ping", func(e *event.Event) bool { return e.ID == pingID })
		pong, _ := tl.next(b, "the echo", func(e *event.Event) bool { return e.Content.AsMessage().RelatesTo.GetReplyTo() == pingID })
		echoed = append(echoed, pong.Sub(pinged))
	}
	testenv.ReportPercentiles(b, "message-to-card", total)
	testenv.ReportPercentiles(b, "homeserver-floor", floor)
	testenv.ReportPercentiles(b, "nomos-added", added)
	testenv.ReportPercentiles(b, "echo-added", echoed)
}

// startEcho runs a bare mautrix bot, with no database and no encryption,
// that answers every message in a room of its own (the operator's, the
// guest's and its, not the bot's) with a notice replying to it. It
// returns that room.
func startEcho(b *testing.B, bun *bundle) id.RoomID {
	echo := testenv.NewMatrixUser(b, "echo")
	resp, err := bun.operator.Client.CreateRoom(bun.ctx, &mautrix.ReqCreateRoom{
		Preset: "private_chat", Name: "echo", Invite: []id.UserID{echo.UserID, bun.guest.UserID},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, u := range []*testenv.MatrixUser{echo, bun.guest} {
		if _, err := u.Client.JoinRoomByID(bun.ctx, resp.RoomID); err != nil {
			b.Fatal(err)
		}
	}
	cli := echo.Client
	syncer := cli.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnEventType(event.EventMessage, func(ctx context.Context, e *event.Event) {
		if e.Sender == cli.UserID || e.RoomID != resp.RoomID {
			return
		}
		content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: "pong", RelatesTo: (&event.RelatesTo{}).SetReplyTo(e.ID)}
		_, _ = cli.SendMessageEvent(ctx, e.RoomID, event.EventMessage, content)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cli.SyncWithContext(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return resp.RoomID
}

// BenchmarkE2EResultToContinuation measures the time from a result being
// enqueued on nomos:results to the model being asked to continue, and the
// floor in the same run: a bare asynq round trip (queue-floor), polled as
// the bot polls the results queue.
func BenchmarkE2EResultToContinuation(b *testing.B) {
	llm := testenv.NewScriptedLLM(b)
	bun := setup(b, withLLM(llm))
	sess, err := bun.store.EnsureAgentSession(bun.ctx, bun.room.String(), "")
	if err != nil {
		b.Fatal(err)
	}
	queue := asynq.NewClient(bun.redis)
	defer queue.Close()
	var lat []time.Duration
	for b.Loop() {
		// A step the agent asked for and an operator approved, already
		// dispatched; its result is what this run enqueues by hand.
		xid := uuid.Must(uuid.NewV7())
		now := time.Now()
		_, err := bun.store.CreateExecution(bun.ctx, store.NewExecution{
			Request: store.Request{
				ID: xid, Action: "restart", TargetSlug: "service:jellyfin",
				Steps:     []string{"pct exec 101 -- systemctl restart jellyfin.service"},
				RiskClass: "reversible_low", PlanHash: strings.Repeat("0", 64), PlanCode: "bnch",
				State: store.StateDispatched, RequestedBy: "agent", RequestedVia: "agent",
				RoomID: bun.room.String(), ExpiresAt: now.Add(time.Hour),
			},
		}, &store.Approval{Decision: "approved", DecidedBy: bun.operator.UserID.String(), Method: "reaction", PlanHash: strings.Repeat("0", 64), DecidedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bun.store.LinkExecution(bun.ctx, xid, sess.ID, 0); err != nil {
			b.Fatal(err)
		}
		if err := bun.store.RecordOperatorApproval(bun.ctx, sess.ID, now); err != nil {
			b.Fatal(err)
		}
		llm.Script(testenv.Reply("noted").When(lastNote(xid.String())))
		before := len(llm.Requests())
		task, err := tasks.NewResultTask(bun.keys.ReportSigning, tasks.Result{ExecutionID: xid.String(), Actuator: tasks.DefaultActuator, Status: tasks.StatusSucceeded, StartedAt: time.Now(), FinishedAt: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		enqueued := time.Now()
		if _, err := queue.Enqueue(task); err != nil {
			b.Fatal(err)
		}
		reqs, err := llm.AwaitRequests(bun.ctx, before+1)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, reqs[before].At.Sub(enqueued))
	}
	queueFloor := testenv.QueueFloor(b, bun.redis, tasks.PollInterval)
	var floor []time.Duration
	for range lat {
		floor = append(floor, queueFloor())
	}
	testenv.ReportPercentiles(b, "result-to-llm", lat)
	testenv.ReportPercentiles(b, "queue-floor", floor)
}
