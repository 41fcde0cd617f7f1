package bot_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/internal/testenv"
)

// faultyHomeserver stands between the bot and Dendrite and fails the first
// sends of a plan card: the first it passes on and then answers HTTP 500, as
// a homeserver does when it stored the event but failed after (Dendrite on
// SQLite: "database is locked"); the second it answers 500 without passing
// it on. Everything else goes through untouched.
type faultyHomeserver struct {
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	cardTxns []string // the transaction id of every card send, in order
}

func newFaultyHomeserver(t *testing.T) *httptest.Server {
	target, err := url.Parse(testenv.Homeserver(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyHomeserver{proxy: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.cardTxns) < 3 {
			t.Errorf("the bot offered the card %d times, want 3 (two failures, then success)", len(f.cardTxns))
			return
		}
		for _, txn := range f.cardTxns[1:3] {
			if txn != f.cardTxns[0] {
				t.Errorf("card sends used transaction ids %v, want one id repeated", f.cardTxns)
			}
		}
	})
	return srv
}

func (f *faultyHomeserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/send/m.room.message/") {
		f.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"io.nomos.execution"`)) {
		f.proxy.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.cardTxns = append(f.cardTxns, path.Base(r.URL.Path))
	n := len(f.cardTxns)
	f.mu.Unlock()
	fail := func() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"errcode":"M_UNKNOWN","error":"database is locked"}`)
	}
	switch n {
	case 1: // stored, then failed
		f.proxy.ServeHTTP(httptest.NewRecorder(), r)
		fail()
	case 2: // failed before anything was stored
		fail()
	default:
		f.proxy.ServeHTTP(w, r)
	}
}

// TestCardSurvivesHomeserverFailures: a homeserver that answers a card's
// send with HTTP 500, once after storing it and once before, neither loses
// the card nor shows it twice. The bot offers it again under the same
// transaction id, which the homeserver answers with the event it stored
// (client-server API, "Transaction identifiers"), and the card it records
// for the plan is the one in the room, so a ✅ on it counts.
func TestCardSurvivesHomeserverFailures(t *testing.T) {
	t.Parallel()
	proxy := newFaultyHomeserver(t)
	b := setup(t, withConfig(func(c *bot.Config) { c.HomeserverURL = proxy.URL }))
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if x := b.execFor(t, card.ID); x.Action != "restart" {
		t.Fatalf("the card's execution is %q, want restart", x.Action)
	}
	if n := countContaining(b.botBodies(t), "awaiting approval"); n != 1 {
		t.Fatalf("%d cards in the room, want 1", n)
	}
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}
