package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// askAgent hands an operator's free-form message to the agent and posts
// its answer. A failing model ends the turn with a notice, never silence.
func (b *Bot) askAgent(ctx context.Context, evt *event.Event, body string) {
	thread := evt.Content.AsMessage().RelatesTo.GetThreadParent()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stopTyping := b.keepTyping(ctx, evt.RoomID)
	reply, err := b.cfg.Agent.Message(ctx, evt.RoomID.String(), thread.String(), evt.Sender.String(), body)
	stopTyping()
	b.postAgentReply(ctx, evt.RoomID, thread, reply, err, evt)
}

// askAgentAsync runs the agent's turn beside the sync loop: a turn can take
// minutes, and reactions and commands must keep being handled meanwhile.
// Turns of one session still run one at a time (the agent serialises
// them). The message is marked read when the turn ends.
func (b *Bot) askAgentAsync(ctx context.Context, evt *event.Event, body string) {
	b.agentTurns.Add(1)
	go func() {
		defer b.agentTurns.Done()
		b.askAgent(ctx, evt, body)
		b.markRead(ctx, evt)
	}()
}

// markRead sends the bot's read receipt for a message it has handled.
func (b *Bot) markRead(ctx context.Context, evt *event.Event) {
	if err := b.cli.MarkRead(ctx, evt.RoomID, evt.ID); err != nil {
		b.logger.Debug("read receipt", "err", err)
	}
}

// continueAgent re-invokes the session that requested a finished
// execution, beside the sync loop and tracked like the turns
// askAgentAsync starts: it ends with ctx, at shutdown.
func (b *Bot) continueAgent(ctx context.Context, x store.Execution) {
	b.agentTurns.Add(1)
	go func() {
		defer b.agentTurns.Done()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		room := id.RoomID(x.RoomID)
		stopTyping := b.keepTyping(ctx, room)
		reply, roomID, thread, ok, err := b.cfg.Agent.Continue(ctx, x)
		stopTyping()
		if !ok && err == nil {
			b.logger.Debug("no continuation for execution", "execution_id", x.ID, "state", x.State)
			return
		}
		if roomID != "" {
			room = id.RoomID(roomID)
		}
		b.postAgentReply(ctx, room, id.EventID(thread), reply, err, nil)
	}()
}

func (b *Bot) postAgentReply(ctx context.Context, room id.RoomID, thread id.EventID, reply agent.Reply, err error, replyTo *event.Event) {
	text := reply.Text
	if err != nil {
		b.logger.Warn("agent turn failed", "room_id", room, "err", err)
		if errors.Is(err, agent.ErrLLM) {
			text = "The language model did not answer, so I stopped here; nothing was changed. Ask again in a moment. Commands such as `status`, `pending` or `restart <service>` work without it."
		} else {
			text = "Something went wrong while I worked on that; nothing was changed. The log has the details."
		}
	}
	if strings.TrimSpace(text) == "" {
		return
	}
	text = redact.String(text)
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: text, Mentions: &event.Mentions{}}
	if thread != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetThread(thread, thread)
		replyTo = nil
	}
	b.send(ctx, room, content, renderMarkdown(text), replyTo)
}

// typingDelay is how long handling a message may take before the bot
// shows that it is typing. A quick answer never waits for a typing
// notification to reach the homeserver first.
const typingDelay = 300 * time.Millisecond

// typingAfter shows the bot typing in room if the work it guards is still
// going after delay, until the returned func is called.
func (b *Bot) typingAfter(ctx context.Context, room id.RoomID, delay time.Duration) (stop func()) {
	var mu sync.Mutex
	started, stopped := false, false
	t := time.AfterFunc(delay, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		started = true
		_, _ = b.cli.UserTyping(ctx, room, true, 20*time.Second)
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if started {
			_, _ = b.cli.UserTyping(ctx, room, false, 0)
		}
	}
}

// keepTyping shows the bot typing until the returned func is called.
func (b *Bot) keepTyping(parent context.Context, room id.RoomID) func() {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(ctx, 15*time.Second, func(ctx context.Context) {
			_, _ = b.cli.UserTyping(ctx, room, true, 20*time.Second)
		})
		// Clearing the indicator comes after ctx is cancelled, so it
		// keeps parent's values but not its end; and a homeserver that
		// does not answer cannot hold up the turn's stop.
		clearCtx, cancelClear := context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
		defer cancelClear()
		_, _ = b.cli.UserTyping(clearCtx, room, false, 0)
	}()
	return func() { cancel(); <-done }
}
