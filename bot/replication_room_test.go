package bot_test

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
)

// TestDestroyOfAReplicatedContainerInTheRoom: Proxmox refuses to destroy
// a guest that a storage replication job replicates unless --purge,
// which removes its jobs with it (pve-container src/PVE/API2/LXC.pm
// destroy_vm: the early checks call ReplicationConfig
// check_for_existing_jobs without purge, and with it remove_vmid_jobs;
// qemu-server src/PVE/API2/Qemu.pm does the same for a VM; labsim's
// sample pct-destroy.replication-no-purge.stderr is the refusal). The
// inventory reads hubris's jobs through the gate, so "destroy teddycloud"
// plans pct destroy --purge, its card names the job and why, and once
// the phrase is typed CT 131 and its job are gone. A container without
// HA or a job is destroyed without --purge, which would also take it out
// of its backup jobs.
func TestDestroyOfAReplicatedContainerInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, withDiscovery(), withFleet(testenv.WithGate(hostgate.Rules{}), func(c *labsim.Config) {
		for i := range c.Hosts {
			for j := range c.Hosts[i].Containers {
				if ct := &c.Hosts[i].Containers[j]; c.Hosts[i].Name == "hubris" && ct.VMID == 131 {
					// labsim does not check that the target is a node of
					// the source's cluster; the refusal and the purge are
					// the source node's, whatever the target.
					ct.Replication = []labsim.Replication{{Target: "strong", Schedule: "*/30"}}
				}
			}
		}
	}))
	if got := b.fleet.Admin(t, "hubris", "pvesh get /nodes/hubris/replication --output-format json"); !strings.Contains(got, `"id":"131-0"`) {
		t.Fatalf("CT 131 has no replication job:\n%s", got)
	}
	b.discover(t)

	b.say(t, b.operator, "destroy 102", "")
	plain := b.waitFor(t, b.botSays("destroy", "lxc:strong/102", "pct destroy 102"))
	if body := plain.Content.AsMessage().Body; strings.Contains(body, "--purge") || strings.Contains(body, "🔁") {
		t.Errorf("a container without HA or replication is purged:\n%s", body)
	}

	b.say(t, b.operator, "destroy teddycloud", "")
	card := b.waitFor(t, b.botSays("destroy", "lxc:hubris/131", "pct destroy 131 --purge 1",
		"🔁 Storage replication job 131-0 replicates CT 131: Proxmox refuses to destroy it unless purged, so the destroy removes it from that job (--purge)"))
	b.waitFor(t, b.cardShows(card.ID, "Will change:", "Replication job 131-0 to strong (*/30)",
		"The destroy removes 1 replication job with it (--purge)"))
	p, err := b.execs.Describe(b.ctx, b.execFor(t, card.ID))
	if err != nil || p.Phrase == "" {
		t.Fatalf("no phrase for the destroy: %v", err)
	}
	b.say(t, b.operator, p.Phrase, "")
	b.waitFor(t, b.cardEdited(card.ID, "Status: ✅ succeeded"))

	if n := b.count(t, "pct destroy 131 --purge 1"); n != 1 {
		t.Errorf("pct destroy 131 --purge 1 ran %d times, want once", n)
	}
	if got := b.fleet.Admin(t, "hubris", "pct list"); strings.Contains(got, "131 ") {
		t.Errorf("CT 131 is still there:\n%s", got)
	}
	if got := b.fleet.Admin(t, "hubris", "pvesh get /cluster/replication --output-format json"); strings.Contains(got, "131-0") {
		t.Errorf("CT 131's replication job outlived it:\n%s", got)
	}
	refusedByGate(t, b)
}
