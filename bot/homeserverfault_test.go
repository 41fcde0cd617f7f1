package bot_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/internal/testenv"
)

// cardFault is what faultyHomeserver does with one send of a plan card.
type cardFault int

const (
	// storedThenFail passes the send on, then answers HTTP 500, as a
	// homeserver does when it stored the event but failed after (Dendrite
	// on SQLite: "database is locked").
	storedThenFail cardFault = iota
	// failBefore answers HTTP 500 without passing the send on.
	failBefore
)

// faultyHomeserver stands between the bot and Dendrite and meets the first
// sends of a plan card with faults, one each, in order; later sends and
// everything else go through untouched.
type faultyHomeserver struct {
	proxy  *httputil.ReverseProxy
	faults []cardFault

	mu       sync.Mutex
	cardTxns []string // the transaction id of every card send, in order
}

func newFaultyHomeserver(t *testing.T, faults ...cardFault) (*httptest.Server, *faultyHomeserver) {
	target, err := url.Parse(testenv.Homeserver(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyHomeserver{proxy: httputil.NewSingleHostReverseProxy(target), faults: faults}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}

// txns returns the transaction id of every card send so far.
func (f *faultyHomeserver) txns() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cardTxns)
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
	switch {
	case n > len(f.faults):
		f.proxy.ServeHTTP(w, r)
	case f.faults[n-1] == storedThenFail:
		f.proxy.ServeHTTP(httptest.NewRecorder(), r)
		fail()
	default:
		fail()
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
	proxy, faults := newFaultyHomeserver(t, storedThenFail, failBefore)
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
	txns := faults.txns()
	if len(txns) != 3 || txns[1] != txns[0] || txns[2] != txns[0] {
		t.Errorf("card sends used transaction ids %v, want three sends under one id", txns)
	}
}

// TestCardTheHomeserverKeptRefusingIsPostedLater: when every try of a
// card's send fails, the plan is not left uncarded until it expires, where
// nobody can see or decide it: the bot posts its card on its next check,
// once, and a ✅ on that card counts.
func TestCardTheHomeserverKeptRefusingIsPostedLater(t *testing.T) {
	t.Parallel()
	proxy, faults := newFaultyHomeserver(t, failBefore, failBefore, failBefore, failBefore)
	b := setup(t, withConfig(func(c *bot.Config) {
		c.HomeserverURL, c.ExpiryCheckInterval = proxy.URL, 200*time.Millisecond
	}))
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if n := countContaining(b.botBodies(t), "awaiting approval"); n != 1 {
		t.Fatalf("%d cards in the room, want 1", n)
	}
	txns := faults.txns()
	if len(txns) != 5 || txns[4] == txns[0] {
		t.Errorf("card sends used transaction ids %v, want four failed tries under one id, then a new send", txns)
	}
	b.execFor(t, card.ID)
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))
	if n := b.count(t, "pct exec 101 -- systemctl restart jellyfin.service"); n != 1 {
		t.Errorf("labsim ran the restart %d times, want once", n)
	}
}
