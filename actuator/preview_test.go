package actuator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// withPreviewFleet makes fleet() CT 101 outdated, in a weekly backup job,
// with a backup on local, replicated to pve2, and snapshotted twice.
func withPreviewFleet() option {
	return func(t *testing.T, b *bundle) {
		b.simCfg.Hosts[0].BackupJobs = []labsim.BackupJob{{ID: "backup-weekly", Schedule: "sun 01:00", Storage: "local", VMIDs: []int{101}}}
		b.simCfg.Hosts[0].Containers[0].Outdated = true
		b.simCfg.Hosts[0].Containers[0].Backups = []labsim.Backup{{Taken: time.Date(2026, 11, 29, 1, 0, 4, 0, time.UTC)}}
		b.simCfg.Hosts[0].Containers[0].Replication = []labsim.Replication{{Target: "pve2", Schedule: "*/30", LastSync: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)}}
		// The containers are made afresh from this config.
		if err := b.sim.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(b.simCfg.StateDir, "state.json")); err != nil {
			t.Fatal(err)
		}
		b.startSim(t)
	}
}

// preview signs a preview request as the bot does and waits for its
// answer.
func (b *bundle) preview(t *testing.T, id string, action policy.Action, target tasks.Target) tasks.PreviewResult {
	t.Helper()
	now := time.Now()
	task, err := tasks.NewPreviewRunTask(b.signKey, tasks.PreviewRun{ExecutionID: id, Actuator: tasks.DefaultActuator,
		Action: string(action), Target: target, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	find := func(msgs []message) (tasks.PreviewResult, bool) {
		for _, m := range msgs {
			if m.Type == tasks.TypePreviewResult && m.Preview.ExecutionID == id {
				return m.Preview, true
			}
		}
		return tasks.PreviewResult{}, false
	}
	r, _ := find(b.results.wait(t, "preview "+id, func(msgs []message) bool { _, ok := find(msgs); return ok }))
	return r
}

// TestPreviewsReadWithoutChanging: each host preview reads what its
// action would change, through the gate, and every command it sent is
// one the classifier calls read_only; the host is as it was.
func TestPreviewsReadWithoutChanging(t *testing.T) {
	t.Parallel()
	b := setup(t, withPreviewFleet(), withGate(hostgate.Rules{}))
	b.ssh(t, "pct snapshot 101 before-upgrade")
	b.ssh(t, "pct snapshot 101 after-tuning")

	up := b.preview(t, "p-upgrade", policy.ActionAptUpgrade, b.jellyfin())
	diff(t, "upgrade error", "", up.Error)
	var names []string
	security := 0
	for _, p := range up.Packages {
		names = append(names, p.Name)
		if p.Security {
			security++
		}
	}
	diff(t, "packages", []string{"curl", "libc-bin", "libc6", "openssh-server"}, names)
	diff(t, "from security", 2, security)

	d := b.preview(t, "p-destroy", policy.ActionPctDestroy, b.lxc(101, "jellyfin"))
	diff(t, "destroy error", "", d.Error)
	var snaps []string
	for _, s := range d.Snapshots {
		snaps = append(snaps, s.Name)
		if s.Taken.IsZero() {
			t.Errorf("snapshot %s has no time", s.Name)
		}
	}
	diff(t, "snapshots", []string{"before-upgrade", "after-tuning"}, snaps)
	diff(t, "volumes", []string{"local-lvm:vm-101-disk-0"}, d.Volumes)
	if d.Backup == nil || len(d.Backup.Jobs) != 1 || d.Backup.Jobs[0].ID != "backup-weekly" {
		t.Fatalf("backup status %+v, want job backup-weekly", d.Backup)
	}
	diff(t, "newest backup", "local:backup/vzdump-lxc-101-2026_11_29-01_00_04.tar.zst", d.Backup.LastVolume)

	// Its replication job, from the node's status (pvesh get
	// /nodes/NODE/replication, pve-manager PVE/API2/Replication.pm).
	diff(t, "replication", &tasks.ReplicationStatus{Jobs: []tasks.ReplicationJob{
		{ID: "101-0", Target: "pve2", Schedule: "*/30", Enabled: true, LastSync: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)}}}, d.Replication)

	none := b.preview(t, "p-destroy-103", policy.ActionPctDestroy, b.lxc(103, "spare"))
	if none.Backup == nil || len(none.Backup.Jobs) != 0 || !none.Backup.Last.IsZero() {
		t.Errorf("CT 103 is in no job and has no backup; got %+v", none.Backup)
	}
	if none.Replication == nil || len(none.Replication.Jobs) != 0 {
		t.Errorf("CT 103 has no replication job; got %+v", none.Replication)
	}

	c := b.preview(t, "p-create", policy.ActionPctCreate, b.node())
	diff(t, "next id", 100, c.NextID)

	for _, e := range b.commands(t) {
		if e.Refused != "" {
			t.Errorf("the gate refused a preview's %q: %s", e.Command, e.Refused)
		}
		if strings.HasPrefix(e.Command, "pct snapshot ") {
			continue // the test's own
		}
		if risk := policy.ClassifyCommand(e.Command, policy.TargetHost); risk.Class != policy.ReadOnly {
			t.Errorf("a preview sent %q, which is %s", e.Command, risk.Class)
		}
	}
	// Nothing changed: apt still has the same four upgrades.
	contains(t, "after the previews", b.ssh(t, "pct exec 101 -- apt-get -s upgrade"), "4 upgraded")
}

// TestPreviewRefusesWhatIsNotReadOnly: a preview command the classifier
// would not call read_only never reaches the host.
func TestPreviewRefusesWhatIsNotReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := len(b.commands(t))
	for _, cmd := range []string{"pct stop 101", "pct exec 101 -- apt-get -y upgrade", "pct exec 101 -- sh -c 'cat /etc/shadow'"} {
		_, err := b.act.readOnly(context.Background(), tasks.PreviewRun{Target: b.jellyfin()}, cmd)
		if !errors.Is(err, errNotReadOnly) {
			t.Errorf("%q: err = %v, want a refusal as not read-only", cmd, err)
		}
	}
	diff(t, "commands the host saw", before, len(b.commands(t)))
	if slices.ContainsFunc(commandLines(b.commands(t)), func(l string) bool { return strings.Contains(l, "pct stop") }) {
		t.Error("pct stop reached the host")
	}
}

// TestPreviewFailsAndTimesOutOpenly: a preview whose read fails or hangs
// past its bound is answered with why, and no findings.
func TestPreviewFailsAndTimesOutOpenly(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.PreviewTimeout = 300 * time.Millisecond }))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "apt-get -s"}); err != nil {
		t.Fatal(err)
	}
	r := b.preview(t, "p-hang", policy.ActionAptUpgrade, b.jellyfin())
	contains(t, "hung preview", r.Error, "timed out after 300ms")
	diff(t, "packages of a failed preview", 0, len(r.Packages))

	r = b.preview(t, "p-stopped", policy.ActionAptUpgrade, b.lxc(103, "spare"))
	contains(t, "preview of a stopped container", r.Error, "apt-get -s upgrade exited")

	r = b.preview(t, "p-no-ct", policy.ActionPctRollback, b.node())
	contains(t, "preview without a container", r.Error, "targets no container")
}
