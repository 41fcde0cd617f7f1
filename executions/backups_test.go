package executions_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/report"
)

// backupLines is the daily brief's backup paragraph, one line a group.
func backupLines(t *testing.T, b *bundle, now time.Time, maxAge time.Duration) []string {
	t.Helper()
	r, err := report.Build(b.ctx, b.store, report.Daily, report.Options{Now: now, BackupMaxAge: maxAge})
	if err != nil {
		t.Fatal(err)
	}
	for para := range strings.SplitSeq(r.Markdown, "\n\n") {
		if strings.HasPrefix(para, "**Backups**") {
			return strings.Split(para, "\n")
		}
	}
	t.Fatalf("the brief has no backup paragraph:\n%s", r.Markdown)
	return nil
}

// line is the one line of lines that starts with prefix, or "".
func line(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestDailyBriefNamesGuestsBehindOnBackups runs discovery through a real
// actuator against labsim, its nodes forcing the gate, and writes the
// daily brief from what Postgres then holds. The nodes answer as Proxmox
// does: pve-manager's /cluster/backup index
// (labsim/testdata/pve-samples/pvesh-cluster-backup.source-derived.json)
// and pve-storage's `pvesm list STORAGE --content backup`
// (pvesm-list.content-backup.source-derived.txt), the time a backup was
// taken read from vzdump's archive name (Storage.pm archive_info). A
// guest with a fresh backup is not named; one whose newest is three days
// old is, with its age; one a job selects but that has no backup, CT or
// VM, is; one no job selects is named as such. A longer or shorter
// report.backup_max_age changes who is named.
func TestDailyBriefNamesGuestsBehindOnBackups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now().UTC()
	fresh, threeDays := now.Add(-2*time.Hour), now.Add(-72*time.Hour)
	fleet := testenv.NewFleet(t, testenv.WithGate(hostgate.Rules{}), func(c *labsim.Config) {
		for i := range c.Hosts {
			h := &c.Hosts[i]
			switch h.Name {
			case "strong":
				// 104 (caddy) is in no job; 103 (authentik) is, and has
				// no backup; 102 (gitea)'s newest is three days old.
				h.BackupJobs = []labsim.BackupJob{{ID: "backup-nightly", Schedule: "01:00", Storage: "local", VMIDs: []int{100, 101, 102, 103, 105, 106, 107}}}
			case "hubris":
				// Every guest but VM 201 (opnsense); VM 200 has no backup.
				h.BackupJobs = []labsim.BackupJob{{ID: "backup-hubris", Schedule: "02:00", Storage: "local", All: true, Node: "hubris", Exclude: []int{201}}}
			}
			for j := range h.Containers {
				ct := &h.Containers[j]
				switch {
				case h.Name == "strong" && ct.VMID == 102:
					ct.Backups = []labsim.Backup{{Taken: threeDays.Add(-7 * 24 * time.Hour)}, {Taken: threeDays}}
				case h.Name == "strong" && (ct.VMID == 103 || ct.VMID == 104):
					ct.Backups = nil
				default:
					ct.Backups = []labsim.Backup{{Taken: fresh}}
				}
			}
		}
	})
	if _, err := b.store.ApplySeed(b.ctx, fleet.Seed); err != nil {
		t.Fatal(err)
	}
	b.startWorkers(t, fleet)
	b.discover(t, 2)

	lines := backupLines(t, b, now, 36*time.Hour)
	text := strings.Join(lines, "\n")
	if want := "**Backups**: 5 of 17 guests without one from the last 36h."; lines[0] != want {
		t.Errorf("backup summary = %q; want %q", lines[0], want)
	}
	for _, fine := range []string{"lxc:strong/101", "lxc:strong/100", "lxc:hubris/131"} {
		if strings.Contains(text, fine) {
			t.Errorf("%s has a fresh backup, but the brief names it:\n%s", fine, text)
		}
	}
	if l := line(lines, "- 🔴 no backup, though a job selects it: "); !strings.Contains(l, "`lxc:strong/103`") || !strings.Contains(l, "`vm:hubris/200`") {
		t.Errorf("CT 103 and VM 200 are in a job and have no backup; the brief says:\n%s", text)
	}
	if l := line(lines, "- 🟠 newest too old: "); !strings.Contains(l, "`lxc:strong/102` gitea 3d") {
		t.Errorf("CT 102's newest backup is 3 days old; the brief says:\n%s", text)
	}
	if l := line(lines, "- ⚪ in no backup job: "); !strings.Contains(l, "`lxc:strong/104`") || !strings.Contains(l, "`vm:hubris/201`") {
		t.Errorf("CT 104 and VM 201 are in no job; the brief says:\n%s", text)
	}
	// Worst first: none at all, then too old, then in no job.
	if i, j, k := strings.Index(text, "🔴"), strings.Index(text, "🟠"), strings.Index(text, "⚪"); !(i < j && j < k) {
		t.Errorf("groups out of order:\n%s", text)
	}

	// Four days' grace: the three-day-old backup is fine.
	lines = backupLines(t, b, now, 96*time.Hour)
	if text := strings.Join(lines, "\n"); strings.Contains(text, "lxc:strong/102") || !strings.Contains(text, "lxc:strong/103") {
		t.Errorf("with backup_max_age 96h, CT 102 is fine and CT 103 still has none; the brief says:\n%s", text)
	}
	// One hour: the two-hour-old backups are too old too, after the
	// oldest, and the list is cut short for a phone.
	lines = backupLines(t, b, now, time.Hour)
	if l := line(lines, "- 🟠 newest too old: "); lines[0] != "**Backups**: 17 of 17 guests without one from the last 1h." ||
		!strings.HasPrefix(l, "- 🟠 newest too old: `lxc:strong/102` gitea 3d, ") || !strings.Contains(l, " 2h, ") || !strings.HasSuffix(l, ", 8 more") {
		t.Errorf("with backup_max_age 1h, CT 102 and then the fresh ones are too old; the brief says:\n%s", strings.Join(lines, "\n"))
	}
}
