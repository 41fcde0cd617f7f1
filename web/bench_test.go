package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// BenchmarkOverview renders the overview server-side, queries included,
// for the generated fleet (internal/fleetgen) of 10 hosts and 1,000 LXCs
// running 3,000 services watched by 5,000 checks, with a tenth of the
// checks answered (some failing, some gone stale) and a page of
// executions in flight.
func BenchmarkOverview(b *testing.B) {
	bb := setup(b)
	seed := fleetgen.Seed(fleetgen.Config{})
	start := time.Now()
	if _, err := bb.st.ApplySeed(bb.ctx, seed); err != nil {
		b.Fatal(err)
	}
	due, err := bb.st.ClaimDueChecks(bb.ctx, time.Now(), 500)
	if err != nil {
		b.Fatal(err)
	}
	obs := make([]store.CheckObservation, 0, len(due))
	for i, c := range due {
		health, at := "healthy", time.Now()
		switch {
		case i%25 == 0:
			health = "unhealthy"
		case i%10 == 0:
			at = at.Add(-time.Hour) // stale once marked
		}
		obs = append(obs, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: "probe said so", At: at})
	}
	if _, err := bb.st.RecordChecks(bb.ctx, obs); err != nil {
		b.Fatal(err)
	}
	if _, err := bb.st.MarkStale(bb.ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	for range 20 {
		bb.plan(b, "service:app1001-web", "", store.StateAwaitingApproval)
		bb.plan(b, "service:app1002-web", "", store.StateRunning)
	}
	b.Logf("generated fleet in %s", time.Since(start).Round(time.Millisecond))
	b.Run("fleet-query", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := bb.st.FleetNodes(bb.ctx); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t0))
		}
		testenv.ReportPercentiles(b, "query", took)
	})
	b.Run("1000-lxcs", func(b *testing.B) {
		var took []time.Duration
		var size int
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			rec := httptest.NewRecorder()
			t0 := time.Now()
			bb.srv.ServeHTTP(rec, req)
			took = append(took, time.Since(t0))
			if rec.Code != http.StatusOK {
				b.Fatalf("overview = %d", rec.Code)
			}
			size = rec.Body.Len()
		}
		b.ReportMetric(float64(size), "page-bytes")
		testenv.ReportPercentiles(b, "render", took)
	})
}

// BenchmarkLiveUpdate measures how long a committed execution change
// takes to reach an open page's event stream: NOTIFY, the one listener,
// the fan-out and the SSE write.
func BenchmarkLiveUpdate(b *testing.B) {
	bb := setup(b)
	x := bb.plan(b, "service:jellyfin", "", store.StateRunning)
	lines := openStream(b, bb)
	waitListening(b, bb, lines)
	var took []time.Duration
	seq := int64(0)
	for b.Loop() {
		seq++
		t0 := time.Now()
		if _, err := bb.st.UpdateProgress(bb.ctx, x.ID, seq, "line"); err != nil {
			b.Fatal(err)
		}
		for {
			ev := next(b, bb.ctx, lines, "execution")
			if ev["id"] == x.ID.String() {
				break
			}
		}
		took = append(took, time.Since(t0))
	}
	testenv.ReportPercentiles(b, "event", took)
}
