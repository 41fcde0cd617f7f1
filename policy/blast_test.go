package policy

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// fleet is a small homelab: two hosts, four containers, services that
// depend on each other and a reverse proxy.
var fleet = []Edge{
	{"host:strong", "lxc:101", EdgeHosts},
	{"host:strong", "lxc:105", EdgeHosts},
	{"host:strong", "lxc:110", EdgeHosts},
	{"host:hubris", "lxc:131", EdgeHosts},
	{"lxc:101", "service:jellyfin", EdgeRuns},
	{"lxc:105", "service:postgres", EdgeRuns},
	{"lxc:110", "service:paperless", EdgeRuns},
	{"lxc:110", "service:redis", EdgeRuns},
	{"lxc:131", "service:caddy", EdgeRuns},
	{"service:paperless", "service:postgres", EdgeDependsOn},
	{"service:paperless", "service:redis", EdgeDependsOn},
	{"service:gitea", "service:postgres", EdgeDependsOn},
	{"service:caddy", "service:jellyfin", EdgeRoutesTo},
	{"service:caddy", "service:paperless", EdgeRoutesTo},
	{"service:jellyfin", "service:jellyfin", EdgeDependsOn}, // self-loop, ignored
	{"lxc:101", "storage:nas", "mounts"},                    // unknown type, ignored
}

var blastTests = []struct {
	target string
	want   []Affected
}{
	{"service:postgres", []Affected{
		{Slug: "service:gitea", Via: EdgeDependsOn, From: "service:postgres", Depth: 1},
		{Slug: "service:paperless", Via: EdgeDependsOn, From: "service:postgres", Depth: 1},
	}},
	{"lxc:105", []Affected{
		{Slug: "service:postgres", Via: EdgeRuns, From: "lxc:105", Depth: 1},
		{Slug: "service:gitea", Via: EdgeDependsOn, From: "service:postgres", Depth: 2},
		{Slug: "service:paperless", Via: EdgeDependsOn, From: "service:postgres", Depth: 2},
	}},
	{"host:strong", []Affected{
		{Slug: "lxc:101", Via: EdgeHosts, From: "host:strong", Depth: 1},
		{Slug: "lxc:105", Via: EdgeHosts, From: "host:strong", Depth: 1},
		{Slug: "lxc:110", Via: EdgeHosts, From: "host:strong", Depth: 1},
		{Slug: "service:jellyfin", Via: EdgeRuns, From: "lxc:101", Depth: 2},
		{Slug: "service:paperless", Via: EdgeRuns, From: "lxc:110", Depth: 2},
		{Slug: "service:postgres", Via: EdgeRuns, From: "lxc:105", Depth: 2},
		{Slug: "service:redis", Via: EdgeRuns, From: "lxc:110", Depth: 2},
		{Slug: "service:gitea", Via: EdgeDependsOn, From: "service:postgres", Depth: 3},
	}},
	{"host:hubris", []Affected{
		{Slug: "lxc:131", Via: EdgeHosts, From: "host:hubris", Depth: 1},
		{Slug: "service:caddy", Via: EdgeRuns, From: "lxc:131", Depth: 2},
		{Slug: "service:jellyfin", Via: EdgeRoutesTo, From: "service:caddy", Depth: 3},
		{Slug: "service:paperless", Via: EdgeRoutesTo, From: "service:caddy", Depth: 3},
	}},
	{"service:jellyfin", nil},
	{"service:unknown", nil},
}

func TestBlastRadius(t *testing.T) {
	t.Parallel()
	for _, tt := range blastTests {
		got := BlastRadius(fleet, tt.target)
		if d := diff(tt.want, got); d != "" {
			t.Errorf("BlastRadius(%s) %s", tt.target, d)
		}
	}
}

// TestPlanBlastRadius: creating a container on a host affects nothing
// that exists; acting on the host itself reaches all it hosts.
func TestPlanBlastRadius(t *testing.T) {
	t.Parallel()
	if got := PlanBlastRadius(ActionPctCreate, fleet, "host:strong"); len(got) != 0 {
		t.Errorf("pct_create on host:strong reaches %v, want nothing", got)
	}
	if got, want := PlanBlastRadius(ActionRun, fleet, "host:strong"), BlastRadius(fleet, "host:strong"); diff(want, got) != "" {
		t.Errorf("run on host:strong %s", diff(want, got))
	}
}

func TestBlastRadiusCycle(t *testing.T) {
	t.Parallel()
	edges := []Edge{
		{"service:a", "service:b", EdgeDependsOn},
		{"service:b", "service:c", EdgeDependsOn},
		{"service:c", "service:a", EdgeDependsOn},
		{"service:a", "service:b", EdgeDependsOn}, // duplicate
	}
	got := BlastRadius(edges, "service:a")
	want := []Affected{
		{Slug: "service:c", Via: EdgeDependsOn, From: "service:a", Depth: 1},
		{Slug: "service:b", Via: EdgeDependsOn, From: "service:c", Depth: 2},
	}
	if d := diff(want, got); d != "" {
		t.Errorf("BlastRadius on a cycle %s", d)
	}
}

func FuzzBlastRadius(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 0, 3}, uint8(0), uint64(1))
	f.Add([]byte{5, 5, 0, 1, 2, 3, 2, 1, 2}, uint8(2), uint64(7))
	slugs := []string{"host:strong", "lxc:101", "lxc:105", "service:a", "service:b", "service:c", "service:d", ""}
	types := []EdgeType{EdgeHosts, EdgeRuns, EdgeDependsOn, EdgeRoutesTo, "other"}
	f.Fuzz(func(t *testing.T, data []byte, target uint8, seed uint64) {
		var edges []Edge
		for i := 0; i+2 < len(data); i += 3 {
			edges = append(edges, Edge{
				From: slugs[int(data[i])%len(slugs)],
				To:   slugs[int(data[i+1])%len(slugs)],
				Type: types[int(data[i+2])%len(types)],
			})
		}
		tgt := slugs[int(target)%len(slugs)]
		got := BlastRadius(edges, tgt)
		seen := map[string]bool{}
		for i, a := range got {
			if a.Slug == tgt || seen[a.Slug] {
				t.Fatalf("BlastRadius(%v, %s) lists %s twice or includes the target: %v", edges, tgt, a.Slug, got)
			}
			seen[a.Slug] = true
			if a.Depth < 1 || (i > 0 && (got[i-1].Depth > a.Depth || (got[i-1].Depth == a.Depth && got[i-1].Slug >= a.Slug))) {
				t.Fatalf("BlastRadius not ordered by depth then slug: %v", got)
			}
			if a.Depth == 1 && a.From != tgt || a.Depth > 1 && !seen[a.From] {
				t.Fatalf("BlastRadius entry %+v reached from outside the radius", a)
			}
		}
		shuffled := slices.Clone(edges)
		rand.New(rand.NewPCG(seed, seed)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if d := diff(got, BlastRadius(shuffled, tgt)); d != "" {
			t.Fatalf("BlastRadius depends on edge order %s", d)
		}
	})
}
