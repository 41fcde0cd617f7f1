package store_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
)

func sortedSlugs(es []store.Entity) []string {
	return slices.Sorted(slices.Values(slugsOf(es)))
}

// TestVMsResolveLikeContainers: a VM is vm:<cluster>/<vmid>, found by its
// name, its slug, its short forms and its bare vmid; a bare vmid or a
// cluster/vmid that a container and a VM share in different clusters
// matches both, and a name that is a VM on one node and a container on
// another matches both, so the bot asks rather than guesses.
func TestVMsResolveLikeContainers(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	for ref, want := range map[string][]string{
		"homeassistant":  {"vm:hubris/200"},
		"vm:hubris/200":  {"vm:hubris/200"},
		"vm:200":         {"vm:hubris/200"},
		"hubris/200":     {"vm:hubris/200"},
		"200":            {"vm:hubris/200"},
		"OPNsense":       {"vm:hubris/201"},
		"lxc:200":        nil,
		"lxc:hubris/200": nil,
		"hubris/111":     {"lxc:hubris/111"},
	} {
		got, err := e.s.ResolveTargets(e.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want, sortedSlugs(got)) {
			t.Errorf("ResolveTargets(%q) = %v, want %v", ref, sortedSlugs(got), want)
		}
	}
	if got, _ := e.s.ResolveTargets(e.ctx, "homeassistant", "lxc"); len(got) != 0 {
		t.Errorf("homeassistant among containers only = %v, want nothing", sortedSlugs(got))
	}
	if got := entityID(t, e.s, "vm:hubris/200"); got.AttrString("host") != "hubris" || got.AttrInt("vmid") != 200 {
		t.Errorf("vm:hubris/200 attrs = %v", got.Attrs)
	}

	// A VM on strong named like hubris's container 111, and a VM with
	// vmid 111 there too.
	fsys := demoFS(t)
	fleet := string(fsys["fleet.yaml"].Data)
	fleet = strings.Replace(fleet, "    storage: local-lvm\n    containers:\n", "    storage: local-lvm\n    vms:\n      - { vmid: 111, name: mqtt }\n    containers:\n", 1)
	fsys["fleet.yaml"] = &fstest.MapFile{Data: []byte(fleet)}
	seed, err := fleetseed.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ApplySeed(e.ctx, seed); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"mqtt", "111"} {
		got, err := e.s.ResolveTargets(e.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"lxc:hubris/111", "vm:strong/111"}; !slices.Equal(want, sortedSlugs(got)) {
			t.Errorf("ResolveTargets(%q) = %v, want both %v", ref, sortedSlugs(got), want)
		}
	}
}

// TestSeedRefusesAVMOnAContainersVMID: containers and VMs share a
// cluster's vmids, as in Proxmox.
func TestSeedRefusesAVMOnAContainersVMID(t *testing.T) {
	t.Parallel()
	fsys := demoFS(t)
	fleet := string(fsys["fleet.yaml"].Data)
	fleet = strings.Replace(fleet, "      - vmid: 201\n", "      - vmid: 111\n", 1)
	fsys["fleet.yaml"] = &fstest.MapFile{Data: []byte(fleet)}
	_, err := fleetseed.Load(fsys)
	if err == nil || !strings.Contains(err.Error(), "vm 111: cluster hubris has it already") {
		t.Fatalf("fleetseed.Load = %v, want the shared vmid refused", err)
	}
}

// TestInventoryRecordsVMs: the host's VMs from its inventory get their
// run state and live facts (the guest agent, a lock); a VM the fleet did
// not know is added as discovered, and a VM template is kept out, as a
// template is no workload. An inventory without VMs changes none.
func TestInventoryRecordsVMs(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	r := e.run(t, "hubris")
	_, err := e.s.ApplyInventory(e.ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: e.now, Horizon: 3 * time.Minute,
		VMs: []inventory.VM{
			{VMID: 200, Status: "running", Name: "homeassistant", Agent: true},
			{VMID: 201, Status: "stopped", Name: "opnsense", Lock: "backup"},
			{VMID: 300, Status: "running", Name: "truenas"},
			{VMID: 9000, Status: "stopped", Name: "debian-tpl", Template: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	for slug, want := range map[string]string{"vm:hubris/200": "running", "vm:hubris/201": "stopped", "vm:hubris/300": "running"} {
		if got := entityID(t, e.s, slug); got.RunState != want {
			t.Errorf("%s run state = %q, want %q", slug, got.RunState, want)
		}
	}
	if got := entityID(t, e.s, "vm:hubris/201"); got.AttrString("lock") != "backup" {
		t.Errorf("vm:hubris/201 lock = %q, want backup", got.AttrString("lock"))
	}
	if got := entityID(t, e.s, "vm:hubris/300"); got.Name != "truenas" || got.AttrString("host") != "hubris" {
		t.Errorf("discovered VM = %s on %s", got.Name, got.AttrString("host"))
	}
	if _, err := e.s.EntityBySlug(e.ctx, "vm:hubris/9000"); err == nil {
		t.Error("a VM template became a workload entity")
	}
	if got := e.audit(t); !slices.Contains(got, "discovery.found 300") {
		t.Errorf("audit = %v, want the discovered VM recorded", got)
	}

	// The next inventory, from an actuator that lists no VMs, leaves them.
	e.apply(t, e.run(t, "hubris"), nil)
	if got := entityID(t, e.s, "vm:hubris/200"); got.Lifecycle != "active" {
		t.Errorf("vm:hubris/200 is %s after an inventory without VMs", got.Lifecycle)
	}
}

// TestInventoryMarksAVanishedVMGoneAndBack: when the node's VMs were
// listed, a VM of the host's that is missing, and that the cluster does
// not place on another node, is marked gone (never deleted) and
// announced; one the cluster has elsewhere is not; one that is listed
// again is back. Without the listing no VM is gone.
func TestInventoryMarksAVanishedVMGoneAndBack(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	apply := func(obs store.InventoryObservation) store.InventoryChanges {
		t.Helper()
		r := e.run(t, "hubris")
		obs.RunID, obs.HostID, obs.At, obs.Horizon = r.ID, r.HostID, e.now, 3*time.Minute
		ch, err := e.s.ApplyInventory(e.ctx, obs)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	free := int64(81000)
	ha := inventory.VM{VMID: 200, Status: "running", Name: "homeassistant", Agent: true, VMStateStorage: "local-lvm", VMStateFreeMB: &free}
	opn := inventory.VM{VMID: 201, Status: "running", Name: "opnsense"}

	apply(store.InventoryObservation{VMs: []inventory.VM{ha}})
	if got := entityID(t, e.s, "vm:hubris/200"); got.AttrInt("vmstate_free_mb") != 81000 {
		t.Errorf("vmstate_free_mb = %v, want 81000", got.Attrs["vmstate_free_mb"])
	}
	unknown := ha
	unknown.VMStateFreeMB = nil
	apply(store.InventoryObservation{VMs: []inventory.VM{unknown}})
	if got := entityID(t, e.s, "vm:hubris/200"); got.Attrs["vmstate_free_mb"] != nil {
		t.Errorf("an unknown free space left %v standing", got.Attrs["vmstate_free_mb"])
	}
	if got := entityID(t, e.s, "vm:hubris/201"); got.Lifecycle != "active" {
		t.Errorf("opnsense is %s after an inventory that did not say the VMs were listed", got.Lifecycle)
	}
	apply(store.InventoryObservation{VMs: []inventory.VM{ha}, VMsListed: true, Elsewhere: []int{201}})
	if got := entityID(t, e.s, "vm:hubris/201"); got.Lifecycle != "active" {
		t.Errorf("opnsense, which the cluster has on another node, is %s", got.Lifecycle)
	}
	ch := apply(store.InventoryObservation{VMs: []inventory.VM{ha}, VMsListed: true})
	if got := entityID(t, e.s, "vm:hubris/201"); got.Lifecycle != "destroyed" {
		t.Errorf("the vanished opnsense is %s, want destroyed (gone)", got.Lifecycle)
	}
	if !slices.Contains(ch.Gone, store.ContainerRef{VMID: 201, Name: "opnsense"}) || slices.Contains(ch.Gone, store.ContainerRef{VMID: 200, Name: "homeassistant"}) {
		t.Errorf("changes = %+v, want opnsense gone and announced", ch)
	}
	ch = apply(store.InventoryObservation{VMs: []inventory.VM{ha, opn}, VMsListed: true})
	if got := entityID(t, e.s, "vm:hubris/201"); got.Lifecycle != "active" {
		t.Errorf("opnsense, listed again, is %s", got.Lifecycle)
	}
	if !slices.Contains(ch.Back, store.ContainerRef{VMID: 201, Name: "opnsense"}) {
		t.Errorf("changes = %+v, want opnsense back", ch)
	}
	if got := e.audit(t); !slices.Contains(got, "discovery.gone 201") || !slices.Contains(got, "discovery.back 201") {
		t.Errorf("audit = %v, want opnsense gone and back", got)
	}
}
