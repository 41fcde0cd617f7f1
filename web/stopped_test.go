package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
)

// TestStoppedOnPurposeShowsAsStopped: a container its node stopped with
// onboot off is counted and coloured stopped, not unhealthy, and makes
// its host look no worse.
func TestStoppedOnPurposeShowsAsStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	runs, err := b.st.ClaimInventoryRuns(b.ctx, now, 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Host != "hubris" {
			continue
		}
		var cs []inventory.Container
		for _, vmid := range []int{110, 111, 112, 113, 114} {
			cs = append(cs, inventory.Container{VMID: vmid, Status: "running", Onboot: new(true)})
		}
		cs = append(cs, inventory.Container{VMID: 131, Status: "stopped"})
		if _, err := b.st.ApplyInventory(b.ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: now, Containers: cs, Horizon: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	body := b.get(t, "/", http.StatusOK)
	containsAll(t, "overview", body,
		`<span class="h-stopped">stopped</span><b>1</b>`,
		`<a class="tile b-stopped" href="/e/lxc:hubris/131" title="teddycloud: stopped">131</a>`)
	containsNone(t, "overview", body, `<span class="h-unhealthy">unhealthy</span><b>1</b>`)
	containsAll(t, "teddycloud", b.get(t, "/e/lxc:hubris/131", http.StatusOK), `<span class="badge b-stopped">stopped</span>`,
		"container 131 is stopped, and does not start on boot")
}

// TestEntityPageShowsListsAndObjectsAsJSON: a list or an object among a
// container's attributes (its snapshots, what backs it up) reads as JSON
// on its page, not as Go's own map[…] notation.
func TestEntityPageShowsListsAndObjectsAsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	runs, err := b.st.ClaimInventoryRuns(b.ctx, now, 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for _, r := range runs {
		if r.Host != "hubris" {
			continue
		}
		cs := []inventory.Container{{VMID: 131, Status: "stopped", Snapshots: []string{"before-upgrade"},
			Backup: &inventory.Backup{Jobs: []string{"backup-daily"}, Last: last}}}
		if _, err := b.st.ApplyInventory(b.ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: now, Containers: cs, Horizon: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	body := b.get(t, "/e/lxc:hubris/131", http.StatusOK)
	containsAll(t, "teddycloud", body,
		`<dt>snapshots</dt><dd>[&#34;before-upgrade&#34;]</dd>`,
		`<dt>backup</dt><dd>{&#34;jobs&#34;:[&#34;backup-daily&#34;],&#34;last&#34;:&#34;2026-12-01T02:00:00Z&#34;}</dd>`)
	containsNone(t, "teddycloud", body, "map[")
}
