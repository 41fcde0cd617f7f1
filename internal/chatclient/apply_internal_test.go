package chatclient

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// fakeNow is noon on the day every synthetic event below happens.
var fakeNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

func newTestClient(out *bytes.Buffer) *client {
	cfg := Config{
		UserID: "@operator:localhost", BotUserID: "@nomos:localhost", RoomID: "!room:localhost",
		Out: out, Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return fakeNow },
	}
	return &client{
		cfg: cfg, room: id.RoomID(cfg.RoomID), bot: id.UserID(cfg.BotUserID), logger: cfg.Logger,
		msgs: map[id.EventID]*message{}, seen: map[id.EventID]bool{},
	}
}

// evt builds a timeline event the way a sync response carries it.
func evt(t *testing.T, eventID, sender, typ string, minute int, content string) *event.Event {
	t.Helper()
	raw := `{"event_id":"` + eventID + `","sender":"` + sender + `","type":"` + typ +
		`","origin_server_ts":` + jsonInt(fakeNow.Add(time.Duration(minute-60)*time.Minute).UnixMilli()) +
		`,"content":` + content + `}`
	var e event.Event
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatalf("event %s: %v", raw, err)
	}
	return &e
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestApplyLive feeds a sequence of live events through the client and
// checks every line it prints, so the output format and the edit, reaction
// and redaction rules are pinned down without a homeserver.
func TestApplyLive(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := newTestClient(&out)
	const bot, op, eve = "@nomos:localhost", "@operator:localhost", "@eve:localhost"
	events := []*event.Event{
		evt(t, "$1", op, "m.room.message", 1, `{"msgtype":"m.text","body":"restart jellyfin"}`),
		evt(t, "$2", bot, "m.room.message", 2, `{"msgtype":"m.notice","body":"Plan","format":"org.matrix.custom.html",
			"formatted_body":"<p><b>Plan</b>: restart jellyfin</p><p>Risk: reversible_low</p><p>React ✅ to approve</p>"}`),
		evt(t, "$3", bot, "m.room.message", 3, `{"msgtype":"m.notice","body":"* Running","m.relates_to":{"rel_type":"m.replace","event_id":"$2"},
			"m.new_content":{"msgtype":"m.notice","body":"Running: restart jellyfin"}}`),
		evt(t, "$4", eve, "m.room.message", 4, `{"msgtype":"m.text","body":"* hijack","m.relates_to":{"rel_type":"m.replace","event_id":"$2"},
			"m.new_content":{"msgtype":"m.text","body":"hijacked"}}`),
		evt(t, "$5", op, "m.reaction", 5, `{"m.relates_to":{"rel_type":"m.annotation","event_id":"$2","key":"✅"}}`),
		evt(t, "$6", bot, "m.room.message", 6, `{"msgtype":"m.text","body":"@operator:localhost destroy is waiting","m.mentions":{"user_ids":["@operator:localhost"]}}`),
		evt(t, "$7", bot, "m.room.message", 7, `{"msgtype":"m.notice","body":"* older","m.relates_to":{"rel_type":"m.replace","event_id":"$0"},
			"m.new_content":{"msgtype":"m.notice","body":"an older card, edited"}}`),
		evt(t, "$8", op, "m.room.message", 8, `{"msgtype":"m.text","body":"> <@nomos:localhost> Plan\n\ngo ahead","m.relates_to":{"m.in_reply_to":{"event_id":"$2"}}}`),
		evt(t, "$9", bot, "m.room.encrypted", 9, `{"algorithm":"m.megolm.v1.aes-sha2","ciphertext":"AAAA"}`),
		evt(t, "$10", bot, "m.room.redaction", 10, `{"redacts":"$6"}`),
		evt(t, "$1", op, "m.room.message", 1, `{"msgtype":"m.text","body":"restart jellyfin"}`), // repeated
	}
	for _, e := range events {
		c.apply(e, true)
	}
	want := strings.Join([]string{
		"#1 11:01 operator: restart jellyfin",
		"#2 11:02 nomos [notice]:",
		"    Plan: restart jellyfin",
		"    Risk: reversible_low",
		"    React ✅ to approve",
		"↻ [edited #2] 11:03 nomos [notice]: Running: restart jellyfin",
		"  11:05 operator reacted ✅ to #2",
		"» #3 11:06 nomos: @operator:localhost destroy is waiting",
		"↻ [edited] 11:07 nomos [notice]: an older card, edited",
		"#4 11:08 operator [reply to #2]: go ahead",
		"#5 11:09 nomos: [encrypted; nomos chat can't decrypt it]",
		"✗ #3 from nomos was deleted",
		"",
	}, "\n")
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	// The card stays the plan after its edit to "Running", so /react
	// finds it rather than the later messages.
	if m := c.target(0); m == nil || m.id != "$2" {
		t.Errorf("target(0) = %+v, want the plan card $2", m)
	}
}

// TestBacklog checks the start-up view: the last Backlog messages with
// their edits already applied, nothing printed twice, and no fallback
// "* " bodies.
func TestBacklog(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := newTestClient(&out)
	c.cfg.Backlog = 2
	c.roomName = "Nomos ops"
	for _, e := range []*event.Event{
		evt(t, "$a", "@nomos:localhost", "m.room.message", 1, `{"msgtype":"m.notice","body":"first"}`),
		evt(t, "$b", "@nomos:localhost", "m.room.message", 2, `{"msgtype":"m.notice","body":"second"}`),
		evt(t, "$c", "@nomos:localhost", "m.room.message", 3, `{"msgtype":"m.notice","body":"third"}`),
		evt(t, "$d", "@nomos:localhost", "m.room.message", 4, `{"msgtype":"m.notice","body":"* third, edited","m.relates_to":{"rel_type":"m.replace","event_id":"$c"},"m.new_content":{"msgtype":"m.notice","body":"third, edited"}}`),
		evt(t, "$e", "@nomos:localhost", "m.reaction", 5, `{"m.relates_to":{"rel_type":"m.annotation","event_id":"$c","key":"👀"}}`),
	} {
		c.apply(e, false)
	}
	c.printHeader()
	want := strings.Join([]string{
		`Connected to "Nomos ops" (!room:localhost) as @operator:localhost, device .`,
		"── last 2 messages ──",
		"#1 11:02 nomos [notice]: second",
		"#2 11:03 nomos [notice, edited]: third, edited",
		"── live: type a message, or /help ──",
		"",
	}, "\n")
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
