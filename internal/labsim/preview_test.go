package labsim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// previewFleet is pve1 of cluster lab with CT 101 outdated, backed up by
// one job and with two archives on local, and CT 105 in no enabled job.
func previewFleet() []Host {
	return []Host{{Name: "pve1", Cluster: "lab",
		BackupJobs: []BackupJob{
			{ID: "backup-5f1e2d3c-a1b2", Schedule: "sun 01:00", Storage: "local", VMIDs: []int{101}},
			{ID: "backup-nightly", Schedule: "21:00", All: true, Exclude: []int{101, 105}, Disabled: true},
		},
		Containers: []Container{
			{VMID: 101, Hostname: "jellyfin", IP: "192.168.1.21/24", Gateway: "192.168.1.1", Outdated: true, Backups: []Backup{
				{Taken: time.Date(2026, 11, 22, 1, 0, 3, 0, time.UTC)},
				{Taken: time.Date(2026, 11, 29, 1, 0, 4, 0, time.UTC)},
			}},
			{VMID: 105, Hostname: "paperless", IP: "192.168.1.25/24", Gateway: "192.168.1.1", Status: "stopped"},
		}}}
}

func init() {
	addSampleCases(
		sampleCase{sample: "apt-get-s-upgrade.outdated.source-derived.txt", hosts: previewFleet(), cmd: "pct exec 101 -- apt-get -s upgrade"},
		sampleCase{
			// next-run is computed from labsim's clock: it must be there,
			// a Unix time, and everything else equal.
			sample: "pvesh-cluster-backup.source-derived.json", hosts: previewFleet(), cmd: "pvesh get /cluster/backup --output-format json",
			match: func(t *testing.T, want, got string) {
				var w, g []map[string]any
				if err := json.Unmarshal([]byte(want), &w); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(got), &g); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, got)
				}
				for _, jobs := range [][]map[string]any{w, g} {
					for _, j := range jobs {
						if n, ok := j["next-run"].(float64); !ok || n < 1e9 {
							t.Errorf("job %v: next-run %v is not a Unix time", j["id"], j["next-run"])
						}
						delete(j, "next-run")
					}
				}
				diff(t, "jobs", w, g)
			},
		},
		sampleCase{sample: "pvesm-list.content-backup.source-derived.txt", hosts: previewFleet(), cmd: "pvesm list local --content backup --vmid 101"},
		sampleCase{sample: "pvesm-list.content-backup-none.source-derived.txt", hosts: previewFleet(), cmd: "pvesm list local --content backup --vmid 105"},
	)
}

// TestAptSimulationChangesNothing: apt-get -s upgrade lists the updates
// and installs none; apt-get upgrade installs them, after which neither
// lists anything. A container not outdated has nothing to upgrade.
func TestAptSimulationChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, previewFleet())
	sim := func() string { return b.must(t, "pve1", "pct exec 101 -- apt-get -s upgrade") }
	first := sim()
	contains(t, "simulation", first, "4 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
	diff(t, "a second simulation", first, sim())
	up := b.must(t, "pve1", "pct exec 101 -- env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 -o Dpkg::Options::=--force-confold upgrade")
	contains(t, "upgrade", up, "Setting up libc6 (2.36-9+deb12u9) ...\n")
	contains(t, "after the upgrade", sim(), "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n")
	diff(t, "apt list --upgradable after the upgrade", "Listing...\n", b.must(t, "pve1", "pct exec 101 -- apt list --upgradable"))
	if got := b.must(t, "pve1", "pct start 105 && pct exec 105 -- apt-get -s upgrade"); !strings.Contains(got, "0 upgraded") || strings.Contains(got, "Inst ") {
		t.Errorf("a container that is not outdated has something to upgrade:\n%s", got)
	}
}

// TestBackupsOutliveTheirContainer: vzdump archives stay on the storage
// after pct destroy (pve-container's destroy_vm leaves backups alone),
// and a storage without backup content lists none.
func TestBackupsOutliveTheirContainer(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, previewFleet())
	b.must(t, "pve1", "pct stop 101")
	b.must(t, "pve1", "pct destroy 101 --purge 1")
	contains(t, "after destroy", b.must(t, "pve1", "pvesm list local --content backup --vmid 101"), "vzdump-lxc-101-2026_11_29-01_00_04.tar.zst")
	diff(t, "no backups on local-lvm", "Volid Format  Type      Size VMID\n", b.must(t, "pve1", "pvesm list local-lvm --content backup --vmid 101"))
	r := b.run(t, "pve1", "pvesm list nowhere --content backup")
	diff(t, "unknown storage", result{Stderr: "storage 'nowhere' does not exist\n", Exit: 255}, r)
}
