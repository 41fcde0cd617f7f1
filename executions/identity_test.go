package executions_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
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
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := b.store.GetExecution(b.ctx, x.ID)
			if err == nil && got.State.Terminal() {
				if got.State != store.StateSucceeded {
					t.Fatalf("%s: %s (%s), want succeeded", x.TargetSlug, got.State, got.Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not finish", x.TargetSlug)
			}
			time.Sleep(50 * time.Millisecond)
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
