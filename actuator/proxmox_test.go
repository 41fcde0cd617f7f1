package actuator

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// withProxmoxFleet restarts labsim with containers Proxmox is less kind
// to: 105 under HA, 104 on ZFS, 106 with a bind mount, 107 under HA,
// which HA starts on pve2; HA acts haDelay after a request. Put it before options that depend on labsim's address.
func withProxmoxFleet(haDelay time.Duration) option {
	return func(t *testing.T, b *bundle) {
		if err := b.sim.Close(); err != nil {
			t.Fatal(err)
		}
		b.simCfg.HADelay = haDelay
		b.simCfg.Hosts[0].Containers = append(b.simCfg.Hosts[0].Containers,
			labsim.Container{VMID: 104, Hostname: "db", IP: "10.0.0.24/24", Gateway: "10.0.0.1", Status: "running", Storage: "local-zfs"},
			labsim.Container{VMID: 105, Hostname: "media", IP: "10.0.0.25/24", Gateway: "10.0.0.1", Status: "running", HA: "started"},
			labsim.Container{VMID: 106, Hostname: "files", IP: "10.0.0.26/24", Gateway: "10.0.0.1", Status: "running",
				BindMounts: []labsim.BindMount{{Source: "/mnt/media", Path: "/media"}}},
			labsim.Container{VMID: 107, Hostname: "roamer", IP: "10.0.0.27/24", Gateway: "10.0.0.1", Status: "stopped", HA: "stopped", HANode: "pve2"},
		)
		// One cluster: HA starts a guest only on a node of its own.
		b.simCfg.Hosts[0].Cluster = "lab"
		b.simCfg.Hosts = append(b.simCfg.Hosts, labsim.Host{Name: "pve2", Cluster: "lab"})
		b.startSim(t)
	}
}

func fastPolls(c *Config) { c.PollInterval = 50 * time.Millisecond }

// TestHAStopSucceedsOnlyOnceStopped: pct shutdown of an HA-managed
// container prints "Requesting HA stop for CT 105" and exits 0 at once;
// the step succeeds only once pct status says stopped.
func TestHAStopSucceedsOnlyOnceStopped(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(700*time.Millisecond), withConfig(fastPolls))
	res := b.run(t, b.order(t, "x-ha-stop", policy.PctStopParams{}, b.lxc(105, "media")))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	diff(t, "state once the step succeeded", "status: stopped\n", b.ssh(t, "pct status 105"))
	contains(t, "output", res.Output, "Requesting HA stop for CT 105", "waiting up to 3m0s for it to be stopped")
	contains(t, "phase note", res.Phases[len(res.Phases)-1].Note, "HA had CT 105 stopped after")
	cmds := commandLines(b.commands(t))
	diff(t, "first the lock, then the shutdown", []string{"pct config 105 --current 1", "pct shutdown 105 --timeout 60 --forceStop 1"}, cmds[:2])
	if n := strings.Count(strings.Join(cmds, "\n"), "pct status 105"); n < 2 {
		t.Errorf("want the state polled until it changed (pct status more than once), got %q", cmds)
	}

	start := b.run(t, b.order(t, "x-ha-start", policy.PctStartParams{}, b.lxc(105, "media")))
	diff(t, "start status", tasks.StatusSucceeded, start.Status)
	diff(t, "state once started", "status: running\n", b.ssh(t, "pct status 105"))
}

// TestHAStartOnAnotherNode: HA may start the container on another node;
// the step follows it there through the cluster's listing.
func TestHAStartOnAnotherNode(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(300*time.Millisecond), withConfig(fastPolls))
	res := b.run(t, b.order(t, "x-ha-roam", policy.PctStartParams{}, b.lxc(107, "roamer")))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	contains(t, "notes", strings.Join(res.Notes, "\n"), "Proxmox HA started CT 107 on node pve2, not on pve1.")
	contains(t, "commands", strings.Join(commandLines(b.commands(t)), "\n"), "pvesh get /cluster/resources --type vm --output-format json")
}

// TestHAStopPastTheWaitFailsWithTheStateSeen: when HA has not done what
// the step asked within HAWait, the step fails with the state it saw,
// never succeeded.
func TestHAStopPastTheWaitFailsWithTheStateSeen(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(time.Hour), withConfig(fastPolls), withConfig(func(c *Config) { c.HAWait = 400 * time.Millisecond }))
	res := b.run(t, b.order(t, "x-ha-slow", policy.PctStopParams{}, b.lxc(105, "media")))
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "pct_stop", res.FailedPhase)
	contains(t, "error", res.Error, "Proxmox HA took the request, but after 400ms CT 105 is running on node pve1, HA state started, not stopped")
}

// TestDestroyOfAnHAContainerPurges: pct destroy without --purge is refused
// for an HA resource; with it, the resource goes too.
func TestDestroyOfAnHAContainerPurges(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(200*time.Millisecond), withConfig(fastPolls))
	diff(t, "stop", tasks.StatusSucceeded, b.run(t, b.order(t, "x-stop", policy.PctStopParams{}, b.lxc(105, "media"))).Status)

	refused := b.run(t, b.order(t, "x-destroy", policy.PctDestroyParams{}, b.lxc(105, "media")))
	diff(t, "without --purge", tasks.StatusFailed, refused.Status)
	contains(t, "error", refused.Error, "unable to remove CT 105 - used in HA resources and purge parameter not set.")

	o := b.order(t, "x-destroy-purge", policy.PctDestroyParams{Purge: true}, b.lxc(105, "media"))
	diff(t, "steps", []string{"pct destroy 105 --purge 1"}, o.Steps)
	res := b.run(t, o)
	diff(t, "with --purge", tasks.StatusSucceeded, res.Status)
	contains(t, "output", res.Output, "NOTE: removed CT 105 from HA resource configuration.")
	if out := b.ssh(t, "ha-manager status"); strings.Contains(out, "ct:105") {
		t.Errorf("ct:105 is still an HA resource:\n%s", out)
	}
}

// TestWaitsForABackupToFinish: a step Proxmox refuses while the container
// is locked waits for a backup's lock to clear, then runs.
func TestWaitsForABackupToFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(fastPolls))
	if err := b.sim.SetLock("pve1", 102, "backup", 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-after-backup", policy.PctStopParams{}, b.lxc(102, "web")))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	diff(t, "phases", []string{"lock", "pct_stop"}, phaseNames(res))
	contains(t, "output", res.Output, "CT 102 is locked (backup): a backup is running. Waiting up to 2m0s for it to clear.")
	contains(t, "notes", strings.Join(res.Notes, "\n"), "CT 102 was locked (backup)")
	cmds := commandLines(b.commands(t))
	diff(t, "the shutdown comes last, once", "pct shutdown 102 --timeout 60 --forceStop 1", cmds[len(cmds)-1])
	for _, c := range cmds[:len(cmds)-1] {
		if c != "pct config 102 --current 1" {
			t.Errorf("while locked the actuator ran %q", c)
		}
	}
}

// TestNeverRunsDuringABackup: a lock that outlasts the order's LockWait
// fails the execution, naming it, and nothing is sent.
func TestNeverRunsDuringABackup(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(fastPolls))
	if err := b.sim.SetLock("pve1", 101, "backup", 0); err != nil {
		t.Fatal(err)
	}
	o := b.order(t, "x-during-backup", policy.PctExecParams{Command: "touch /etc/x"}, b.lxc(101, "jellyfin"))
	o.LockWait = tasks.Duration(300 * time.Millisecond)
	res := b.run(t, o)
	diff(t, "status", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "lock", res.FailedPhase)
	contains(t, "error", res.Error, "CT 101 is locked (backup): a backup is running. The actuator waited 300ms and ran nothing")
	for _, c := range commandLines(b.commands(t)) {
		if c != "pct config 101 --current 1" {
			t.Errorf("during the backup the actuator ran %q", c)
		}
	}
	if j := b.journalOnce(t, func(j string) bool { return strings.Contains(j, "finished x-during-backup") }); strings.Contains(j, "sent x-during-backup") {
		t.Errorf("the journal says a command was sent:\n%s", j)
	}
}

// TestFiveChangesKeepSnapshotsKeep: after each change it snapshotted
// first, the actuator deletes its own oldest snapshots beyond the order's
// SnapshotKeep, and never one it did not make.
func TestFiveChangesKeepSnapshotsKeep(t *testing.T) {
	t.Parallel()
	// Each change a minute after the one before, as in real life, so the
	// snapshots' names differ by more than a suffix.
	var mu sync.Mutex
	offset := time.Duration(0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) }
	b := setup(t, withConfig(func(c *Config) { c.Clock = clock }))
	b.ssh(t, "pct snapshot 101 before-upgrade")
	b.ssh(t, "pct snapshot 101 nomos-keepsake") // not a name Nomos makes

	var taken []string
	for i := range 5 {
		o := b.order(t, fmt.Sprintf("x-change-%d", i), policy.PctExecParams{Command: fmt.Sprintf("touch /etc/change-%d", i)}, b.lxc(101, "jellyfin"))
		o.SnapshotKeep = 3
		res := b.run(t, o)
		if res.Status != tasks.StatusSucceeded {
			t.Fatalf("change %d: %s: %s\n%s", i, res.Status, res.Error, res.Output)
		}
		taken = append(taken, res.Snapshot)
		mu.Lock()
		offset += time.Minute
		mu.Unlock()
	}
	names := snapshotNames(b.ssh(t, "pct listsnapshot 101"))
	diff(t, "snapshots left", append([]string{"before-upgrade", "nomos-keepsake"}, taken[2:]...), names)

	var deletes []string
	for _, c := range commandLines(b.commands(t)) {
		if strings.HasPrefix(c, "pct delsnapshot") {
			deletes = append(deletes, c)
		}
	}
	diff(t, "deletions", []string{"pct delsnapshot 101 " + taken[0], "pct delsnapshot 101 " + taken[1]}, deletes)
}

// TestNoSnapshotGoesOnOnlyWhenAnnounced: a container Proxmox cannot
// snapshot (a bind mount) goes on without one only when the plan said so.
func TestNoSnapshotGoesOnOnlyWhenAnnounced(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(0))
	files := b.lxc(106, "files")
	res := b.run(t, b.order(t, "x-unannounced", policy.PctExecParams{Command: "touch /etc/x"}, files))
	diff(t, "status without the card saying so", tasks.StatusFailed, res.Status)
	diff(t, "failed phase", "snapshot", res.FailedPhase)
	contains(t, "error", res.Error, "snapshot feature is not available", "Nothing else ran", "the card did not say so")

	files.SnapshotBlocker = "bind mount mp0 (/mnt/media)"
	res = b.run(t, b.order(t, "x-announced", policy.PctExecParams{Command: "touch /etc/x"}, files))
	diff(t, "status when the card said so", tasks.StatusSucceeded, res.Status)
	diff(t, "phases", []string{"snapshot", "pct_exec"}, phaseNames(res))
	contains(t, "notes", strings.Join(res.Notes, "\n"), "cannot be snapshotted (bind mount mp0 (/mnt/media)), as the card said")
	var execs int
	for _, c := range commandLines(b.commands(t)) {
		if strings.HasPrefix(c, "pct exec 106") {
			execs++
		}
	}
	diff(t, "the change ran once, when announced", 1, execs)
}

// TestZFSRollbackDeletesTheNewerSnapshotsFirst: the plan's discarded
// snapshots go newest first, then the rollback ZFS allows.
func TestZFSRollbackDeletesTheNewerSnapshotsFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, withProxmoxFleet(0))
	for _, s := range []string{"a1", "b2", "c3"} {
		b.ssh(t, "pct snapshot 104 "+s)
	}
	db := b.lxc(104, "db")
	refused := b.run(t, b.order(t, "x-rollback-plain", policy.PctRollbackParams{Name: "a1"}, db))
	contains(t, "ZFS refuses a rollback past newer snapshots", refused.Error, "can't rollback, 'a1' is not most recent snapshot on 'local-zfs:subvol-104-disk-0'")

	res := b.run(t, b.order(t, "x-rollback", policy.PctRollbackParams{Name: "a1", Discard: []string{"c3", "b2"}}, db))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	diff(t, "snapshots left", []string{"a1"}, snapshotNames(b.ssh(t, "pct listsnapshot 104")))
	contains(t, "notes", strings.Join(res.Notes, "\n"), "Deleted the newer snapshots c3, b2 of container 104 first")
}
