package store_test

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// TestInventoryKeepsTheNodesLiveFacts: every listed container, seeded or
// discovered, carries the node's live facts as attrs, with exactly the
// keys other parts read; a change of lock, hastate or protection is
// audited but not announced; a partial entry keeps what the
// configuration said; re-seeding keeps them; a template is no workload.
func TestInventoryKeepsTheNodesLiveFacts(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	cs := strong()
	cs[1] = inventory.Container{VMID: 101, Status: "running", Hostname: "jellyfin", Onboot: new(true), Lock: "backup",
		Tags: []string{"media", "home"}, HAState: "started", Protection: true, Addresses: []string{"10.40.0.101/24", "fc00::1/64"},
		Snapshots: []string{"nomos-20261201-101500", "nomos-20261202-093000"}, RootStorage: "local", StorageType: "dir",
		SnapshotBlocker: "raw volume on dir storage local; bind mount mp0 (/mnt/media)"}
	cs = append(cs, inventory.Container{VMID: 9001, Status: "stopped", Hostname: "debian-tpl", Template: true})
	ch := e.apply(t, e.run(t, "strong"), cs)
	if len(ch.New) != 0 {
		t.Errorf("a template was added to the fleet: %+v", ch.New)
	}
	if _, err := e.s.EntityBySlug(e.ctx, "lxc:9001"); err == nil {
		t.Error("lxc:9001, a template, is in the fleet")
	}
	live := func(slug string) map[string]any {
		t.Helper()
		got := entityID(t, e.s, slug).Attrs
		out := map[string]any{}
		for _, k := range []string{"onboot", "lock", "tags", "hastate", "template", "protection", "addresses", "snapshots", "root_storage", "storage_type", "snapshot_blocker"} {
			if v, ok := got[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	want := map[string]any{"onboot": true, "lock": "backup", "tags": []any{"media", "home"}, "hastate": "started", "template": false,
		"protection": true, "addresses": []any{"10.40.0.101/24", "fc00::1/64"}, "snapshots": []any{"nomos-20261201-101500", "nomos-20261202-093000"},
		"root_storage": "local", "storage_type": "dir", "snapshot_blocker": "raw volume on dir storage local; bind mount mp0 (/mnt/media)"}
	if d := gocmp.Diff(want, live("lxc:strong/101")); d != "" {
		t.Errorf("the seeded lxc:strong/101's live facts (-want +got):\n%s", d)
	}
	if got := entityID(t, e.s, "lxc:strong/101"); got.Name != "jellyfin" || got.Attrs["cores"] != 4.0 {
		t.Errorf("seeded facts of lxc:strong/101 changed: %s %v", got.Name, got.Attrs)
	}

	// The backup ends, HA lets go, protection is off: audited, not news.
	cs[1].Lock, cs[1].HAState, cs[1].Protection = "", "", false
	ch = e.apply(t, e.run(t, "strong"), cs)
	if ch.Announced() {
		t.Errorf("a lock, HA state and protection change was announced: %+v", ch)
	}
	if d := gocmp.Diff([]string{"discovery.changed 101"}, e.audit(t)); d != "" {
		t.Errorf("audit (-want +got):\n%s", d)
	}

	// The configuration does not answer: what it said stands.
	cs[1] = inventory.Container{VMID: 101, Status: "running", Hostname: "jellyfin", Partial: true, Snapshots: cs[1].Snapshots}
	e.apply(t, e.run(t, "strong"), cs)
	if got := live("lxc:strong/101"); got["onboot"] != true || got["storage_type"] != "dir" || got["addresses"] == nil {
		t.Errorf("a partial entry lost what the configuration said: %v", got)
	}

	// Re-seeding keeps the node's facts.
	seedAgain(t, e)
	if got := live("lxc:strong/101"); got["onboot"] != true || got["snapshot_blocker"] == "" {
		t.Errorf("re-seeding dropped the live facts: %v", got)
	}
}

// TestStoppedOnPurposePagesNobody: a container stopped with onboot off
// (or unset) is "stopped", not unhealthy, whatever its checks and its
// services' checks say, and their failures raise no signal; with onboot
// on, a stop is unhealthy and pages as before.
func TestStoppedOnPurposePagesNobody(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	hubris := func(onboot *bool) []inventory.Container {
		var out []inventory.Container
		for _, vmid := range []int{110, 112, 113, 114} {
			out = append(out, inventory.Container{VMID: vmid, Status: "running", Onboot: new(true)})
		}
		return append(out, inventory.Container{VMID: 111, Status: "stopped", Onboot: onboot})
	}
	e.apply(t, e.run(t, "hubris"), hubris(nil))
	checks := claimAll(t, e.s, e.now)
	fail := func() {
		t.Helper()
		e.now = e.now.Add(time.Second)
		c := checks["zigbee2mqtt-http"]
		if err := e.s.RecordCheck(e.ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: "unhealthy", Detail: "GET failed", At: e.now}); err != nil {
			t.Fatal(err)
		}
	}
	fail()
	if got := entityID(t, e.s, "lxc:hubris/111"); got.Health+": "+got.Detail != "stopped: container 111 is stopped, and does not start on boot" {
		t.Errorf("lxc:hubris/111 stopped with onboot unset is %s: %s", got.Health, got.Detail)
	}
	signals, err := e.s.ListSignals(e.ctx, store.SignalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(signals) != 0 {
		t.Errorf("a service of a container stopped on purpose raised %+v", signals)
	}

	off := false
	e.apply(t, e.run(t, "hubris"), hubris(&off))
	if got := entityID(t, e.s, "lxc:hubris/111"); got.Health != "stopped" {
		t.Errorf("lxc:hubris/111 stopped with onboot 0 is %s", got.Health)
	}

	e.apply(t, e.run(t, "hubris"), hubris(new(true)))
	fail()
	if got := entityID(t, e.s, "lxc:hubris/111"); got.Health != "unhealthy" {
		t.Errorf("lxc:hubris/111 stopped with onboot 1 is %s: %s, want unhealthy", got.Health, got.Detail)
	}
	signals, err = e.s.ListSignals(e.ctx, store.SignalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(signals) != 1 || signals[0].Kind != "check:zigbee2mqtt-http" {
		t.Errorf("a failing service of a container that should run raised %+v, want its check's signal", signals)
	}
}

// seedAgain applies the demo seeds once more.
func seedAgain(t *testing.T, e *discoveryEnv) {
	t.Helper()
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ApplySeed(e.ctx, seed); err != nil {
		t.Fatal(err)
	}
}
