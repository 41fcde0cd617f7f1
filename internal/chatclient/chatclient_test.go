package chatclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/chatclient"
	"github.com/nomoshq/nomos/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// session is a running chat client for a fresh operator, in a fresh room
// the "bot" user created and invited the operator to.
type session struct {
	ctx    context.Context
	op     *testenv.MatrixUser
	bot    *testenv.MatrixUser
	room   id.RoomID
	in     *io.PipeWriter
	out    *syncBuffer
	done   chan error
	filter string // the bot's sync filter for reading the room back
}

// setup creates the users and the room, lets before post to it, then
// starts chatclient.Run and waits until it is live. Run is stopped, and
// must have returned nil, when the test ends.
func setup(t *testing.T, before func(s *session)) *session {
	t.Helper()
	return setupJoin(t, true, before)
}

// setupJoin is setup; with joinFirst false the operator is only invited,
// and nomos chat joins the room itself when it starts.
func setupJoin(t *testing.T, joinFirst bool, before func(s *session)) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(testenv.Context(t), 2*time.Minute)
	s := &session{
		ctx: ctx,
		op:  testenv.NewMatrixUser(t, "operator"),
		bot: testenv.NewMatrixUser(t, "nomos"),
		out: &syncBuffer{},
	}
	resp, err := s.bot.Client.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Name: "Nomos ops", Preset: "private_chat", Invite: []id.UserID{s.op.UserID},
	})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	s.room = resp.RoomID
	// The operator is in the room before anything is said, as in the dev
	// stack, where the operator creates the room.
	if joinFirst {
		if _, err := s.op.Client.JoinRoomByID(ctx, s.room); err != nil {
			t.Fatalf("operator joins: %v", err)
		}
	}
	f, err := s.bot.Client.CreateFilter(ctx, &mautrix.Filter{Room: &mautrix.RoomFilter{
		Rooms: []id.RoomID{s.room}, Timeline: &mautrix.FilterPart{Limit: 100},
	}})
	if err != nil {
		t.Fatalf("create filter: %v", err)
	}
	s.filter = f.FilterID
	if before != nil {
		before(s)
	}

	pr, pw := io.Pipe()
	s.in = pw
	s.done = make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { s.done <- chatclient.Run(runCtx, s.config(t, pr, s.out)) }()
	t.Cleanup(func() {
		stop()
		pw.Close()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
		case <-ctx.Done():
			t.Errorf("Run did not return after its context ended")
		}
		cancel()
	})
	s.waitOut(t, "the client to go live", func(out string) bool { return strings.Contains(out, "── live") })
	return s
}

func (s *session) config(t *testing.T, in io.Reader, out io.Writer) chatclient.Config {
	return chatclient.Config{
		HomeserverURL: testenv.Homeserver(t).URL(),
		UserID:        string(s.op.UserID),
		Password:      s.op.Password,
		RoomID:        string(s.room),
		BotUserID:     string(s.bot.UserID),
		In:            in,
		Out:           out,
		Logger:        testenv.Logger(t),
	}
}

// waitOut polls the client's output until cond holds.
func (s *session) waitOut(t *testing.T, what string, cond func(out string) bool) string {
	t.Helper()
	for {
		out := s.out.String()
		if cond(out) {
			return out
		}
		select {
		case err := <-s.done:
			t.Fatalf("waiting for %s, Run returned %v; output:\n%s", what, err, out)
		case <-s.ctx.Done():
			t.Fatalf("gave up waiting for %s; output:\n%s", what, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitEvent reads the room as the bot until an event matches.
func (s *session) waitEvent(t *testing.T, what string, match func(*event.Event) bool) *event.Event {
	t.Helper()
	for {
		resp, err := s.bot.Client.SyncRequest(s.ctx, 0, "", s.filter, false, "")
		if err != nil {
			t.Fatalf("sync as the bot: %v", err)
		}
		if r := resp.Rooms.Join[s.room]; r != nil {
			for _, evt := range r.Timeline.Events {
				evt.Type.Class = event.MessageEventType
				_ = evt.Content.ParseRaw(evt.Type)
				if match(evt) {
					return evt
				}
			}
		}
		select {
		case <-s.ctx.Done():
			t.Fatalf("gave up waiting for %s in the room", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *session) type_(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatalf("type %q: %v", line, err)
	}
}

func (s *session) botSend(t *testing.T, content *event.MessageEventContent) id.EventID {
	t.Helper()
	resp, err := s.bot.Client.SendMessageEvent(s.ctx, s.room, event.EventMessage, content)
	if err != nil {
		t.Fatalf("send as the bot: %v", err)
	}
	return resp.EventID
}

// edit is an m.replace of orig the way the bot sends status updates.
func edit(orig id.EventID, body, html string) *event.MessageEventContent {
	return &event.MessageEventContent{
		MsgType: event.MsgNotice,
		Body:    "* " + body,
		NewContent: &event.MessageEventContent{
			MsgType: event.MsgNotice, Body: body,
			Format: event.FormatHTML, FormattedBody: html,
			Mentions: &event.Mentions{},
		},
		Mentions:  &event.Mentions{},
		RelatesTo: (&event.RelatesTo{}).SetReplace(orig),
	}
}

const planHTML = `<p><b>Plan</b>: restart jellyfin on <code>lxc:hubris/131</code> &amp; check it</p>` +
	`<p>Risk: <b>reversible_low</b></p>` +
	`<pre><code>pct exec 131 -- systemctl restart jellyfin</code></pre>` +
	`<p>React ✅ to approve or ❌ to deny.</p>`

func planCard() *event.MessageEventContent {
	return &event.MessageEventContent{
		MsgType:       event.MsgNotice,
		Body:          "Plan: restart jellyfin on lxc:hubris/131 & check it\nRisk: reversible_low\npct exec 131 -- systemctl restart jellyfin\nReact ✅ to approve or ❌ to deny.",
		Format:        event.FormatHTML,
		FormattedBody: planHTML,
	}
}

var htmlTag = regexp.MustCompile(`</?[a-z]+[^>]*>`)

// TestLiveMessageAndEdit: the bot's HTML card prints as text, and its edit
// prints the new content marked as an edit of that card, never the "* "
// fallback.
func TestLiveMessageAndEdit(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	card := s.botSend(t, planCard())
	out := s.waitOut(t, "the plan card", func(out string) bool { return strings.Contains(out, "React ✅ to approve") })
	for _, want := range []string{
		"#1 ", "nomos", "[notice]:",
		"Plan: restart jellyfin on `lxc:hubris/131` & check it",
		"Risk: reversible_low",
		"  pct exec 131 -- systemctl restart jellyfin",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if tag := htmlTag.FindString(out); tag != "" || strings.Contains(out, "&amp;") {
		t.Errorf("output shows markup (%q):\n%s", tag, out)
	}

	s.botSend(t, edit(card, "Running: restart jellyfin (3 s)", "<p>Running: <b>restart jellyfin</b> (3 s)</p>"))
	out = s.waitOut(t, "the edit", func(out string) bool { return strings.Contains(out, "Running: restart jellyfin (3 s)") })
	edited := regexp.MustCompile(`(?m)^↻ \[edited #1\] \S+ nomos\S* \[notice\]: Running: restart jellyfin \(3 s\)$`)
	if !edited.MatchString(out) {
		t.Errorf("the edit is not shown as an edit of #1:\n%s", out)
	}
	if strings.Contains(out, "* Running") {
		t.Errorf("the edit's fallback body was printed:\n%s", out)
	}
}

// TestBacklogOnStart: a client starting late shows the last ten messages,
// with an edit made before it started already applied.
func TestBacklogOnStart(t *testing.T) {
	t.Parallel()
	var last id.EventID
	s := setup(t, func(s *session) {
		for i := 1; i <= 12; i++ {
			last = s.botSend(t, &event.MessageEventContent{MsgType: event.MsgNotice, Body: fmt.Sprintf("note-%02d", i)})
		}
		s.botSend(t, edit(last, "note-12 revised", "note-12 <i>revised</i>"))
	})
	out := s.out.String()
	for i := 3; i <= 11; i++ {
		if want := fmt.Sprintf("note-%02d", i); !strings.Contains(out, want) {
			t.Errorf("backlog lacks %s:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"note-01", "note-02", "* note", "↻"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("backlog shows %q:\n%s", unwanted, out)
		}
	}
	if !regexp.MustCompile(`(?m)^#10 \S+ nomos\S* \[notice, edited\]: note-12 revised$`).MatchString(out) {
		t.Errorf("backlog does not end with the edited note-12:\n%s", out)
	}
}

// TestBacklogAfterJoiningLate: an operator who was only invited, and whom
// nomos chat joins on start, still sees what was said before.
func TestBacklogAfterJoiningLate(t *testing.T) {
	t.Parallel()
	s := setupJoin(t, false, func(s *session) {
		for i := 1; i <= 3; i++ {
			s.botSend(t, &event.MessageEventContent{MsgType: event.MsgNotice, Body: fmt.Sprintf("before-join-%d", i)})
		}
	})
	out := s.out.String()
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf("before-join-%d", i); !strings.Contains(out, want) {
			t.Errorf("backlog lacks %s:\n%s", want, out)
		}
	}
}

// TestTypedLineReachesRoom: a line the operator types arrives in the room
// as m.text from the operator, and comes back on screen.
func TestTypedLineReachesRoom(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	s.type_(t, "restart jellyfin")
	s.waitEvent(t, "the operator's message", func(evt *event.Event) bool {
		m := evt.Content.AsMessage()
		return evt.Sender == s.op.UserID && evt.Type == event.EventMessage && m.MsgType == event.MsgText && m.Body == "restart jellyfin"
	})
	s.waitOut(t, "the echo", func(out string) bool {
		return regexp.MustCompile(`(?m)^#1 \S+ operator\S*: restart jellyfin$`).MatchString(out)
	})
}

// TestReactAndReplyToPlan: /react and /reply go to the bot's last plan
// card even when a notice came after it; /react #N picks another message.
func TestReactAndReplyToPlan(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	s.botSend(t, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "Earlier chatter"})
	card := s.botSend(t, planCard())
	later := s.botSend(t, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "Waiting for approval."})
	s.waitOut(t, "the bot's messages", func(out string) bool { return strings.Contains(out, "Waiting for approval.") })

	s.type_(t, "/react ✅")
	s.waitEvent(t, "the ✅ reaction on the card", func(evt *event.Event) bool {
		rel := evt.Content.AsReaction().RelatesTo
		return evt.Sender == s.op.UserID && evt.Type == event.EventReaction &&
			rel.Type == event.RelAnnotation && rel.EventID == card && rel.Key == "✅"
	})
	s.waitOut(t, "the reaction on screen", func(out string) bool { return strings.Contains(out, "reacted ✅ to #2") })

	s.type_(t, "/reply go ahead")
	s.waitEvent(t, "the reply to the card", func(evt *event.Event) bool {
		m := evt.Content.AsMessage()
		return evt.Sender == s.op.UserID && evt.Type == event.EventMessage &&
			m.Body == "go ahead" && m.RelatesTo.GetReplyTo() == card
	})

	s.type_(t, "/react #3 ok")
	s.waitEvent(t, "the reaction on #3", func(evt *event.Event) bool {
		rel := evt.Content.AsReaction().RelatesTo
		return evt.Sender == s.op.UserID && evt.Type == event.EventReaction && rel.EventID == later && rel.Key == "✅"
	})
}

// TestEncryptedMessageSaysSo: an event the client can't decrypt gets one
// line saying so.
func TestEncryptedMessageSaysSo(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	_, err := s.bot.Client.SendMessageEvent(s.ctx, s.room, event.EventEncrypted, map[string]any{
		"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnAC", "sender_key": "k", "session_id": "s", "device_id": "D",
	})
	if err != nil {
		t.Fatalf("send encrypted event: %v", err)
	}
	s.waitOut(t, "the encrypted notice", func(out string) bool {
		return regexp.MustCompile(`(?m)^#1 \S+ nomos\S*: \[encrypted; nomos chat can't decrypt it\]$`).MatchString(out)
	})
}

// TestQuitAndHelp: /help lists the commands and /quit ends Run with nil.
func TestQuitAndHelp(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	s.type_(t, "/help")
	s.waitOut(t, "the help", func(out string) bool { return strings.Contains(out, "/react <emoji>") })
	s.type_(t, "/quit")
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("Run after /quit = %v, want nil", err)
		}
		s.done <- nil // for the cleanup's check
	case <-s.ctx.Done():
		t.Fatal("Run did not return after /quit")
	}
}

// TestRerunReusesDevice: a second run logs in as the same device instead
// of adding one, and shows the first run's messages as its backlog.
func TestRerunReusesDevice(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	s.type_(t, "first run")
	s.waitOut(t, "the first run's echo", func(out string) bool { return strings.Contains(out, ": first run") })
	devices := func() []id.DeviceID {
		t.Helper()
		resp, err := s.op.Client.GetDevicesInfo(s.ctx)
		if err != nil {
			t.Fatalf("list devices: %v", err)
		}
		var ids []id.DeviceID
		for _, d := range resp.Devices {
			ids = append(ids, d.DeviceID)
		}
		slices.Sort(ids)
		return ids
	}
	s.type_(t, "/quit")
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup's check
	case <-s.ctx.Done():
		t.Fatal("the first run did not end after /quit")
	}
	before := devices()
	if !slices.Contains(before, chatclient.DefaultDeviceID) {
		t.Fatalf("devices after the first run = %v, want one named %s", before, chatclient.DefaultDeviceID)
	}

	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- chatclient.Run(s.ctx, s.config(t, strings.NewReader("second run\n"), &out)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second run: %v", err)
		}
	case <-s.ctx.Done():
		t.Fatal("the second run did not end at the end of its input")
	}
	if !regexp.MustCompile(`(?m)^#1 \S+ operator\S*: first run$`).MatchString(out.String()) {
		t.Errorf("the second run's backlog lacks the first run's message:\n%s", out.String())
	}
	if diff := cmp.Diff(before, devices()); diff != "" {
		t.Errorf("devices changed across runs (-before +after):\n%s", diff)
	}
	s.waitEvent(t, "the second run's message", func(evt *event.Event) bool {
		return evt.Sender == s.op.UserID && evt.Content.AsMessage().Body == "second run"
	})
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	err := chatclient.Run(context.Background(), chatclient.Config{UserID: "operator", RoomID: "#ops:localhost"})
	if err == nil {
		t.Fatal("Run with an empty config returned nil")
	}
	for _, want := range []string{"homeserver URL", `user id "operator"`, "password", `room id "#ops:localhost"`, "input and output streams"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
