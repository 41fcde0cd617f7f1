package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

// TestOverviewShowsOpenWindows: the overview lists each open maintenance
// window (anchored for the cards that link it) with its targets, its end,
// its reason as text and its standing approval; a window that has ended,
// or not begun, is not listed.
func TestOverviewShowsOpenWindows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if body := b.get(t, "/", http.StatusOK); strings.Contains(body, "Maintenance windows") {
		t.Fatal("the overview lists windows before any is open")
	}
	jelly, err := b.st.EntityBySlug(b.ctx, "service:jellyfin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	open := func(name, reason string, starts time.Time, standing *store.NewStanding) store.Window {
		t.Helper()
		w, _, err := b.st.OpenWindow(b.ctx, store.NewWindow{Name: name, TargetIDs: []uuid.UUID{jelly.ID}, TargetSlugs: []string{jelly.Slug},
			Reason: reason, OpenedBy: "@operator:nomos.test", StartsAt: starts, EndsAt: starts.Add(time.Hour), Standing: standing})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open("w-k7q2", "disk swap "+hostile, now.Add(-time.Minute), &store.NewStanding{Code: "k7q2", MaxClass: "reversible_low", Quorum: 1})
	open("later", "not yet", now.Add(time.Hour), nil)
	ended := open("ended", "was earlier", now.Add(-30*time.Minute), nil)
	if _, err := b.st.CloseWindow(b.ctx, ended.ID, "@operator:nomos.test", now); err != nil {
		t.Fatal(err)
	}
	body := b.get(t, "/", http.StatusOK)
	containsAll(t, "/", body, "Maintenance windows", `id="window-`+w.ID.String()+`"`, "w-k7q2", `href="/e/service:jellyfin"`,
		"reversible_low, waiting for an operator", "disk swap")
	containsNone(t, "/", body, hostile, "not yet", "was earlier")
	if _, err := b.st.VoteStanding(b.ctx, w.Standing.ID, "@operator:nomos.test", "$ev", now); err != nil {
		t.Fatal(err)
	}
	containsAll(t, "/", b.get(t, "/", http.StatusOK), "k7q2, granted by @operator:nomos.test")
}
