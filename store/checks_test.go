package store_test

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// claimAll claims every check due at now.
func claimAll(t *testing.T, s *store.Store, now time.Time) map[string]store.DueCheck {
	t.Helper()
	due, err := s.ClaimDueChecks(t.Context(), now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.DueCheck{}
	for _, c := range due {
		out[c.Slug] = c
	}
	return out
}

func TestClaimDueChecksSendsEachSlotOnce(t *testing.T) {
	t.Parallel()
	s, _ := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)

	first := claimAll(t, s, now)
	if len(first) != 22 {
		t.Fatalf("first pass claimed %d checks, want the 22 enabled seeded checks (none has run)", len(first))
	}
	caddy := first["caddy-http"]
	if caddy.Kind != "http" || caddy.Interval != 30*time.Second || caddy.Spec["path"] != "/healthz" {
		t.Errorf("caddy-http claimed as %+v", caddy)
	}
	if again := claimAll(t, s, now); len(again) != 0 {
		t.Errorf("the same slot was claimed twice: %v", slices.Collect(maps.Keys(again)))
	}
	// 30 s on, only the 30 s checks are due; 60 s on, the 60 s ones too.
	got30 := slices.Sorted(maps.Keys(claimAll(t, s, now.Add(30*time.Second))))
	if want := []string{"adguard-dns", "caddy-http"}; !slices.Equal(got30, want) {
		t.Errorf("30s on claimed %v, want the 30 s checks %v", got30, want)
	}
	got := claimAll(t, s, now.Add(60*time.Second))
	if _, ok := got["jellyfin-http"]; !ok {
		t.Errorf("60s on claimed %v, want jellyfin-http among them", slices.Collect(maps.Keys(got)))
	}
	if _, ok := got["paperless-http"]; ok {
		t.Errorf("paperless-http (every 120s) was claimed 60s after its run")
	}
}

func TestClaimDueChecksConcurrentClaimersNeverShare(t *testing.T) {
	t.Parallel()
	s, _ := seeded(t)
	now := time.Now().UTC()
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			due, err := s.ClaimDueChecks(t.Context(), now, 3)
			for err == nil && len(due) > 0 {
				mu.Lock()
				for _, c := range due {
					seen[c.ID]++
				}
				mu.Unlock()
				due, err = s.ClaimDueChecks(t.Context(), now, 3)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(seen) != 22 {
		t.Errorf("%d checks claimed in all, want the 22 enabled", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("check %s claimed %d times", id, n)
		}
	}
}

func TestCheckResultsAggregateAndRaiseSignals(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	checks := claimAll(t, s, now)
	unit, tcp := checks["postgres-unit"], checks["postgres-tcp"]
	pg := entityID(t, s, "service:postgres")
	record := func(c store.DueCheck, health, detail string, at time.Time) {
		t.Helper()
		if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: detail, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	status := func() store.Entity { t.Helper(); return entityID(t, s, "service:postgres") }
	openSignals := func() []store.Signal {
		t.Helper()
		sigs, err := s.ListSignals(ctx, store.SignalFilter{EntityID: &pg.ID})
		if err != nil {
			t.Fatal(err)
		}
		return sigs
	}

	record(unit, "healthy", "postgresql.service is active", now)
	record(tcp, "unhealthy", "nothing listens on TCP port 5432", now.Add(time.Second))
	// A healthy unit does not hide a closed port: the worst check wins.
	if e := status(); e.Health != "unhealthy" || !strings.Contains(e.Detail, "postgres-tcp: nothing listens") {
		t.Errorf("postgres is %s (%q), want unhealthy from postgres-tcp", e.Health, e.Detail)
	}
	sigs := openSignals()
	if len(sigs) != 1 || sigs[0].Kind != "check:postgres-tcp" || sigs[0].Severity != "critical" {
		t.Fatalf("open signals %+v, want one critical check:postgres-tcp", sigs)
	}
	// A later healthy unit result still leaves it unhealthy.
	record(unit, "healthy", "postgresql.service is active", now.Add(2*time.Second))
	if e := status(); e.Health != "unhealthy" {
		t.Errorf("postgres is %s after a second healthy unit result, want unhealthy", e.Health)
	}
	// A result older than the one on record changes nothing.
	record(tcp, "healthy", "old news", now.Add(-time.Minute))
	if e := status(); e.Health != "unhealthy" || len(openSignals()) != 1 {
		t.Errorf("an out-of-date healthy result changed postgres to %s", e.Health)
	}
	// Degraded is a warning on the same signal, not a second one.
	record(tcp, "degraded", "slow to accept", now.Add(3*time.Second))
	if sigs := openSignals(); len(sigs) != 1 || sigs[0].Severity != "warning" || !strings.Contains(sigs[0].Summary, "slow to accept") {
		t.Errorf("open signals %+v, want the one signal lowered to a warning", sigs)
	}
	// Healthy again: the signal resolves and the target is healthy.
	record(tcp, "healthy", "something listens on TCP port 5432", now.Add(4*time.Second))
	if e := status(); e.Health != "healthy" {
		t.Errorf("postgres is %s (%q), want healthy", e.Health, e.Detail)
	}
	if sigs := openSignals(); len(sigs) != 0 {
		t.Errorf("signals still open: %+v", sigs)
	}
	// A result for a check that does not observe this target is refused.
	err := s.RecordCheck(ctx, store.CheckObservation{CheckID: unit.ID.String(), TargetID: entityID(t, s, "service:jellyfin").ID.String(), Health: "healthy"})
	if err == nil {
		t.Error("a check's result was written against another target")
	}
}

// TestMarkStale: a check every 30 s is stale after five minutes (three
// intervals would be 90 s, under the floor), and its service and the
// container running it go stale together; a fresh result brings both back.
func TestMarkStale(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	checks := claimAll(t, s, now)
	caddy := checks["caddy-http"] // every 30 s
	if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: caddy.ID.String(), TargetID: caddy.TargetID.String(), Health: "healthy", Detail: "GET answered 200", At: now}); err != nil {
		t.Fatal(err)
	}
	if got := store.StaleAge(30 * time.Second); got != 5*time.Minute {
		t.Errorf("StaleAge(30s) = %s, want the 5m floor", got)
	}
	if got := store.StaleAge(10 * time.Minute); got != 30*time.Minute {
		t.Errorf("StaleAge(10m) = %s, want three intervals", got)
	}
	if n, err := s.MarkStale(ctx, now.Add(299*time.Second)); err != nil || n != 0 {
		t.Fatalf("MarkStale before the 5m floor = %d, %v; want 0", n, err)
	}
	if ct := entityID(t, s, "lxc:strong/104"); ct.Health != "healthy" || ct.Detail != "caddy: caddy-http: GET answered 200" {
		t.Errorf("caddy's container is %s (%q), want healthy from its service", ct.Health, ct.Detail)
	}
	// The service and the container it runs in go stale together.
	if n, err := s.MarkStale(ctx, now.Add(301*time.Second)); err != nil || n != 2 {
		t.Fatalf("MarkStale after the floor = %d, %v; want 2", n, err)
	}
	e := entityID(t, s, "service:caddy")
	if e.Health != "stale" || !strings.Contains(e.Detail, "no result from caddy-http since") || !strings.Contains(e.Detail, "last seen: healthy") {
		t.Errorf("caddy is %s (%q), want stale saying which check went quiet and what it last saw", e.Health, e.Detail)
	}
	if ct := entityID(t, s, "lxc:strong/104"); ct.Health != "stale" || !strings.Contains(ct.Detail, "caddy: no result from caddy-http since") {
		t.Errorf("caddy's container is %s (%q), want stale from its service", ct.Health, ct.Detail)
	}
	if n, _ := s.MarkStale(ctx, now.Add(400*time.Second)); n != 0 {
		t.Errorf("a stale target was marked again")
	}
	// The next result brings it back.
	if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: caddy.ID.String(), TargetID: caddy.TargetID.String(), Health: "healthy", At: now.Add(401 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if e := entityID(t, s, "service:caddy"); e.Health != "healthy" {
		t.Errorf("caddy is %s after a fresh result, want healthy", e.Health)
	}
	if e := entityID(t, s, "lxc:strong/104"); e.Health != "healthy" {
		t.Errorf("caddy's container is %s after a fresh result, want healthy", e.Health)
	}
}

// staleSignals are the open health.stale signals, by entity slug.
func staleSignals(t *testing.T, s *store.Store) map[string]store.Signal {
	t.Helper()
	list, err := s.ListSignals(testenv.Context(t), store.SignalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Signal{}
	for _, g := range list {
		if g.Kind == store.StaleSignalKind {
			out[g.EntitySlug] = g
		}
	}
	return out
}

// TestStaleRaisesAndClearsASignal: going stale raises one health.stale
// signal on the target (its container, stale only through it, raises
// none), which is announced like any other signal; the target's recovery
// resolves it, and its recovery note follows like any other's. The clock
// is the one each call is given.
func TestStaleRaisesAndClearsASignal(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	checks := claimAll(t, s, now)
	caddy := checks["caddy-http"]
	if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: caddy.ID.String(), TargetID: caddy.TargetID.String(), Health: "healthy", Detail: "GET answered 200", At: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkStale(ctx, now.Add(301*time.Second)); err != nil {
		t.Fatal(err)
	}
	open := staleSignals(t, s)
	g, ok := open["service:caddy"]
	if len(open) != 1 || !ok || g.Severity != "warning" || !strings.Contains(g.Summary, "no result from caddy-http since") {
		t.Fatalf("open health.stale signals %+v; want one, a warning on service:caddy naming the quiet check", open)
	}
	announce, err := s.SignalsToAnnounce(ctx, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(announce, func(a store.SignalAlert) bool { return a.ID == g.ID }) {
		t.Errorf("the health.stale signal is not among those to announce: %+v", announce)
	}
	if ok, err := s.ClaimSignalAlert(ctx, g.ID); err != nil || !ok {
		t.Fatal(err)
	}
	if err := s.SetSignalAlertEvent(ctx, g.ID, "!ops:nomos.test", "$alert"); err != nil {
		t.Fatal(err)
	}
	// Another pass raises nothing more.
	if _, err := s.MarkStale(ctx, now.Add(400*time.Second)); err != nil {
		t.Fatal(err)
	}
	if open := staleSignals(t, s); len(open) != 1 {
		t.Errorf("after a second pass: %d open health.stale signals, want the one", len(open))
	}
	// A fresh result, then the next pass: the signal is resolved, and its
	// recovery is due to be noted under the alert.
	if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: caddy.ID.String(), TargetID: caddy.TargetID.String(), Health: "healthy", Detail: "GET answered 200", At: now.Add(401 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkStale(ctx, now.Add(405*time.Second)); err != nil {
		t.Fatal(err)
	}
	if open := staleSignals(t, s); len(open) != 0 {
		t.Errorf("after the recovery: open health.stale signals %+v, want none", open)
	}
	announce, err = s.SignalsToAnnounce(ctx, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(announce, func(a store.SignalAlert) bool { return a.ID == g.ID && a.State == "resolved" }) {
		t.Errorf("the resolved health.stale signal is not due for its recovery note: %+v", announce)
	}
}

// TestAQuietCheckIsNotHiddenByAnotherThatAnswers: of a target's two
// checks, one that keeps answering healthy does not keep the target
// healthy once the other has gone quiet; but a fresh unhealthy result
// outranks stale.
func TestAQuietCheckIsNotHiddenByAnotherThatAnswers(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	at := now
	s := openSeeded(t, store.Config{URL: testenv.DatabaseURL(t), Logger: testenv.Logger(t), Clock: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return at
	}})
	checks := claimAll(t, s, now)
	unit, tcp := checks["postgres-unit"], checks["postgres-tcp"] // both every 60 s, on service:postgres
	record := func(c store.DueCheck, health string, when time.Time) {
		t.Helper()
		clock.Lock()
		at = when
		clock.Unlock()
		if err := s.RecordCheck(ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: health, Detail: health, At: when}); err != nil {
			t.Fatal(err)
		}
	}
	record(unit, "healthy", now)
	record(tcp, "healthy", now)
	// The unit check keeps answering; the port check stops.
	for i := 1; i <= 4; i++ {
		record(unit, "healthy", now.Add(time.Duration(i)*2*time.Minute))
	}
	if _, err := s.MarkStale(ctx, now.Add(8*time.Minute+time.Second)); err != nil {
		t.Fatal(err)
	}
	if e := entityID(t, s, "service:postgres"); e.Health != "stale" || !strings.Contains(e.Detail, "no result from postgres-tcp") {
		t.Errorf("service:postgres is %s (%q); want stale, naming postgres-tcp", e.Health, e.Detail)
	}
	if _, ok := staleSignals(t, s)["service:postgres"]; !ok {
		t.Error("no health.stale signal on service:postgres")
	}
	// A fresh healthy result of the unit check does not make it healthy
	// again while the port check is still quiet; a failing one outranks
	// stale.
	record(unit, "healthy", now.Add(9*time.Minute))
	if e := entityID(t, s, "service:postgres"); e.Health != "stale" {
		t.Errorf("after a fresh result of the other check, service:postgres is %s; want still stale", e.Health)
	}
	record(unit, "unhealthy", now.Add(10*time.Minute))
	if e := entityID(t, s, "service:postgres"); e.Health != "unhealthy" {
		t.Errorf("after a failing result, service:postgres is %s; want unhealthy", e.Health)
	}
}

// TestClaimChecksDueByKeepsTheSlot: a prober that claims a tick ahead gets
// each check with its own slot, in slot order, and the check's next slot
// is an interval after that one, not after the claim; nothing due after
// the look-ahead is taken.
func TestClaimChecksDueByKeepsTheSlot(t *testing.T) {
	t.Parallel()
	s, _ := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	claimAll(t, s, now) // every check ran at now

	// 29.6 s on, a claim 500 ms ahead takes the 30 s checks, due at 30 s.
	at := now.Add(29600 * time.Millisecond)
	due, err := s.ClaimChecksDueBy(t.Context(), at, at.Add(500*time.Millisecond), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, c := range due {
		slugs = append(slugs, c.Slug)
		if !c.Slot.Equal(now.Add(30 * time.Second)) {
			t.Errorf("%s claimed for %s, want its slot %s", c.Slug, c.Slot, now.Add(30*time.Second))
		}
	}
	if want := []string{"adguard-dns", "caddy-http"}; !slices.Equal(slices.Sorted(slices.Values(slugs)), want) {
		t.Errorf("claimed %v ahead, want the 30 s checks %v", slugs, want)
	}
	// Their next slot is at 60 s: a claim at 59.9 s without look-ahead
	// takes none of them; one at 60 s takes them again.
	if got := claimAll(t, s, now.Add(59900*time.Millisecond)); len(got) != 0 {
		t.Errorf("claimed %v before the next slot", slices.Collect(maps.Keys(got)))
	}
	if got := claimAll(t, s, now.Add(60*time.Second)); got["caddy-http"].Slug == "" {
		t.Errorf("caddy-http not due at its next slot; claimed %v", slices.Collect(maps.Keys(got)))
	}
}
