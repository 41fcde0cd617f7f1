package soak

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// operator is a person in the ops room, with a plain Matrix client.
type operator struct {
	t    *testing.T
	ctx  context.Context
	id   id.UserID
	cli  *mautrix.Client
	room id.RoomID
}

// say sends text to the room and returns its event id.
func (o *operator) say(text string) id.EventID {
	o.t.Helper()
	resp, err := o.cli.SendText(o.ctx, o.room, text)
	if err != nil {
		o.t.Fatalf("%s says %q: %v", o.id, text, err)
	}
	return resp.EventID
}

// approve reacts ✅ to a card.
func (o *operator) approve(card id.EventID) {
	o.t.Helper()
	if _, err := o.cli.SendReaction(o.ctx, o.room, card, "✅"); err != nil {
		o.t.Fatalf("%s approves %s: %v", o.id, card, err)
	}
}

// roomEvent is what the timeline keeps of one event.
type roomEvent struct {
	ID       id.EventID
	Sender   id.UserID
	Type     event.Type
	Body     string // for an edit, the new body
	ReplyTo  id.EventID
	Replaces id.EventID
	ReactTo  id.EventID
	Key      string
	Seen     time.Time
}

func (e roomEvent) isMessage() bool { return e.Type == event.EventMessage }

// isCard reports whether e is a message of the bot answering msg: a reply
// to it that is not an edit.
func (e roomEvent) isCardFor(bot id.UserID, msg id.EventID) bool {
	return e.Sender == bot && e.isMessage() && e.ReplyTo == msg && e.Replaces == ""
}

// timeline follows the room through /sync, as an operator's client does,
// and keeps every event. It rides out a homeserver that goes away.
type timeline struct {
	t      *testing.T
	mu     sync.Mutex
	events []roomEvent
	byID   map[id.EventID]bool
	notify chan struct{}
}

func follow(t *testing.T, cli *mautrix.Client, room id.RoomID) *timeline {
	tl := &timeline{t: t, byID: map[id.EventID]bool{}, notify: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		since := ""
		for ctx.Err() == nil {
			resp, err := cli.SyncRequest(ctx, 5000, since, "", false, event.PresenceOffline)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			since = resp.NextBatch
			if r, ok := resp.Rooms.Join[room]; ok {
				tl.add(r.Timeline.Events)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return tl
}

func (tl *timeline) add(evts []*event.Event) {
	now := time.Now()
	tl.mu.Lock()
	for _, e := range evts {
		if tl.byID[e.ID] {
			continue
		}
		tl.byID[e.ID] = true
		_ = e.Content.ParseRaw(e.Type)
		re := roomEvent{ID: e.ID, Sender: e.Sender, Type: e.Type, Seen: now}
		switch e.Type {
		case event.EventMessage:
			m := e.Content.AsMessage()
			re.Body = m.Body
			if m.RelatesTo != nil {
				re.ReplyTo = m.RelatesTo.GetReplyTo()
				re.Replaces = m.RelatesTo.GetReplaceID()
			}
			if m.NewContent != nil {
				re.Body = m.NewContent.Body
			}
		case event.EventReaction:
			r := e.Content.AsReaction()
			re.ReactTo, re.Key = r.RelatesTo.EventID, r.RelatesTo.Key
		}
		tl.events = append(tl.events, re)
	}
	tl.mu.Unlock()
	select {
	case tl.notify <- struct{}{}:
	default:
	}
}

// snapshot returns the events seen so far, in timeline order.
func (tl *timeline) snapshot() []roomEvent {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]roomEvent(nil), tl.events...)
}

// waitFor returns the first event matching match, waiting up to d.
func (tl *timeline) waitFor(what string, d time.Duration, match func(roomEvent) bool) roomEvent {
	tl.t.Helper()
	e, ok := tl.await(d, match)
	if !ok {
		tl.t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	return e
}

// await is waitFor for any goroutine: ok is false when d passed.
func (tl *timeline) await(d time.Duration, match func(roomEvent) bool) (roomEvent, bool) {
	deadline := time.After(d)
	for {
		for _, e := range tl.snapshot() {
			if match(e) {
				return e, true
			}
		}
		select {
		case <-tl.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return roomEvent{}, false
		}
	}
}

// cardsFor returns the bot's cards answering msg.
func (tl *timeline) cardsFor(bot id.UserID, msg id.EventID) []roomEvent {
	var out []roomEvent
	for _, e := range tl.snapshot() {
		if e.isCardFor(bot, msg) {
			out = append(out, e)
		}
	}
	return out
}

// edits returns the bot's edits of card, in order.
func (tl *timeline) edits(bot id.UserID, card id.EventID) []roomEvent {
	var out []roomEvent
	for _, e := range tl.snapshot() {
		if e.Sender == bot && e.Replaces == card {
			out = append(out, e)
		}
	}
	return out
}

// lastBody is what the card says now: its last edit, or itself.
func (tl *timeline) lastBody(bot id.UserID, card roomEvent) string {
	if ed := tl.edits(bot, card.ID); len(ed) > 0 {
		return ed[len(ed)-1].Body
	}
	return card.Body
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
