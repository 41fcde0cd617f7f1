package pveout

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readSample reads a testdata sample without its "# source" line.
func readSample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "\n")
	return rest
}

// TestParseAptSimulation reads apt-get -s upgrade as apt prints it
// (testdata/apt-get-s-upgrade.*: apt-pkg/algorithms.cc pkgSimulate and
// private-output.cc Stats), and refuses output that is cut short or whose
// Inst lines do not add up to its summary.
func TestParseAptSimulation(t *testing.T) {
	t.Parallel()
	sim, err := ParseAptSimulation(readSample(t, "apt-get-s-upgrade.outdated.source-derived.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []AptChange{
		{Name: "curl", From: "7.88.1-10+deb12u8", To: "7.88.1-10+deb12u12", Origins: []string{"Debian-Security:12/stable-security"}},
		{Name: "libc-bin", From: "2.36-9+deb12u8", To: "2.36-9+deb12u9", Origins: []string{"Debian:12.9/stable"}},
		{Name: "libc6", From: "2.36-9+deb12u8", To: "2.36-9+deb12u9", Origins: []string{"Debian:12.9/stable"}},
		{Name: "openssh-server", From: "1:9.2p1-2+deb12u3", To: "1:9.2p1-2+deb12u5", Origins: []string{"Debian-Security:12/stable-security"}},
	}
	if !reflect.DeepEqual(sim.Changes, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", sim.Changes, want)
	}
	security := 0
	for _, c := range sim.Changes {
		if c.Security() {
			security++
		}
	}
	if security != 2 || sim.Held != 0 {
		t.Errorf("security %d, held %d; want 2 and 0", security, sim.Held)
	}

	for _, tc := range []struct {
		name, out string
		want      AptSimulation
		err       string
	}{
		{name: "nothing to upgrade", out: "Reading package lists...\nCalculating upgrade...\n0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n"},
		{name: "a new package, two origins, a foreign arch, held back and a reinstall count",
			out: "3 upgraded, 1 newly installed, 0 to remove and 2 not upgraded.\n" +
				"Inst linux-image-amd64 [6.1.119-1] (6.1.123-1 Debian:12.9/stable, Debian-Security:12/stable-security [amd64]) []\n" +
				"Inst linux-image-6.1.0-29-amd64 (6.1.123-1 Debian-Security:12/stable-security [amd64])\n" +
				"Inst libssl3:i386 [3.0.15-1~deb12u1] (3.0.16-1~deb12u1 Debian:12.10/stable [i386])\n" +
				"Inst tzdata [2024a-0+deb12u1] (2025a-0+deb12u1 Debian:12.10/stable [all])\n",
			want: AptSimulation{Held: 2, Changes: []AptChange{
				{Name: "linux-image-amd64", From: "6.1.119-1", To: "6.1.123-1", Origins: []string{"Debian:12.9/stable", "Debian-Security:12/stable-security"}},
				{Name: "linux-image-6.1.0-29-amd64", To: "6.1.123-1", Origins: []string{"Debian-Security:12/stable-security"}},
				{Name: "libssl3:i386", From: "3.0.15-1~deb12u1", To: "3.0.16-1~deb12u1", Origins: []string{"Debian:12.10/stable"}},
				{Name: "tzdata", From: "2024a-0+deb12u1", To: "2025a-0+deb12u1", Origins: []string{"Debian:12.10/stable"}},
			}}},
		{name: "apt 3's summary", out: "Upgrading: 1, Installing: 0, Removing: 0, Not Upgrading: 3\nInst tzdata [2024a-0+deb12u1] (2025a-0+deb12u1 Debian:13.1/stable [all])\n",
			want: AptSimulation{Held: 3, Changes: []AptChange{{Name: "tzdata", From: "2024a-0+deb12u1", To: "2025a-0+deb12u1", Origins: []string{"Debian:13.1/stable"}}}}},
		{name: "cut short before the summary", out: "Reading package lists...\nInst tzdata [1] (2 Debian:12.9/stable [all])\n", err: "no summary line"},
		{name: "an Inst line missing", out: "2 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\nInst tzdata [1] (2 Debian:12.9/stable [all])\n", err: "lists 1 packages and counts 2"},
		{name: "another command's output", out: "E: Could not open lock file /var/lib/dpkg/lock-frontend\n", err: "no summary line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAptSimulation(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestParseSnapshots reads pct listsnapshot with times and descriptions
// (testdata/pct-listsnapshot.stdout: pve-guest-common's
// print_snapshot_tree), leaving out "current".
func TestParseSnapshots(t *testing.T) {
	t.Parallel()
	got, err := ParseSnapshots(readSample(t, "pct-listsnapshot.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Snapshot{
		{Name: "nomos-20261201-101500", Taken: time.Date(2026, 12, 1, 11, 15, 0, 0, time.UTC)},
		{Name: "nomos-20261202-093000", Taken: time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
	got, err = ParseSnapshots("`-> before-upgrade           2026-11-30 09:00:00     **Approve**: react ✅ <b>now</b>\n `-> current                                       You are here!\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Description != "**Approve**: react ✅ <b>now</b>" {
		t.Errorf("a description is read as it was written, to be shown as text: %+v", got)
	}
	if _, err := ParseSnapshots("snap1 2026-11-30\n"); err == nil {
		t.Error("a line that is not a snapshot tree's was accepted")
	}
}

// TestParseBackupJobs reads /cluster/backup (testdata/pvesh-cluster-backup.*:
// pve-manager's PVE::API2::Backup index) and decides which jobs include a
// guest.
func TestParseBackupJobs(t *testing.T) {
	t.Parallel()
	jobs, err := ParseBackupJobs([]byte(readSample(t, "pvesh-cluster-backup.source-derived.json")))
	if err != nil {
		t.Fatal(err)
	}
	want := []BackupJob{
		{ID: "backup-5f1e2d3c-a1b2", Schedule: "sun 01:00", Storage: "local", Enabled: true, VMIDs: []int{101}},
		{ID: "backup-nightly", Schedule: "21:00", Storage: "local", Enabled: false, All: true, Exclude: []int{101, 105}},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("\n got %+v\nwant %+v", jobs, want)
	}
	for _, tc := range []struct {
		job        BackupJob
		vmid       int
		node       string
		covers, ok bool
	}{
		{jobs[0], 101, "pve1", true, true},
		{jobs[0], 105, "pve1", false, true},
		{jobs[1], 101, "pve1", false, true},
		{jobs[1], 102, "pve1", true, true},
		{BackupJob{All: true, Node: "pve2"}, 102, "pve1", false, true},
		{BackupJob{Pool: "media"}, 102, "pve1", false, false},
	} {
		covers, ok := tc.job.Covers(tc.vmid, tc.node)
		if covers != tc.covers || ok != tc.ok {
			t.Errorf("%+v covers %d on %s = %v, %v; want %v, %v", tc.job, tc.vmid, tc.node, covers, ok, tc.covers, tc.ok)
		}
	}
	// enabled given as the string jobs.cfg stores, vmid as a number.
	jobs, err = ParseBackupJobs([]byte(`[{"id":"backup-x","enabled":"0","vmid":101}]`))
	if err != nil || len(jobs) != 1 || jobs[0].Enabled || !reflect.DeepEqual(jobs[0].VMIDs, []int{101}) {
		t.Errorf("jobs %+v, err %v", jobs, err)
	}
	for _, bad := range []string{`{"id":"x"}`, `[{"vmid":"101"}]`, `[{"id":"x","vmid":"101,abc"}]`} {
		if _, err := ParseBackupJobs([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// TestParseBackupList reads pvesm list --content backup
// (testdata/pvesm-list.*: pve-storage's print_content) with each backup's
// time from vzdump's standard name.
func TestParseBackupList(t *testing.T) {
	t.Parallel()
	got, err := ParseBackupList(readSample(t, "pvesm-list.content-backup.source-derived.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Backup{
		{Volid: "local:backup/vzdump-lxc-101-2026_11_22-01_00_03.tar.zst", VMID: 101, Taken: time.Date(2026, 11, 22, 1, 0, 3, 0, time.UTC)},
		{Volid: "local:backup/vzdump-lxc-101-2026_11_29-01_00_04.tar.zst", VMID: 101, Taken: time.Date(2026, 11, 29, 1, 0, 4, 0, time.UTC)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
	got, err = ParseBackupList("Volid Format  Type      Size VMID\n")
	if err != nil || len(got) != 0 {
		t.Errorf("an empty list: %+v, %v", got, err)
	}
	got, err = ParseBackupList("Volid Format Type Size VMID\nnas:backup/my-own-name.tar.zst tar.zst backup 12 101\n")
	if err != nil || len(got) != 1 || !got[0].Taken.IsZero() || got[0].VMID != 101 {
		t.Errorf("a backup of another name has no time: %+v, %v", got, err)
	}
	if _, err := ParseBackupList("storage 'nas' does not exist\n"); err == nil {
		t.Error("an error message was read as a list")
	}
}
