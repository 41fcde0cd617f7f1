package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
)

// Proxmox keeps a vmid unique within a cluster only (pve-cluster's
// check_vmid_unused looks at the cluster's own vmlist), so two standalone
// nodes both count from 100. The demo's strong and hubris are standalone
// and both have a CT 100.

func slugsOf(es []store.Entity) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Slug)
	}
	return out
}

// TestResolveSharedVMID: a vmid two standalone nodes both use resolves to
// both containers, never to one of them; the cluster-qualified forms and
// the names resolve to one.
func TestResolveSharedVMID(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	for ref, want := range map[string][]string{
		"100":            {"lxc:hubris/100", "lxc:strong/100"},
		"lxc:100":        {"lxc:hubris/100", "lxc:strong/100"},
		"LXC:100":        {"lxc:hubris/100", "lxc:strong/100"},
		"lxc:strong/100": {"lxc:strong/100"},
		"strong/100":     {"lxc:strong/100"},
		"hubris/100":     {"lxc:hubris/100"},
		"unbound":        {"lxc:strong/100"},
		"lxc:101":        {"lxc:strong/101"},
		"101":            {"lxc:strong/101"},
		"lxc:hubris/101": nil,
		"lxc:999":        nil,
	} {
		got, err := e.s.ResolveTargets(e.ctx, ref, "lxc")
		if err != nil {
			t.Fatalf("resolve %q: %v", ref, err)
		}
		if d := gocmp.Diff(want, slugsOf(got)); d != "" {
			t.Errorf("resolve %q (-want +got):\n%s", ref, d)
		}
	}
}

// TestInventoryOfStandaloneNodesSharingAVMID: each node's CT 100 stays its
// own, run after run: no move between the hosts, no change announced, and
// each keeps its host's edge.
func TestInventoryOfStandaloneNodesSharingAVMID(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	hubris := []inventory.Container{{VMID: 100, Status: "running", Hostname: "syncthing"}}
	for _, vmid := range []int{110, 111, 112, 113, 114} {
		hubris = append(hubris, inventory.Container{VMID: vmid, Status: "running"})
	}
	hubris = append(hubris, inventory.Container{VMID: 131, Status: "stopped"})
	for pass := range 3 {
		for host, cs := range map[string][]inventory.Container{"strong": strong(), "hubris": hubris} {
			ch := e.apply(t, e.run(t, host), cs)
			if ch.Announced() || len(ch.Skipped) > 0 {
				t.Errorf("pass %d, %s: %+v; want nothing new, back, changed, gone or skipped", pass, host, ch)
			}
		}
	}
	edges := map[string]string{}
	rels, err := e.s.Relationships(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		if r.Type == "hosts" && strings.HasSuffix(r.To, "/100") {
			edges[r.To] += r.From
		}
	}
	if d := gocmp.Diff(map[string]string{"lxc:strong/100": "host:strong", "lxc:hubris/100": "host:hubris"}, edges); d != "" {
		t.Errorf("hosts edges of the two CT 100s (-want +got):\n%s", d)
	}
	for _, slug := range []string{"lxc:strong/100", "lxc:hubris/100"} {
		if got := entityID(t, e.s, slug); got.Lifecycle != "active" || got.RunState != "running" {
			t.Errorf("%s is %s, %q; want active and running", slug, got.Lifecycle, got.RunState)
		}
	}
}

// clusterSeed is a cluster of two nodes, pve1 and pve2, and a standalone
// node that reuses a vmid of the cluster's.
const clusterSeed = `hosts:
  - name: pve1
    cluster: lab
    containers:
      - { vmid: 101, hostname: web, ip: dhcp }
  - name: pve2
    cluster: lab
    containers:
      - { vmid: 102, hostname: db, ip: dhcp }
  - name: solo
    containers:
      - { vmid: 101, hostname: other, ip: dhcp }
`

// clusterSetup is the demo fleet with clusterSeed's hosts added.
func clusterSetup(t *testing.T) *discoveryEnv {
	t.Helper()
	e := discoverySetup(t)
	seed, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: []byte(clusterSeed)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ApplySeed(e.ctx, seed); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestInventoryMoveWithinACluster: a discovered container that migrates
// to another node of its cluster keeps its slug and moves; the standalone
// node's CT of the same vmid is untouched.
func TestInventoryMoveWithinACluster(t *testing.T) {
	t.Parallel()
	e := clusterSetup(t)
	e.apply(t, e.run(t, "pve1"), []inventory.Container{
		{VMID: 101, Status: "running", Hostname: "web"}, {VMID: 150, Status: "running", Hostname: "scratch"}}, 102)
	if got := entityID(t, e.s, "lxc:lab/150"); got.Attrs["host"] != "pve1" {
		t.Fatalf("lxc:lab/150 is on %v, want pve1", got.Attrs["host"])
	}
	// Migrated to pve2: pve1 lists it elsewhere, pve2 lists it.
	if ch := e.apply(t, e.run(t, "pve1"), []inventory.Container{{VMID: 101, Status: "running", Hostname: "web"}}, 102, 150); len(ch.Gone) > 0 {
		t.Errorf("pve1 after the migration: %+v; want nothing gone", ch)
	}
	ch := e.apply(t, e.run(t, "pve2"), []inventory.Container{
		{VMID: 102, Status: "running", Hostname: "db"}, {VMID: 150, Status: "running", Hostname: "scratch"}}, 101)
	if len(ch.New) > 0 || len(ch.Changed) != 1 || ch.Changed[0].VMID != 150 || !slices.Contains(ch.Changed[0].Keys, "host") {
		t.Errorf("pve2 after the migration: %+v; want lxc:lab/150 changed host, nothing new", ch)
	}
	if got := entityID(t, e.s, "lxc:lab/150"); got.Attrs["host"] != "pve2" {
		t.Errorf("lxc:lab/150 is on %v after the migration, want pve2", got.Attrs["host"])
	}
	if got := entityID(t, e.s, "lxc:solo/101"); got.Name != "other" || got.Lifecycle != "active" {
		t.Errorf("solo's CT 101 is %s, %s; want other, active", got.Name, got.Lifecycle)
	}
}

// TestSeedShortFormMustBeUnique: a seed may name a container lxc:N where N
// is unique in it; where two clusters share N, it must say which.
func TestSeedShortFormMustBeUnique(t *testing.T) {
	t.Parallel()
	checks := `checks:
  - { slug: web-status, target: lxc:102, kind: pct_status }
  - { slug: shared-status, target: lxc:101, kind: pct_status }
  - { slug: qualified-status, target: lxc:solo/101, kind: pct_status }
`
	_, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: []byte(clusterSeed)}, "checks.yaml": {Data: []byte(checks)}})
	var se *fleetseed.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "check target lxc:101: the vmid is on more than one cluster; write one of lxc:lab/101, lxc:solo/101") {
		t.Fatalf("fleetseed.Load = %v; want the ambiguous lxc:101 refused, naming both", err)
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("fleetseed.Load = %v; want only lxc:101 refused", err)
	}
	dup := strings.Replace(clusterSeed, "vmid: 102, hostname: db", "vmid: 101, hostname: db", 1)
	if _, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: []byte(dup)}}); err == nil || !strings.Contains(err.Error(), "cluster lab has it already") {
		t.Errorf("fleetseed.Load of a vmid twice in one cluster = %v; want it refused", err)
	}
	s := testenv.Store(t)
	seed, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: []byte(clusterSeed)}, "checks.yaml": {Data: []byte(checks[:strings.Index(checks, "  - { slug: shared")])}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplySeed(testenv.Context(t), seed); err != nil {
		t.Fatal(err)
	}
	if seed.Checks[0].Target != "lxc:lab/102" {
		t.Errorf("the short form was kept as %s, want lxc:lab/102", seed.Checks[0].Target)
	}
}

// TestReseedWithACluster: naming the cluster of a host that was
// standalone renames its containers and keeps their ids.
func TestReseedWithACluster(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	before := entityID(t, e.s, "lxc:strong/101")
	fsys := demoFS(t)
	fleet := string(fsys["fleet.yaml"].Data)
	edited := strings.Replace(fleet, "  - name: strong\n", "  - name: strong\n    cluster: lab\n", 1)
	edited = strings.Replace(edited, "  - name: hubris\n", "  - name: hubris\n    cluster: lab\n", 1)
	edited = strings.Replace(edited, "      - vmid: 100\n        hostname: syncthing", "      - vmid: 120\n        hostname: syncthing", 1)
	fsys["fleet.yaml"] = &fstest.MapFile{Data: []byte(edited)}
	seed, err := fleetseed.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ApplySeed(e.ctx, seed); err != nil {
		t.Fatal(err)
	}
	after := entityID(t, e.s, "lxc:lab/101")
	if after.ID != before.ID {
		t.Errorf("lxc:lab/101 has id %s, want lxc:strong/101's %s kept", after.ID, before.ID)
	}
	if _, err := e.s.EntityBySlug(e.ctx, "lxc:strong/101"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lxc:strong/101 is still there: %v", err)
	}
}

// TestClusterMismatch: an inventory whose cluster listing disagrees with
// the fleet's clusters is named, so it is not applied: two standalone
// nodes named as one cluster would share vmids, and a cluster's nodes
// named standalone would see their guests appear and vanish as they
// migrate (the node list is /cluster/resources' node entries).
func TestClusterMismatch(t *testing.T) {
	t.Parallel()
	e := clusterSetup(t)
	id := func(host string) uuid.UUID { return entityID(t, e.s, "host:"+host).ID }
	for _, tc := range []struct {
		host  string
		nodes []string
		want  string
	}{
		{"pve1", []string{"pve1", "pve2"}, ""},
		{"pve2", []string{"pve2", "pve1"}, ""},
		{"solo", []string{"solo"}, ""},
		{"strong", []string{"strong"}, ""},
		{"pve1", nil, ""},
		{"pve1", []string{"pve1"}, "the fleet puts host pve2 (node pve2) in cluster lab with pve1, but pve1's Proxmox cluster lists only pve1"},
		{"solo", []string{"solo", "pve1"}, "solo's Proxmox cluster has node pve1, which the fleet has as host pve1 in cluster lab"},
		{"strong", []string{"strong", "hubris"}, "strong's Proxmox cluster has node hubris, which the fleet has as host hubris in cluster hubris"},
	} {
		got, err := e.s.ClusterMismatch(e.ctx, id(tc.host), tc.nodes)
		if err != nil {
			t.Fatal(err)
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("ClusterMismatch(%s, %v) = %q; want %q", tc.host, tc.nodes, got, tc.want)
		}
	}
}
