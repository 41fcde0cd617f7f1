package pveout_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/internal/pveout"
)

// sample reads a testdata file without its first line, the "# source:"
// that says where it came from.
func sample(t testing.TB, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(raw), "\n")
	if !strings.HasPrefix(first, "# source") {
		t.Fatalf("%s: line 1 is not its source: %q", name, first)
	}
	return rest
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func TestParseResources(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseResources([]byte(sample(t, "cluster-resources.pve1-cluster.source-derived.json")))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "resources", []pveout.Guest{
		{Type: "node", Node: "pve1", Status: "online"},
		{Type: "node", Node: "pve2", Status: "online"},
		{Type: "storage", Node: "pve1", Status: "available"},
		{Type: "lxc", Node: "pve1", VMID: 101, Name: "jellyfin", Status: "running", Template: new(false)},
		{Type: "lxc", Node: "pve1", VMID: 102, Name: "pihole", Status: "running", Template: new(false), Lock: "backup", Tags: []string{"dns", "infra"}, HAState: "started"},
		{Type: "lxc", Node: "pve1", VMID: 103, Status: "unknown"},
		{Type: "lxc", Node: "pve1", VMID: 104, Name: "nas", Status: "stopped", Template: new(false), Tags: []string{"storage", "media"}},
		{Type: "lxc", Node: "pve1", VMID: 9001, Name: "debian-tpl", Status: "stopped", Template: new(true)},
		{Type: "lxc", Node: "pve1", VMID: 9002, Name: "alpine-tpl", Status: "stopped", Template: new(true)},
		{Type: "qemu", Node: "pve1", VMID: 200, Name: "homeassistant", Status: "running", Template: new(false), HAState: "started"},
		{Type: "lxc", Node: "pve2", VMID: 110, Name: "grafana", Status: "running", Template: new(false)},
	}, got)

	excerpt, err := pveout.ParseResources([]byte(sample(t, "cluster-resources.pve8-excerpt.json")))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "a real PVE 8 excerpt", []pveout.Guest{
		{Type: "qemu", Node: "pve1", VMID: 101, Name: "win-srv", Status: "running", Template: new(false)},
		{Type: "lxc", Node: "pve1", VMID: 100, Name: "dns", Status: "stopped", Template: new(false)},
		{Type: "qemu", Node: "pve2", VMID: 9000, Name: "debian-tpl", Status: "stopped", Template: new(true)},
	}, excerpt)
}

func TestParseNodeGuests(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseNodeGuests([]byte(sample(t, "nodes-pve1-lxc.source-derived.json")))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the node's containers", []pveout.Guest{
		{Type: "lxc", VMID: 101, Name: "jellyfin", Status: "running"},
		{Type: "lxc", VMID: 102, Name: "pihole", Status: "running", Lock: "backup", Tags: []string{"dns", "infra"}},
		{Type: "lxc", VMID: 103, Name: "CT103", Status: "running"},
		{Type: "lxc", VMID: 104, Name: "nas", Status: "stopped", Tags: []string{"storage", "media"}},
		{Type: "lxc", VMID: 9001, Name: "debian-tpl", Status: "stopped", Template: new(true)},
		{Type: "lxc", VMID: 9002, Name: "alpine-tpl", Status: "stopped", Template: new(true)},
	}, got)
}

// TestOddFieldsCostTheField: a value of the wrong kind is left out and
// named; the entry, and the listing, stand.
func TestOddFieldsCostTheField(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseNodeGuests([]byte(`[{"vmid":"x","status":{"a":1},"template":"maybe","name":7,"tags":"a, b c;d"},
		{"vmid":" 105 ","status":"stopped","template":null}]`))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "odd entries", []pveout.Guest{
		{Type: "lxc", Name: "7", Tags: []string{"a", "b", "c", "d"}, Odd: []string{"status", "vmid", "template"}},
		{Type: "lxc", VMID: 105, Status: "stopped"},
	}, got)
	for _, bad := range []string{``, `{}`, `[1]`, `[{"vmid":1}`, `"x"`, `Configuration file 'nodes/pve1/lxc/105.conf' does not exist`} {
		if _, err := pveout.ParseResources([]byte(bad)); err == nil {
			t.Errorf("ParseResources(%q) did not fail", bad)
		}
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file      string
		want      pveout.Config
		addresses []string
		net0      [2]string
	}{
		{"pct-config.described-locked-tagged.source-derived.txt", pveout.Config{
			Hostname: "pihole", Cores: 2, MemoryMB: 512, Onboot: new(true), Protection: true, Lock: "backup", Tags: []string{"dns", "infra"},
			NICs:   []pveout.NIC{{IP: "192.168.1.53/24", GW: "192.168.1.1"}},
			RootFS: &pveout.Volume{Key: "rootfs", Source: "local-zfs:subvol-102-disk-0", Kind: "volume", Storage: "local-zfs", Volname: "subvol-102-disk-0", SizeGB: 2},
		}, []string{"192.168.1.53/24"}, [2]string{"192.168.1.53/24", "192.168.1.1"}},
		{"pct-config.dhcp-no-size.pve-container-test.txt", pveout.Config{
			Hostname: "test", MemoryMB: 2048,
			NICs:   []pveout.NIC{{IP: "dhcp", IP6: "dhcp"}},
			RootFS: &pveout.Volume{Key: "rootfs", Source: "somestore:somedisk", Kind: "volume", Storage: "somestore", Volname: "somedisk"},
		}, []string{"dhcp"}, [2]string{"dhcp", ""}},
		{"pct-config.multinic.pve-container-test.txt", pveout.Config{
			Hostname: "test9",
			NICs: []pveout.NIC{
				{Index: 0, IP: "10.0.0.100/32", GW: "11.0.0.1"},
				{Index: 1, IP6: "fc00::1/64", GW6: "fc00:1::ff"},
				{Index: 2, IP: "192.168.0.1/24"},
			},
		}, []string{"10.0.0.100/32", "fc00::1/64", "192.168.0.1/24"}, [2]string{"10.0.0.100/32", "11.0.0.1"}},
		{"conf.rollback-101.pve-container-test.conf", pveout.Config{
			Hostname: "test", MemoryMB: 2048,
			NICs:      []pveout.NIC{{IP: "dhcp", IP6: "dhcp"}},
			RootFS:    &pveout.Volume{Key: "rootfs", Source: "local:snapshotable-disk-1", Kind: "volume", Storage: "local", Volname: "snapshotable-disk-1"},
			Snapshots: []string{"test"},
		}, []string{"dhcp"}, [2]string{"dhcp", ""}},
		{"conf.pending-and-snapshots.source-derived.conf", pveout.Config{
			Hostname: "jellyfin", Cores: 2, MemoryMB: 2048, Onboot: new(true), Protection: true, Lock: "snapshot", Tags: []string{"media"},
			NICs:      []pveout.NIC{{IP: "10.0.0.21/24", GW: "10.0.0.1"}},
			RootFS:    &pveout.Volume{Key: "rootfs", Source: "local-zfs:subvol-101-disk-0", Kind: "volume", Storage: "local-zfs", Volname: "subvol-101-disk-0", SizeGB: 8},
			Snapshots: []string{"nomos-20261201-101500", "nomos-20261202-093000"},
		}, []string{"10.0.0.21/24"}, [2]string{"10.0.0.21/24", "10.0.0.1"}},
		{"pct-config.bind-mount.source-derived.txt", pveout.Config{
			Hostname: "nas", Cores: 2, MemoryMB: 1024, Onboot: new(false), Tags: []string{"storage", "media"},
			NICs:   []pveout.NIC{{IP: "192.168.1.40/24", IP6: "dhcp", GW: "192.168.1.1"}},
			RootFS: &pveout.Volume{Key: "rootfs", Source: "local:104/vm-104-disk-0.raw", Kind: "volume", Storage: "local", Volname: "104/vm-104-disk-0.raw", SizeGB: 8},
			Mounts: []pveout.Volume{
				{Key: "mp0", Source: "/mnt/media", Kind: "bind", Path: "/media"},
				{Key: "mp1", Source: "local-lvm:vm-104-disk-1", Kind: "volume", Storage: "local-lvm", Volname: "vm-104-disk-1", SizeGB: 16, Path: "/data"},
			},
		}, []string{"192.168.1.40/24"}, [2]string{"192.168.1.40/24", "192.168.1.1"}},
		{"pct-config.template.source-derived.txt", pveout.Config{
			Hostname: "debian-tpl", Cores: 1, MemoryMB: 512, Template: true,
			NICs:   []pveout.NIC{{IP: "dhcp"}},
			RootFS: &pveout.Volume{Key: "rootfs", Source: "local-lvm:base-9001-disk-0", Kind: "volume", Storage: "local-lvm", Volname: "base-9001-disk-0", SizeGB: 4},
		}, []string{"dhcp"}, [2]string{"dhcp", ""}},
	} {
		got, err := pveout.ParseConfig(sample(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
		diff(t, tc.file, tc.want, got)
		diff(t, tc.file+": addresses", tc.addresses, got.Addresses())
		ip, gw := got.Net0()
		diff(t, tc.file+": net0", tc.net0, [2]string{ip, gw})
	}
}

// TestParseConfigOddValues: one odd value is named and left out; a line
// that is no part of a configuration fails the parse, naming the line.
func TestParseConfigOddValues(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseConfig("hostname: a\nonboot: maybe\ncores: many\nprotection: yes\ntemplate: 2\nlxc.apparmor.profile: unconfined\nlxc.cgroup2.devices.allow = c 1:3 rwm\n")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "odd values", pveout.Config{Hostname: "a", Protection: true, Odd: []string{"onboot", "cores", "template"}}, got)
	_, err = pveout.ParseConfig("hostname: a\nthis is not a config\n")
	if err == nil || !strings.Contains(err.Error(), `line 2 ("this is not a config")`) {
		t.Errorf("a stray line: err = %v", err)
	}
	for _, text := range []string{"{\"vmid\": 101}\n", "<html>\n"} {
		if _, err := pveout.ParseConfig(text); err == nil {
			t.Errorf("ParseConfig(%q) did not fail", text)
		}
	}
}

func TestParseSnapshotList(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseSnapshotList(sample(t, "pct-listsnapshot.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "snapshots", []string{"nomos-20261201-101500", "nomos-20261202-093000"}, got)
	none, err := pveout.ParseSnapshotList("`-> current                                           You are here!\n")
	if err != nil || len(none) != 0 {
		t.Errorf("no snapshots = %v, %v", none, err)
	}
	if _, err := pveout.ParseSnapshotList("VMID Status\n"); err == nil {
		t.Error("a stray line did not fail")
	}
}

func TestParseStorageStatus(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseStorageStatus(sample(t, "pvesm-status.source-derived.txt"))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "storage types", map[string]string{"backup": "pbs", "local": "dir", "local-lvm": "lvmthin", "local-zfs": "zfspool", "nas": "nfs"}, got)
	old, err := pveout.ParseStorageStatus("Name Type Status Total Used Available %\nlocal dir active 1 1 0 100.00%\n")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "an older header", map[string]string{"local": "dir"}, old)
	// Available (KiB), the sixth column; a disabled storage's space is
	// unknown, not 0 free.
	free, err := pveout.ParseStorageFree(sample(t, "pvesm-status.source-derived.txt"))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "free KiB", map[string]int64{"backup": 524288000, "local": 81098760, "local-lvm": 293601280, "local-zfs": 754345575}, free)
	for _, bad := range []string{"", "storage 'x' does not exist\n", "Name Type\nlocal\n"} {
		if _, err := pveout.ParseStorageStatus(bad); err == nil {
			t.Errorf("ParseStorageStatus(%q) did not fail", bad)
		}
	}
}

// TestSnapshotBlocker follows pve-storage's volume_has_feature: ZFS,
// LVM-thin, RBD and btrfs can snapshot a container's volumes, the plain
// directory-like types and thick LVM cannot, and a bind or device mount
// never can.
func TestSnapshotBlocker(t *testing.T) {
	t.Parallel()
	types := map[string]string{"local": "dir", "local-lvm": "lvmthin", "local-zfs": "zfspool", "nas": "nfs", "bt": "btrfs",
		"thick": "lvm", "ceph": "rbd", "backup": "pbs", "odd": "someplugin"}
	for _, tc := range []struct {
		name, conf string
		types      map[string]string
		want       string
	}{
		{"zfs", "rootfs: local-zfs:subvol-101-disk-0,size=8G\n", types, ""},
		{"lvm-thin with a volume mount", "rootfs: local-lvm:vm-101-disk-0,size=8G\nmp0: local-zfs:subvol-101-disk-1,mp=/data\n", types, ""},
		{"rbd", "rootfs: ceph:vm-101-disk-0,size=8G\n", types, ""},
		{"btrfs raw", "rootfs: bt:101/vm-101-disk-0.raw,size=8G\n", types, ""},
		{"raw on dir", "rootfs: local:101/vm-101-disk-0.raw,size=8G\n", types, "raw volume on dir storage local"},
		{"subvol on dir", "rootfs: local:101/subvol-101-disk-0.subvol\n", types, "subvol volume on dir storage local"},
		{"raw on nfs mount point", "rootfs: local-lvm:vm-101-disk-0\nmp1: nas:101/vm-101-disk-1.raw,mp=/srv\n", types, "raw volume mp1 on nfs storage nas"},
		{"thick lvm", "rootfs: thick:vm-101-disk-0,size=8G\n", types, "raw volume on lvm storage thick"},
		{"pbs", "rootfs: backup:whatever\n", types, "raw volume on pbs storage backup"},
		{"bind mount", "rootfs: local-zfs:subvol-101-disk-0\nmp0: /mnt/media,mp=/media\n", types, "bind mount mp0 (/mnt/media)"},
		{"device mount", "rootfs: local-zfs:subvol-101-disk-0\nmp2: /dev/sdb1,mp=/disk\n", types, "device mount mp2 (/dev/sdb1)"},
		{"a path not shown", "rootfs: local-zfs:subvol-101-disk-0\nmp0: /mnt/a b;c,mp=/x\n", types, "bind mount mp0"},
		{"every reason, in Proxmox's order", "rootfs: local:101/vm-101-disk-0.raw\nmp1: /srv\nmp0: /mnt/media,mp=/media\n", types,
			"raw volume on dir storage local; bind mount mp0 (/mnt/media); bind mount mp1 (/srv)"},
		{"a plugin Nomos does not know", "rootfs: odd:vm-101-disk-0\n", types, ""},
		{"a storage the node does not list", "rootfs: gone:vm-101-disk-0\n", types, ""},
		{"storage types unknown", "rootfs: local:101/vm-101-disk-0.raw\nmp0: /mnt/media,mp=/media\n", nil, "bind mount mp0 (/mnt/media)"},
	} {
		c, err := pveout.ParseConfig(tc.conf)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		diff(t, tc.name, tc.want, pveout.SnapshotBlocker(c, tc.types))
	}
	c, _ := pveout.ParseConfig(sample(t, "pct-config.bind-mount.source-derived.txt"))
	types, _ = pveout.ParseStorageStatus(sample(t, "pvesm-status.source-derived.txt"))
	diff(t, "the bind-mount sample", "raw volume on dir storage local; bind mount mp0 (/mnt/media)", pveout.SnapshotBlocker(c, types))
}

func TestParseBoolAndTags(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{"1": true, "on": true, "Yes": true, "true": true, "0": false, "off": false, "no": false, "FALSE": false} {
		if got, ok := pveout.ParseBool(in); !ok || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, ok)
		}
	}
	if _, ok := pveout.ParseBool("2"); ok {
		t.Error(`ParseBool("2") is a boolean`)
	}
	diff(t, "tags", []string{"a", "b", "c", "d"}, pveout.SplitTags(";a,b c;;d "))
	diff(t, "no tags", []string(nil), pveout.SplitTags(" ; "))
}

// FuzzParseConfig: whatever a host prints, the parser neither panics
// nor reads a key of a snapshot or pending section as current.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"pct-config.described-locked-tagged.source-derived.txt", "conf.pending-and-snapshots.source-derived.conf",
		"pct-config.bind-mount.source-derived.txt", "pct-config.multinic.pve-container-test.txt"} {
		f.Add(sample(f, name))
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, _ := pveout.ParseConfig(text)
		_ = c.Addresses()
		_ = pveout.SnapshotBlocker(c, map[string]string{"local": "dir"})
		_, _ = pveout.ParseSnapshotList(text)
		_, _ = pveout.ParseStorageStatus(text)
		_, _ = pveout.ParseResources([]byte(text))
	})
}

// TestParseVMs: a node's /nodes/<node>/qemu entries come without a type
// and are VMs; `qm config` and a raw qemu-server config read like a
// container's, with the VM's name, guest agent and disks (CD-ROMs left
// out). The fixture is qemu-server's own snapshot test config.
func TestParseVMs(t *testing.T) {
	t.Parallel()
	vms, err := pveout.ParseNodeVMs([]byte(sample(t, "nodes-pve1-qemu.source-derived.json")))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the node's VMs", []pveout.Guest{
		{Type: "qemu", VMID: 200, Name: "homeassistant", Status: "running", Tags: []string{"homeassistant"}},
		{Type: "qemu", VMID: 201, Name: "opnsense", Status: "stopped"},
	}, vms)

	for _, tc := range []struct {
		file string
		want pveout.Config
	}{
		{"qm-config.agent.source-derived.txt", pveout.Config{
			Name: "homeassistant", Agent: true, Cores: 2, MemoryMB: 4096, Onboot: new(true), Tags: []string{"homeassistant"},
			NICs:  []pveout.NIC{{}},
			Disks: []pveout.Volume{{Key: "scsi0", Source: "local-lvm:vm-200-disk-0", Kind: "volume", Storage: "local-lvm", Volname: "vm-200-disk-0", SizeGB: 32}},
		}},
		{"conf.qemu-rollback-101.qemu-server-test.conf", pveout.Config{
			Name: "win", Agent: true, Cores: 4, MemoryMB: 8192,
			NICs:      []pveout.NIC{{}},
			Disks:     []pveout.Volume{{Key: "ide0", Source: "local:snapshotable-disk-1", Kind: "volume", Storage: "local", Volname: "snapshotable-disk-1", SizeGB: 32}},
			Snapshots: []string{"test"},
		}},
	} {
		got, err := pveout.ParseConfig(sample(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		diff(t, tc.file, tc.want, got)
	}
	for _, tc := range []struct {
		agent string
		on    bool
	}{{"1", true}, {"0", false}, {"enabled=1,fstrim_cloned_disks=1", true}, {"enabled=0,type=isa", false}} {
		got, _ := pveout.ParseConfig("agent: " + tc.agent + "\n")
		diff(t, "agent: "+tc.agent, tc.on, got.Agent)
	}
}

// TestParseAptList reads `apt list --upgradable` as apt's
// ListSingleVersion prints it (apt-private/private-output.cc: name/suites
// version arch [upgradable from: old], the suites comma-joined), after
// apt-get update's lines in the same output; without the "Listing..."
// header the list is known to be a tail only.
func TestParseAptList(t *testing.T) {
	t.Parallel()
	out := "Hit:1 http://deb.debian.org/debian bookworm InRelease\nReading package lists...\n" +
		"Listing...\n" +
		"curl/stable-security 7.88.1-10+deb12u12 amd64 [upgradable from: 7.88.1-10+deb12u8]\n" +
		"libc6/stable,stable-updates 2.36-9+deb12u9 amd64 [upgradable from: 2.36-9+deb12u7]\n" +
		"N: There is 1 additional version. Please use the '-a' switch to see it\n"
	got := pveout.ParseAptList(out)
	want := pveout.AptList{Complete: true, Changes: []pveout.AptChange{
		{Name: "curl", From: "7.88.1-10+deb12u8", To: "7.88.1-10+deb12u12", Origins: []string{"stable-security"}},
		{Name: "libc6", From: "2.36-9+deb12u7", To: "2.36-9+deb12u9", Origins: []string{"stable", "stable-updates"}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseAptList (-want +got):\n%s", d)
	}
	if !got.Changes[0].Security() || got.Changes[1].Security() {
		t.Errorf("security: curl %v, libc6 %v; want true, false", got.Changes[0].Security(), got.Changes[1].Security())
	}
	tail := pveout.ParseAptList("libc6/stable 2.36-9+deb12u9 amd64 [upgradable from: 2.36-9+deb12u7]\n")
	if tail.Complete || len(tail.Changes) != 1 {
		t.Errorf("a tail without the header = %+v, want one change, not complete", tail)
	}
	if l := pveout.ParseAptList("Listing...\n"); !l.Complete || len(l.Changes) != 0 {
		t.Errorf("nothing upgradable = %+v", l)
	}
}

// TestParseReplicationJobs reads the node's replication status as
// pve-manager's PVE/API2/Replication.pm status gives it (the sample is
// labsim's, which TestSamplesMatchProxmox keeps equal to the source).
func TestParseReplicationJobs(t *testing.T) {
	t.Parallel()
	got, err := pveout.ParseReplicationJobs([]byte(sample(t, "pvesh-nodes-replication.source-derived.json")))
	if err != nil {
		t.Fatal(err)
	}
	want := []pveout.ReplicationJob{
		{ID: "101-0", Guest: 101, Target: "pve2", LastSync: time.Date(2026, 12, 1, 10, 15, 2, 0, time.UTC)},
		{ID: "105-0", Guest: 105, Target: "pve2", Schedule: "*/30", Disabled: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseReplicationJobs (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "{}", `[{"id":"101-0"}]`, `[{"guest":101}]`} {
		if _, err := pveout.ParseReplicationJobs([]byte(bad)); err == nil {
			t.Errorf("ParseReplicationJobs(%q) did not fail", bad)
		}
	}
}
