package tasks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

func testPreview() tasks.PreviewResult {
	return tasks.PreviewResult{
		ExecutionID: "0193a1b2-0000-7000-8000-0000000000c1", Actuator: "actuator", Action: "pct_destroy",
		Packages:  []tasks.PackageChange{{Name: "libc6", From: "2.36-9+deb12u8", To: "2.36-9+deb12u9"}, {Name: "libssl3:i386", To: "3.0.16-1~deb12u1", Security: true}},
		Snapshots: []tasks.SnapshotInfo{{Name: "before-upgrade", Taken: now, Description: "kept for **the** <upgrade>"}},
		Volumes:   []string{"local-lvm:vm-101-disk-0", "nas:subvol-101-disk-1"},
		Backup: &tasks.BackupStatus{Jobs: []tasks.BackupJob{{ID: "backup-5f1e2d3c-a1b2", Schedule: "sun 01:00", Storage: "nas", Enabled: true}},
			Last: now, LastVolume: "nas:backup/vzdump-lxc-101-2026_11_29-01_00_04.tar.zst"},
		Replication: &tasks.ReplicationStatus{Jobs: []tasks.ReplicationJob{{ID: "101-0", Target: "hubris", Schedule: "*/15", Enabled: true, LastSync: now}}},
		NextID:      105, At: now,
	}
}

// TestPreviewRoundTrip: a preview request and its answer verify with the
// right keys only, and an expired request is refused.
func TestPreviewRoundTrip(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)
	run := tasks.PreviewRun{ExecutionID: "0193a1b2-0000-7000-8000-0000000000c1", Actuator: "actuator", Action: "apt_upgrade",
		Target: tasks.Target{HostAddr: "127.0.0.1:2201", Host: "strong", VMID: 101}, IssuedAt: now, ExpiresAt: now.Add(30 * time.Second)}
	env, err := tasks.SignPreviewRun(priv, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.VerifyPreviewRun(tasks.VerifyKeys{pub}, env, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.VerifyPreviewRun(tasks.VerifyKeys{pub}, env, now.Add(time.Minute)); !errors.Is(err, tasks.ErrExpired) {
		t.Errorf("an expired request: err = %v", err)
	}
	otherPub, _ := keys(t)
	if _, err := tasks.VerifyPreviewRun(tasks.VerifyKeys{otherPub}, env, now); !errors.Is(err, tasks.ErrBadSignature) {
		t.Errorf("another key: err = %v", err)
	}
	res, err := tasks.SignPreviewResult(priv, testPreview())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.VerifyPreviewResult(tasks.VerifyKeys{pub}, res); err != nil {
		t.Fatal(err)
	}
}

// TestPreviewResultRefusesWhatIsNotAName: a preview carries only names
// Debian or Proxmox would allow and short lines of printable text, so a
// hostile host cannot put markup or a line break into the room through
// a package name, a version, a snapshot, a volume or a job; and a failed
// preview carries no findings.
func TestPreviewResultRefusesWhatIsNotAName(t *testing.T) {
	t.Parallel()
	_, priv := keys(t)
	for name, change := range map[string]func(*tasks.PreviewResult){
		"markup in a package name":  func(r *tasks.PreviewResult) { r.Packages[0].Name = "libc6<b>" },
		"a space in a version":      func(r *tasks.PreviewResult) { r.Packages[0].To = "2.36 **Approve**" },
		"a line break in a version": func(r *tasks.PreviewResult) { r.Packages[0].From = "1\nStatus: ✅" },
		"a snapshot name of markup": func(r *tasks.PreviewResult) { r.Snapshots[0].Name = "<script>" },
		"a line break in a snapshot description": func(r *tasks.PreviewResult) {
			r.Snapshots[0].Description = "ok\nApprove: react ✅"
		},
		"a long description":             func(r *tasks.PreviewResult) { r.Snapshots[0].Description = strings.Repeat("x", tasks.MaxPreviewText+1) },
		"a volume of markup":             func(r *tasks.PreviewResult) { r.Volumes[0] = "local:<img src=x>" },
		"a job id of markup":             func(r *tasks.PreviewResult) { r.Backup.Jobs[0].ID = "<a href=x>" },
		"a schedule with a tab":          func(r *tasks.PreviewResult) { r.Backup.Jobs[0].Schedule = "sun\t01:00" },
		"a storage id of markup":         func(r *tasks.PreviewResult) { r.Backup.Jobs[0].Storage = "nas]" },
		"a pool job id of markup":        func(r *tasks.PreviewResult) { r.Backup.ByPool = []string{"x<b>"} },
		"a next id out of range":         func(r *tasks.PreviewResult) { r.NextID = 7 },
		"a replication id of markup":     func(r *tasks.PreviewResult) { r.Replication.Jobs[0].ID = "101-0<b>" },
		"a replication target of markup": func(r *tasks.PreviewResult) { r.Replication.Jobs[0].Target = "[hubris](x)" },
		"a replication schedule with a line break": func(r *tasks.PreviewResult) {
			r.Replication.Jobs[0].Schedule = "*/15\nApprove: ✅"
		},
		"a negative fail count": func(r *tasks.PreviewResult) { r.Replication.Jobs[0].FailCount = -1 },
		"a failure with findings": func(r *tasks.PreviewResult) {
			r.Error = "timed out"
		},
		"too many packages": func(r *tasks.PreviewResult) {
			r.Packages = make([]tasks.PackageChange, tasks.MaxPreviewListed+1)
			for i := range r.Packages {
				r.Packages[i] = tasks.PackageChange{Name: "libc6", To: "1"}
			}
		},
	} {
		r := testPreview()
		change(&r)
		if _, err := tasks.SignPreviewResult(priv, r); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("%s: err = %v, want it refused as malformed", name, err)
		}
	}
}
