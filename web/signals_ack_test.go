package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/nomoshq/nomos/store"
)

// TestSignalsPageShowsAcknowledgedAndMuted: the signals page says who
// acknowledged a signal and until when it is muted, as text.
func TestSignalsPageShowsAcknowledgedAndMuted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, err := b.st.EntityBySlug(b.ctx, "service:gitea")
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := b.st.RaiseSignal(b.ctx, store.NewSignal{EntityID: e.ID, Kind: "alertmanager:GiteaDown", Severity: "critical", Summary: "gitea answers 502"})
	if err != nil {
		t.Fatal(err)
	}
	by := "@op<b>x</b>:nomos.test"
	if _, err := b.st.AcknowledgeSignal(b.ctx, g.ID, by); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(2 * time.Hour).UTC()
	if err := b.st.MuteSignal(b.ctx, g.ID, by, until); err != nil {
		t.Fatal(err)
	}
	body := b.get(t, "/signals", http.StatusOK)
	containsAll(t, "/signals", body, "acknowledged by @op&lt;b&gt;x&lt;/b&gt;:nomos.test", "🔇 muted until "+until.Format("Jan 2 15:04 UTC"))
	containsNone(t, "/signals", body, "<b>x</b>")
}
