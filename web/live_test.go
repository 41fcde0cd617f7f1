package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/store"
)

// openStream connects to /events as EventSource would and returns the
// data lines it receives.
func openStream(t testing.TB, b *bundle) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.http.URL+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("/events = %d %s, want a stream", resp.StatusCode, ct)
	}
	lines := make(chan string, 64)
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == ": live" {
				close(ready)
			}
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("the stream never opened")
	}
	return lines
}

// next waits for the stream's next event of a kind.
func next(t testing.TB, ctx context.Context, lines <-chan string, kind string) map[string]string {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream closed before a %s event", kind)
			}
			var ev map[string]string
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("event %q: %v", l, err)
			}
			if ev["kind"] == kind {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", kind)
		}
	}
}

// waitListening returns once the live feed's listener is up: a change
// committed before it listens is not streamed. Any warm-up plan coming
// through will do.
func waitListening(t testing.TB, b *bundle, lines <-chan string) {
	t.Helper()
	warm := map[string]bool{}
	for seen := false; !seen; {
		warm[b.plan(t, "service:gitea", "", store.StateAwaitingApproval).ID.String()] = true
		ctx, cancel := context.WithTimeout(b.ctx, 200*time.Millisecond)
		for waiting := true; waiting && !seen; {
			select {
			case l := <-lines:
				var ev map[string]string
				seen = json.Unmarshal([]byte(l), &ev) == nil && warm[ev["id"]]
			case <-ctx.Done():
				waiting = false
			}
		}
		cancel()
	}
}

func TestEventsStreamsStateChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	x := b.plan(t, "service:jellyfin", "", store.StateAwaitingApproval)
	lines := openStream(t, b)
	waitListening(t, b, lines)
	b.move(t, x.ID, store.StateAwaitingApproval, store.StateApproved, nil)
	ev := next(t, b.ctx, lines, "execution")
	for ev["id"] != x.ID.String() {
		ev = next(t, b.ctx, lines, "execution")
	}
	if ev["state"] != "approved" {
		t.Errorf("event %v, want %s approved", ev, x.ID)
	}
	// Health and signals have no notification: the poll notices them.
	jf, err := b.st.EntityBySlug(b.ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	// The poll compares each mark with the one before, so a change it
	// read as its first mark is never announced: under load that can be
	// this one. Each second without an event, one more signal is raised.
	for i := 0; ; i++ {
		if _, _, err := b.st.RaiseSignal(b.ctx, store.NewSignal{EntityID: jf.ID, Kind: fmt.Sprintf("manual-%d", i), Severity: "warning", Summary: "slow"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		ev, ok := nextOr(ctx, lines, "fleet")
		cancel()
		if ok {
			t.Logf("fleet event %v after %d signals", ev, i+1)
			return
		}
		if b.ctx.Err() != nil {
			t.Fatal("no fleet event")
		}
	}
}

// nextOr is next without failing: false when ctx ends first.
func nextOr(ctx context.Context, lines <-chan string, kind string) (map[string]string, bool) {
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil, false
			}
			var ev map[string]string
			if json.Unmarshal([]byte(l), &ev) == nil && ev["kind"] == kind {
				return ev, true
			}
		case <-ctx.Done():
			return nil, false
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.plan(t, "service:jellyfin", "", store.StateAwaitingApproval)
	b.plan(t, "service:gitea", "", store.StateAwaitingApproval)
	jf, err := b.st.EntityBySlug(b.ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.st.RaiseSignal(b.ctx, store.NewSignal{EntityID: jf.ID, Kind: "manual", Severity: "critical", Summary: "down"}); err != nil {
		t.Fatal(err)
	}
	// One check answers, then goes silent for an hour: its target is stale.
	due, err := b.st.ClaimDueChecks(b.ctx, time.Now(), 1)
	if err != nil || len(due) != 1 {
		t.Fatalf("claim a check: %v %v", due, err)
	}
	if err := b.st.RecordCheck(b.ctx, store.CheckObservation{CheckID: due[0].ID.String(), TargetID: due[0].TargetID.String(), Health: "healthy", At: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A result an hour old is stale as it is written; the pass raises
	// its health.stale signal, a warning.
	if _, err := b.st.MarkStale(b.ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	body := b.get(t, "/metrics", http.StatusOK)
	containsAll(t, "/metrics", body,
		`nomos_executions{risk_class="reversible_low",state="awaiting_approval"} 2`,
		`nomos_signals_open{severity="critical"} 1`,
		`nomos_signals_open{severity="warning"} 1`,
		`nomos_stale_targets 2`,
		`nomos_store_up 1`, `nomos_web_live_clients`)
}
