package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// seeded opens a store on a fresh database with the demo fleet.
func seeded(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	ctx := testenv.Context(t)
	s := testenv.Store(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

func entityID(t *testing.T, s *store.Store, slug string) store.Entity {
	t.Helper()
	e, err := s.EntityBySlug(testenv.Context(t), slug)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestHealthCountsAndContainers(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	jf := entityID(t, s, "service:jellyfin")
	if err := s.RecordCheck(ctx, store.CheckObservation{TargetID: jf.ID.String(), Health: "unhealthy", Detail: "down"}); err != nil {
		t.Fatal(err)
	}
	probe := entityID(t, s, "check:jellyfin-http")
	if err := s.RecordCheck(ctx, store.CheckObservation{TargetID: probe.ID.String(), Health: "healthy"}); err != nil {
		t.Fatal(err)
	}
	counts, err := s.HealthCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.HealthCount{
		{Type: "host", Health: "unknown", Count: 2},
		{Type: "lxc", Health: "unknown", Count: 15},
		{Type: "service", Health: "unhealthy", Count: 1},
		{Type: "service", Health: "unknown", Count: 20},
		{Type: "vm", Health: "unknown", Count: 2},
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("HealthCounts (-want +got):\n%s", diff)
	}
	cs, err := s.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// By vmid, then slug: both standalone nodes have a CT 100.
	if len(cs) != 15 || cs[0].Slug != "lxc:hubris/100" || cs[1].Slug != "lxc:strong/100" || cs[14].Slug != "lxc:hubris/131" {
		t.Fatalf("ListContainers = %d containers from %s, %s, want 15 by vmid", len(cs), cs[0].Slug, cs[1].Slug)
	}
	cs = cs[2:]
	want101 := []store.ServiceState{{Name: "jellyfin", Health: "unhealthy"}}
	if diff := cmp.Diff(want101, cs[0].Services); diff != "" {
		t.Errorf("services of lxc:strong/101 (-want +got):\n%s", diff)
	}
	i := slices.IndexFunc(cs, func(c store.Container) bool { return c.Slug == "lxc:hubris/113" })
	if got := len(cs[i].Services); got != 3 {
		t.Errorf("lxc:hubris/113 runs %d services, want 3", got)
	}
}

func TestMetricQueries(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	strong := entityID(t, s, "host:strong")
	probe := entityID(t, s, "check:strong-disk")
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i, v := range []float64{50, 52, 54, 56} {
		if err := s.RecordCheck(ctx, store.CheckObservation{TargetID: strong.ID.String(), Health: "healthy", At: base.Add(time.Duration(i) * 15 * time.Minute), Metrics: map[string]float64{"disk_used_pct": v}}); err != nil {
			t.Fatal(err)
		}
	}
	// Samples on a probe's own entity are never reported.
	if err := s.RecordCheck(ctx, store.CheckObservation{TargetID: probe.ID.String(), Health: "healthy", At: base, Metrics: map[string]float64{"disk_used_pct": 99}}); err != nil {
		t.Fatal(err)
	}
	aggs, err := s.AggregateMetrics(ctx, store.MetricQuery{Metric: "disk_used_pct", Since: base})
	if err != nil {
		t.Fatal(err)
	}
	if len(aggs) != 1 || aggs[0].Slug != "host:strong" || aggs[0].Latest != 56 || aggs[0].Avg != 53 || aggs[0].Min != 50 || aggs[0].Max != 56 || aggs[0].Count != 4 {
		t.Errorf("AggregateMetrics = %+v; want one row for host:strong, latest 56, avg 53, 50..56, n=4", aggs)
	}
	latest, err := s.LatestSamples(ctx, "disk_used_pct")
	if err != nil || len(latest) != 1 || latest[0].Value != 56 {
		t.Errorf("LatestSamples = %+v, %v; want host:strong at 56", latest, err)
	}
	trend, err := s.MetricTrend(ctx, strong.ID, "disk_used_pct", base, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.MetricBucket{
		{Start: base, Avg: 51, Min: 50, Max: 52, Count: 2},
		{Start: base.Add(30 * time.Minute), Avg: 55, Min: 54, Max: 56, Count: 2},
	}
	if diff := cmp.Diff(want, trend, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("MetricTrend (-want +got):\n%s", diff)
	}
	names, err := s.MetricNames(ctx, base)
	if err != nil || len(names) != 1 || names[0].Name != "disk_used_pct" || names[0].Entities != 1 || names[0].Samples != 4 {
		t.Errorf("MetricNames = %+v, %v", names, err)
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	e := entityID(t, s, "lxc:hubris/131")
	at := time.Now().Add(-time.Hour)
	first, raised, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: "drift", Severity: "warning", Summary: "unclaimed", At: at})
	if err != nil || !raised || first.EntitySlug != "lxc:hubris/131" || !first.Open() {
		t.Fatalf("RaiseSignal = %+v, %v, %v", first, raised, err)
	}
	again, raised, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: "drift", Severity: "critical", Summary: "again"})
	if err != nil || raised || again.ID != first.ID {
		t.Fatalf("raising an open signal again = %+v, %v, %v; want the first one, not raised", again, raised, err)
	}
	if err := s.ResolveSignal(ctx, e.ID, "drift", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResolveSignal(ctx, e.ID, "drift", time.Time{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resolving a closed signal: %v, want ErrNotFound", err)
	}
	open, err := s.ListSignals(ctx, store.SignalFilter{})
	if err != nil || len(open) != 0 {
		t.Errorf("open signals after resolving = %+v, %v", open, err)
	}
	recent, err := s.ListSignals(ctx, store.SignalFilter{EntityID: &e.ID, Since: at.Add(-time.Minute)})
	if err != nil || len(recent) != 1 || recent[0].State != "resolved" || recent[0].ResolvedAt == nil {
		t.Errorf("recent signals = %+v, %v; want the resolved one", recent, err)
	}
	if _, raised, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: e.ID, Kind: "drift", Severity: "warning", Summary: "back"}); err != nil || !raised {
		t.Errorf("raising after a resolve = %v, %v; want a new signal", raised, err)
	}
}

func TestKnowledgeSearch(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	hits, err := s.SearchKnowledge(ctx, "dns resolver", 5)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(hits, func(h store.KnowledgeHit) bool { return h.Slug == "static-ip-dead-resolver" })
	if i < 0 || hits[i].Loose || hits[i].Snippet == "" || !slices.Contains(hits[i].Entities, "service:adguard") {
		t.Fatalf("SearchKnowledge(dns resolver) = %+v; want static-ip-dead-resolver with a snippet and its entities", hits)
	}
	loose, err := s.SearchKnowledge(ctx, "snapshot rollback kubernetes", 5)
	if err != nil || len(loose) == 0 || !loose[0].Loose || loose[0].Slug != "snapshots-before-change" {
		t.Errorf("a query no document fully matches = %+v, %v; want snapshots-before-change, marked loose", loose, err)
	}
	for _, q := range []string{"", "   ", "the and of", "!!!"} {
		if got, err := s.SearchKnowledge(ctx, q, 5); err != nil || len(got) != 0 {
			t.Errorf("SearchKnowledge(%q) = %+v, %v; want nothing, no error", q, got, err)
		}
	}

	docs, err := s.KnowledgeForEntity(ctx, "service:postgres", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 || docs[0].Slug != "postgres-shared-database" || docs[0].Hops != 0 || docs[0].Relation != "self" {
		t.Fatalf("KnowledgeForEntity(service:postgres) = %+v; want postgres-shared-database first, linked directly", docs)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Slug] {
			t.Errorf("document %s is listed twice", d.Slug)
		}
		seen[d.Slug] = true
	}
	if !seen["authentik-sso"] || !seen["immich-ml-memory"] || seen["jellyfin-transcoding"] {
		t.Errorf("one hop from service:postgres = %v; want authentik-sso and immich-ml-memory, not jellyfin-transcoding", seen)
	}
	if _, err := s.KnowledgeForEntity(ctx, "service:plex", 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("KnowledgeForEntity of an unknown slug: %v, want ErrNotFound", err)
	}
}
