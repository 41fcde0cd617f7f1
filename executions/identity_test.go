package executions_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestSharedVMIDActsOnTheRightNode: the demo's strong and hubris are
// standalone nodes that both have a CT 100 (Proxmox keeps vmids unique per
// cluster only: pve-cluster's check_vmid_unused reads the cluster's own
// vmlist). A restart of the service in each runs on its own node, as
// labsim's command log shows, and an action on the bare lxc:100 is
// refused with both candidates, never guessed.
func TestSharedVMIDActsOnTheRightNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fleet := testenv.NewFleet(t)
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)

	for _, ref := range []string{"lxc:100", "100"} {
		_, err := b.svc.Request(b.ctx, executions.Request{Action: "pct_reboot", Target: ref, RequestedBy: operator, Via: "chat", RoomID: "!ops:test"})
		var amb *executions.AmbiguousTargetError
		if !errors.As(err, &amb) || !slices.Equal(amb.Candidates, []string{"lxc:hubris/100", "lxc:strong/100"}) {
			t.Errorf("pct_reboot on %s = %v; want it refused as ambiguous between lxc:hubris/100 and lxc:strong/100", ref, err)
		}
	}

	var ids []store.Execution
	for _, svc := range []string{"unbound", "syncthing"} {
		x := b.request(t, "restart", svc, "").Execution
		if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: x.ID, By: operator, Method: policy.MethodReaction}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x)
	}
	for _, x := range ids {
		if got := b.waitDone(t, x.ID); got.State != store.StateSucceeded {
			t.Fatalf("%s: %s (%s), want succeeded", x.TargetSlug, got.State, got.Error)
		}
	}
	entries, err := labsim.ReadLog(fleet.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]string{}
	for _, e := range entries {
		switch e.Command {
		case "pct exec 100 -- systemctl restart unbound.service", "pct exec 100 -- systemctl restart syncthing.service":
			ran[e.Command] += e.Host
		}
	}
	want := map[string]string{
		"pct exec 100 -- systemctl restart unbound.service":   "strong",
		"pct exec 100 -- systemctl restart syncthing.service": "hubris",
	}
	for cmd, host := range want {
		if ran[cmd] != host {
			t.Errorf("%q ran on %q, want once on %s", cmd, ran[cmd], host)
		}
	}
}

// TestInventoryOfAClusterTheFleetCallsStandalone: strong's Proxmox cluster
// lists hubris as one of its nodes, but the fleet has the two standalone.
// The inventory is not applied (its containers would be read as vanishing
// and appearing as they migrate); the run records why, and the fleet is
// as it was.
func TestInventoryOfAClusterTheFleetCallsStandalone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs, err := b.store.RequestInventory(b.ctx, "@operator:localhost")
	if err != nil || len(runs) != 2 {
		t.Fatalf("request inventory = %+v, %v", runs, err)
	}
	if rep, err := b.svc.DiscoverDue(b.ctx); err != nil || rep.Sent != 2 {
		t.Fatalf("discovery pass = %+v, %v", rep, err)
	}
	strong := runs[1]
	before, edges := b.fleetFacts(t)
	payload, err := tasks.SignInventoryResult(b.reportKey, tasks.InventoryResult{RunID: strong.ID.String(), HostID: strong.HostID.String(),
		Actuator: tasks.DefaultActuator, Node: "strong", Nodes: []string{"hubris", "strong"},
		Containers: []tasks.InventoryContainer{{VMID: 101, Status: "running"}}, Elsewhere: []int{110}, At: b.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	b.apply(t, tasks.TypeInventoryResult, payload)
	got, err := b.store.InventoryRun(b.ctx, strong.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AppliedAt == nil || got.Changes != nil || !strings.Contains(got.Error, "strong's Proxmox cluster has node hubris, which the fleet has as host hubris in cluster hubris") {
		t.Errorf("the run = applied %v, changes %+v, error %q; want it failed with the clusters named", got.AppliedAt, got.Changes, got.Error)
	}
	after, edgesAfter := b.fleetFacts(t)
	if d := gocmp.Diff(before, after); d != "" || !slices.Equal(edges, edgesAfter) {
		t.Errorf("the fleet changed (-before +after):\n%s", d)
	}
}
