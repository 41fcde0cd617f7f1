package labsim

import (
	"testing"
	"time"
)

// replicationFleet is pve1 and pve2 of cluster lab: CT 101 on pve1
// replicates to pve2 on the default schedule, last synced 2026-12-01
// 10:15:02 UTC, and has a snapshot; stopped CT 105's job is disabled and
// has never run.
func replicationFleet(syncing bool) []Host {
	return []Host{
		{Name: "pve1", Cluster: "lab", Containers: []Container{
			{VMID: 101, Hostname: "jellyfin", IP: "192.168.1.21/24", Gateway: "192.168.1.1",
				Replication: []Replication{{Target: "pve2", LastSync: time.Date(2026, 12, 1, 10, 15, 2, 0, time.UTC), Syncing: syncing}}},
			{VMID: 105, Hostname: "paperless", IP: "192.168.1.25/24", Gateway: "192.168.1.1", Status: "stopped",
				Replication: []Replication{{Target: "pve2", Schedule: "*/30", Disabled: true}}},
		}},
		{Name: "pve2", Cluster: "lab"},
	}
}

func init() {
	addSampleCases(
		sampleCase{sample: "pvesh-nodes-replication.source-derived.json", hosts: replicationFleet(false), cmd: "pvesh get /nodes/pve1/replication --output-format json"},
		// destroy_vm's early checks refuse a container with a job unless
		// --purge (pve-container src/PVE/API2/LXC.pm).
		sampleCase{sample: "pct-destroy.replication-no-purge.stderr", hosts: replicationFleet(false), cmd: "pct destroy 105", exit: 255},
		// The sample is delsnapshot's message (src/PVE/API2/LXC/Snapshot.pm
		// delsnapshot waits 10 s for the guest migration lock that a
		// running pvesr sync holds); pct snapshot takes no such lock.
		sampleCase{sample: "pct-snapshot.replication-running.stderr", hosts: replicationFleet(true), setup: []string{"pct snapshot 101 before"},
			cmd: "pct delsnapshot 101 before", exit: 255},
	)
}

// TestReplicationJobs: /cluster/replication lists every job's
// configuration (pve-manager PVE/API2/ReplicationConfig.pm index), the
// node's status lists only its own guests' jobs, and pct destroy --purge
// removes a container's jobs with it (destroy_vm:
// PVE::ReplicationConfig::remove_vmid_jobs).
func TestReplicationJobs(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, replicationFleet(false))
	diff(t, "cluster config",
		`[{"guest":101,"id":"101-0","jobnum":0,"source":"pve1","target":"pve2","type":"local"},`+
			`{"disable":1,"guest":105,"id":"105-0","jobnum":0,"schedule":"*/30","source":"pve1","target":"pve2","type":"local"}]`+"\n",
		b.must(t, "pve2", "pvesh get /cluster/replication --output-format json"))
	diff(t, "pve2's own jobs", "[]\n", b.must(t, "pve2", "pvesh get /nodes/pve2/replication --output-format json"))
	diff(t, "a node outside the cluster", 255, b.run(t, "pve1", "pvesh get /nodes/elsewhere/replication --output-format json").Exit)
	diff(t, "text", 255, b.run(t, "pve1", "pvesh get /nodes/pve1/replication").Exit)

	out := b.must(t, "pve1", "pct destroy 105 --purge 1")
	contains(t, "destroy --purge", out, "purging CT 105 from related configurations..\n")
	diff(t, "after the purge",
		`[{"guest":101,"id":"101-0","jobnum":0,"source":"pve1","target":"pve2","type":"local"}]`+"\n",
		b.must(t, "pve1", "pvesh get /cluster/replication --output-format json"))
	b.must(t, "pve1", "pct snapshot 101 before")
	b.must(t, "pve1", "pct delsnapshot 101 before") // no sync runs
}
