package watchdog_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/watchdog"
	"github.com/nomoshq/nomos/web"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// bundle is one test's watchdog room on the test homeserver: the operator
// who is paged, the watchdog's own account, and the clock.
type bundle struct {
	ctx      context.Context
	operator *testenv.MatrixUser
	dog      *testenv.MatrixUser
	room     id.RoomID
	pager    *watchdog.Matrix
	clock    *testenv.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{ctx: testenv.Context(t), clock: testenv.NewClock(time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC))}
	b.operator = testenv.NewMatrixUser(t, "operator")
	b.dog = testenv.NewMatrixUser(t, "watchdog")
	resp, err := b.operator.Client.CreateRoom(b.ctx, &mautrix.ReqCreateRoom{Name: "nomos watchdog", Preset: "private_chat", Invite: []id.UserID{b.dog.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	b.room = resp.RoomID
	b.pager, err = watchdog.NewMatrix(b.ctx, watchdog.MatrixConfig{
		HomeserverURL: testenv.Homeserver(t).URL(), UserID: b.dog.UserID, Password: b.dog.Password,
		Room: b.room, Operators: []id.UserID{b.operator.UserID}, Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// watchdog checks the two paths on the bundle's clock, a path going down
// on its second failure in a row.
func (b *bundle) watchdog(t *testing.T, lan, mesh string) *watchdog.Watchdog {
	t.Helper()
	w, err := watchdog.New(watchdog.Config{
		Paths: []watchdog.Path{{Name: "LAN", URL: lan}, {Name: "mesh", URL: mesh}},
		Pager: b.pager, Timeout: 2 * time.Second, FailAfter: 2, RepageAfter: 30 * time.Minute, MaxPages: 3,
		Clock: b.clock.Now, Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checks runs n checks, 30 seconds apart on the clock.
func (b *bundle) checks(w *watchdog.Watchdog, n int) {
	for range n {
		w.Check(b.ctx)
		b.clock.Add(30 * time.Second)
	}
}

// said is what the watchdog posted in the room so far, oldest first. The
// operator posts a marker and reads back to it, so everything the
// watchdog sent before is in what comes back.
func (b *bundle) said(t *testing.T) []*event.MessageEventContent {
	t.Helper()
	marker, err := b.operator.Client.SendText(b.ctx, b.room, fmt.Sprintf("marker %d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := b.operator.Client.Messages(b.ctx, b.room, "", "", mautrix.DirectionBackward, nil, 200)
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		var out []*event.MessageEventContent
		for _, ev := range resp.Chunk {
			if ev.ID == marker.EventID {
				seen = true
			}
			if ev.Sender != b.dog.UserID || ev.Type != event.EventMessage {
				continue
			}
			if err := ev.Content.ParseRaw(ev.Type); err != nil {
				t.Fatal(err)
			}
			out = append([]*event.MessageEventContent{ev.Content.AsMessage()}, out...)
		}
		if seen {
			return out
		}
		select {
		case <-b.ctx.Done():
			t.Fatal("the operator's marker never came back from the homeserver")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pages are the messages that reach a phone: m.text mentioning the
// operator.
func (b *bundle) pages(msgs []*event.MessageEventContent) []string {
	var out []string
	for _, m := range msgs {
		if m.MsgType == event.MsgText && m.Mentions != nil && len(m.Mentions.UserIDs) == 1 && m.Mentions.UserIDs[0] == b.operator.UserID {
			out = append(out, m.Body)
		}
	}
	return out
}

func notices(msgs []*event.MessageEventContent) []string {
	var out []string
	for _, m := range msgs {
		if m.MsgType == event.MsgNotice {
			out = append(out, m.Body)
		}
	}
	return out
}

// deadURL is a status page address where nothing listens, as when the
// bot is stopped; its port can be listened on later.
func deadURL(t *testing.T) (string, string) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	return "http://" + addr + "/", addr
}

// botPage serves the real status page's /healthz and /readyz, over a
// fresh database, with the bot's last sync at lastSync before the clock.
func botPage(t *testing.T, c *testenv.Clock, lastSync time.Duration) *httptest.Server {
	t.Helper()
	st := testenv.Store(t)
	page, err := web.New(web.Config{Store: st, Logger: testenv.Logger(t), Clock: c.Now,
		Ready:    []web.ReadyCheck{{Name: "postgres", Check: st.Ping}},
		LastSync: func() time.Time { return c.Now().Add(-lastSync) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)
	return srv
}

// serveAt starts, at addr, a reverse proxy to target: the path coming
// back (a proxy restarted, a bot started again).
func serveAt(t *testing.T, addr, target string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(u), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed, once Close below has run
	t.Cleanup(func() { _ = srv.Close() })
}

// TestWatchdogPagesOnceWhenBothPathsFail: with the bot stopped, a
// watchdog pointed at two dead URLs pages once, an m.text that mentions
// the operator and names both paths; checking on within the back-off
// pages nobody again; and when the bot answers again the recovery is
// announced once, as a notice.
func TestWatchdogPagesOnceWhenBothPathsFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lan, lanAddr := deadURL(t)
	mesh, _ := deadURL(t)
	w := b.watchdog(t, lan, mesh)
	b.checks(w, 1)
	if got := b.said(t); len(got) != 0 {
		t.Fatalf("after one failed check the watchdog said %q; want nothing until a path fails twice in a row", notices(got))
	}
	b.checks(w, 10) // five minutes of checks, all failing
	got := b.said(t)
	pages := b.pages(got)
	if len(pages) != 1 || len(got) != 1 {
		t.Fatalf("the watchdog posted %d messages with %d pages; want exactly one page:\n%q", len(got), len(pages), pages)
	}
	for _, want := range []string{"unreachable over every path", "LAN (" + lan + ")", "mesh (" + mesh + ")", "connection refused", b.operator.UserID.String()} {
		if !strings.Contains(pages[0], want) {
			t.Errorf("page %q does not say %q", pages[0], want)
		}
	}

	// The bot starts again, reachable on the LAN only.
	serveAt(t, lanAddr, botPage(t, b.clock, 5*time.Second).URL)
	b.checks(w, 5)
	got = b.said(t)
	if n := len(b.pages(got)); n != 1 {
		t.Errorf("%d pages after the recovery; want still the one", n)
	}
	recovered := notices(got)
	if len(recovered) != 1 || !strings.Contains(recovered[0], "answers again over the LAN path, after 5m30s unreachable") ||
		!strings.Contains(recovered[0], "The mesh path is still down") {
		t.Errorf("notices %q; want one recovery, naming the LAN path, the outage and the mesh path still down", recovered)
	}
}

// TestWatchdogPagesAreBounded: an outage that goes on is paged again
// after RepageAfter, then after twice that, and never more than MaxPages
// times.
func TestWatchdogPagesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lan, _ := deadURL(t)
	mesh, _ := deadURL(t)
	w := b.watchdog(t, lan, mesh)
	b.checks(w, 2) // the first page, at 30s
	b.clock.Add(29 * time.Minute)
	b.checks(w, 1) // 29m30s after the first page: not yet
	if n := len(b.pages(b.said(t))); n != 1 {
		t.Fatalf("%d pages before RepageAfter; want 1", n)
	}
	b.checks(w, 1) // 30m after: the second
	b.clock.Add(59 * time.Minute)
	b.checks(w, 1) // 59m30s after the second: not yet
	if n := len(b.pages(b.said(t))); n != 2 {
		t.Fatalf("%d pages; want 2, the third waiting for twice RepageAfter", n)
	}
	b.checks(w, 1) // 60m after the second: the third and last
	for range 10 {
		b.clock.Add(6 * time.Hour)
		b.checks(w, 1)
	}
	pages := b.pages(b.said(t))
	if len(pages) != 3 {
		t.Fatalf("%d pages over three days of outage; want MaxPages, 3:\n%q", len(pages), pages)
	}
	if !strings.Contains(pages[1], "still unreachable, for 30m30s") || !strings.Contains(pages[2], "still unreachable, for 1h30m") {
		t.Errorf("the later pages do not say how long: %q", pages[1:])
	}
}

// TestWatchdogSummarisesAPartialOutage: with one URL dead (a broken
// proxy on the mesh path) and the bot answering on the LAN, nobody is
// paged; when the mesh path heals, one notice sums the outage up.
func TestWatchdogSummarisesAPartialOutage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bot := botPage(t, b.clock, 5*time.Second)
	mesh, meshAddr := deadURL(t)
	w := b.watchdog(t, bot.URL+"/", mesh)
	b.checks(w, 8) // four minutes with the mesh path down
	if got := b.said(t); len(got) != 0 {
		t.Fatalf("with the LAN path up the watchdog said %q; want nothing until the mesh path heals", got[0].Body)
	}
	serveAt(t, meshAddr, bot.URL)
	b.checks(w, 3)
	got := b.said(t)
	if pages := b.pages(got); len(pages) != 0 {
		t.Errorf("pages %q for a single path down; want none", pages)
	}
	summary := notices(got)
	if len(summary) != 1 || !strings.Contains(summary[0], "The mesh path was down 4m (/healthz does not answer") ||
		!strings.Contains(summary[0], "the LAN path held") {
		t.Errorf("notices %q; want one summary: the mesh path down 4m, the LAN path held", summary)
	}
}

// TestWatchdogPagesWhenTheBotStopsSyncing: a bot that answers HTTP on
// both paths but has not heard from the homeserver for longer than
// MaxSyncAge hears no operator, and is paged like a dead one.
func TestWatchdogPagesWhenTheBotStopsSyncing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bot := botPage(t, b.clock, 10*time.Minute)
	w := b.watchdog(t, bot.URL+"/", bot.URL+"/")
	b.checks(w, 3)
	pages := b.pages(b.said(t))
	if len(pages) != 1 || !strings.Contains(pages[0], "the bot last synced with the homeserver 10m ago") {
		t.Errorf("pages %q; want one naming the sync 10m ago", pages)
	}
}

// TestWatchdogRefusesAnEncryptedRoom: the watchdog sends in the clear, so
// it will not start in an encrypted room, where its pages would show
// with a warning or not at all.
func TestWatchdogRefusesAnEncryptedRoom(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	operator := testenv.NewMatrixUser(t, "operator")
	dog := testenv.NewMatrixUser(t, "watchdog")
	resp, err := operator.Client.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{dog.UserID},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = watchdog.NewMatrix(ctx, watchdog.MatrixConfig{
		HomeserverURL: testenv.Homeserver(t).URL(), UserID: dog.UserID, Password: dog.Password,
		Room: resp.RoomID, Operators: []id.UserID{operator.UserID},
	})
	if err == nil || !strings.Contains(err.Error(), watchdog.ErrEncryptedRoom.Error()) {
		t.Errorf("NewMatrix in an encrypted room = %v; want %v", err, watchdog.ErrEncryptedRoom)
	}
}
