package store_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// demoFS copies the embedded demo seed into a map that a test may edit.
func demoFS(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	names, err := fs.Glob(seeds.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := fs.ReadFile(seeds.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = &fstest.MapFile{Data: data}
	}
	return out
}

func TestApplySeedIsIdempotent(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := testenv.Context(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.ApplySeed(ctx, seed)
	if err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if first.Entities == 0 || first.Relationships == 0 || first.Checks == 0 || first.Knowledge == 0 || first.Runbooks == 0 || first.Policy == 0 {
		t.Fatalf("first apply wrote too little: %+v", first)
	}
	before := snapshot(t, s)
	second, err := s.ApplySeed(ctx, seed)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if second.Total() != 0 {
		t.Errorf("second apply wrote %+v, want nothing", second)
	}
	if diff := cmp.Diff(before, snapshot(t, s)); diff != "" {
		t.Errorf("second apply changed rows (-before +after):\n%s", diff)
	}
}

func TestApplySeedUpdatesInPlace(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := testenv.Context(t)
	fsys := demoFS(t)
	seed, err := fleetseed.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	old, err := s.EntityBySlug(ctx, "lxc:strong/101")
	if err != nil {
		t.Fatal(err)
	}
	fleet := string(fsys["fleet.yaml"].Data)
	edited := strings.Replace(fleet, "memory_mb: 4096\n        disk_gb: 32", "memory_mb: 6144\n        disk_gb: 32", 1)
	if edited == fleet {
		t.Fatal("test setup: jellyfin's memory line not found in fleet.yaml")
	}
	fsys["fleet.yaml"] = &fstest.MapFile{Data: []byte(edited)}
	seed, err = fleetseed.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.ApplySeed(ctx, seed)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.SeedStats{Entities: 1}, st); diff != "" {
		t.Errorf("apply after edit (-want +got):\n%s", diff)
	}
	got, err := s.EntityBySlug(ctx, "lxc:strong/101")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != old.ID {
		t.Errorf("id changed from %s to %s, want it kept", old.ID, got.ID)
	}
	if got.Attrs["memory_mb"] != float64(6144) {
		t.Errorf("memory_mb = %v, want 6144", got.Attrs["memory_mb"])
	}
}

// TestApplySeedStoresTheFullUnit: a bare unit name in a seed is stored as
// the .service unit it means, as a plan would show it.
func TestApplySeedStoresTheFullUnit(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	ctx := testenv.Context(t)
	data := "hosts:\n  - name: a\n    containers:\n      - vmid: 100\n        hostname: x\n        ip: dhcp\n        services:\n" +
		"          - { name: web, unit: nginx }\n          - { name: cron, unit: cron.timer }\n          - { name: db }\n"
	seed, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: []byte(data)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	for slug, want := range map[string]string{"service:web": "nginx.service", "service:cron": "cron.timer", "service:db": "db.service"} {
		e, err := s.EntityBySlug(ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Attrs["unit"]; got != want {
			t.Errorf("%s unit = %v, want %s", slug, got, want)
		}
	}
}

// snapshot reads the seeded tables in a stable order for comparison.
func snapshot(t *testing.T, s *store.Store) []string {
	t.Helper()
	ctx := testenv.Context(t)
	var out []string
	for _, typ := range []string{"host", "lxc", "service", "check"} {
		es, err := s.ListEntities(ctx, typ)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			out = append(out, e.ID.String()+" "+e.Slug+" "+e.Name)
		}
	}
	rels, err := s.Relationships(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		out = append(out, r.From+" "+r.Type+" "+r.To)
	}
	return out
}
