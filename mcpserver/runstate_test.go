package mcpserver_test

import (
	"testing"
	"time"

	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
)

// TestListLXCsShowsRunState: once an inventory has seen the containers,
// list_lxcs counts their run states and marks the ones not running.
func TestListLXCsShowsRunState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	runs, err := b.store.ClaimInventoryRuns(b.ctx, now, 5*time.Minute, 10)
	if err != nil || len(runs) != 2 {
		t.Fatalf("claim inventory runs = %+v, %v", runs, err)
	}
	apply := func(runs []store.InventoryRun, at time.Time, onboot *bool) {
		for _, r := range runs {
			var cs []inventory.Container
			for _, h := range b.seed.Hosts {
				if h.Name != r.Host {
					continue
				}
				for _, c := range h.Containers {
					cs = append(cs, inventory.Container{VMID: c.VMID, Status: c.Status, Hostname: c.Hostname, Onboot: onboot})
				}
			}
			if _, err := b.store.ApplyInventory(b.ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: at, Containers: cs, Horizon: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(runs, now, new(true))
	text := b.ok(t, "list_lxcs", nil)
	containsAll(t, "list_lxcs", text,
		"15 containers on 2 hosts (hubris 7, strong 8): 1 unhealthy, 14 healthy; 14 running, 1 stopped.",
		"131 teddycloud hubris 10.40.0.131/24 unhealthy teddycloud [stopped] — container 131 is stopped")
	containsNone(t, "list_lxcs", text, "[running]")

	// With onboot off, teddycloud is stopped on purpose: no attention.
	later := now.Add(10 * time.Minute)
	runs, err = b.store.ClaimInventoryRuns(b.ctx, later, 5*time.Minute, 10)
	if err != nil || len(runs) != 2 {
		t.Fatalf("claim inventory runs = %+v, %v", runs, err)
	}
	apply(runs, later, nil)
	containsAll(t, "list_lxcs", b.ok(t, "list_lxcs", nil), "14 healthy, 1 stopped; 14 running, 1 stopped.")
	containsNone(t, "list_lxcs health=attention", b.ok(t, "list_lxcs", map[string]any{"health": "attention"}), "teddycloud")
}
