package labsim

import (
	"encoding/json"
	"strings"
	"testing"
)

const debian = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

func TestPctCreateDestroy(t *testing.T) {
	t.Parallel()
	b := setup(t)

	diff(t, "nextid", result{Stdout: "100\n"}, b.run(t, "pve2", "pvesh get /cluster/nextid"))
	diff(t, "nextid json", result{Stdout: "100\n"}, b.run(t, "pve1", "pvesh get /cluster/nextid --output-format json"))
	b.must(t, "pve1", "pct create 100 "+debian+" --hostname first")

	out := b.must(t, "pve1", "pct create 103 "+debian+
		" --hostname books --cores 2 --memory 1024 --swap 256"+
		" --net0 name=eth0,bridge=vmbr0,ip=10.0.0.30/24,gw=10.0.0.1 --rootfs local-lvm:16 --nameserver 10.0.0.53 --unprivileged 1")
	contains(t, "create output", out, `Logical volume "vm-103-disk-0" created.`, "extracting archive '/var/lib/vz/template/cache/debian-12-standard_12.7-1_amd64.tar.zst'")

	diff(t, "create over a vmid used on another node", result{Stderr: "CT 201 already exists on node 'pve2'\n", Exit: 255},
		b.run(t, "pve1", "pct create 201 "+debian+" --hostname dup"))
	diff(t, "create with an unknown template", result{Stderr: "volume 'local:vztmpl/nope.tar.zst' does not exist\n", Exit: 255},
		b.run(t, "pve1", "pct create 150 local:vztmpl/nope.tar.zst"))
	r := b.run(t, "pve1", "pct create 151 "+debian+" --net0 name=eth0,ip=10.0.0.5")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "net0.ip: invalid format") {
		t.Errorf("create with an IP lacking its prefix: got %+v, want a parameter error", r)
	}
	r = b.run(t, "pve1", "pct create 152 "+debian+" --bogus 1")
	diff(t, "create with an unknown option", result{Stderr: "Unknown option: bogus\n400 unable to parse option\npct create <vmid> <ostemplate> [OPTIONS]\n", Exit: 255}, r)

	diff(t, "status of new container", result{Stdout: "status: stopped\n"}, b.run(t, "pve1", "pct status 103"))
	diff(t, "config", result{Stdout: "" +
		"arch: amd64\n" +
		"cores: 2\n" +
		"hostname: books\n" +
		"memory: 1024\n" +
		"nameserver: 10.0.0.53\n" +
		"net0: name=eth0,bridge=vmbr0,firewall=1,gw=10.0.0.1,hwaddr=" + b.hwaddr(t, 103) + ",ip=10.0.0.30/24,type=veth\n" +
		"ostype: debian\n" +
		"rootfs: local-lvm:vm-103-disk-0,size=16G\n" +
		"swap: 256\n" +
		"unprivileged: 1\n"}, b.run(t, "pve1", "pct config 103"))
	diff(t, "nextid after create", "104\n", b.must(t, "pve1", "pvesh get /cluster/nextid"))

	b.must(t, "pve1", "pct start 103")
	contains(t, "resolv.conf of a container created with --nameserver", b.must(t, "pve1", "pct exec 103 -- cat /etc/resolv.conf"), "nameserver 10.0.0.53\n")
	diff(t, "destroy running", result{Stderr: "unable to destroy CT 103 - container is running\n", Exit: 255}, b.run(t, "pve1", "pct destroy 103"))
	b.must(t, "pve1", "pct stop 103")
	diff(t, "destroy", result{Stdout: "  Logical volume \"vm-103-disk-0\" successfully removed.\n"}, b.run(t, "pve1", "pct destroy 103"))
	diff(t, "status after destroy", result{Stderr: "Configuration file 'nodes/pve1/lxc/103.conf' does not exist\n", Exit: 2}, b.run(t, "pve1", "pct status 103"))
	b.must(t, "pve1", "pct destroy 100")
	diff(t, "nextid after destroy", "100\n", b.must(t, "pve1", "pvesh get /cluster/nextid"))

	// A static address without --nameserver resolves through its gateway;
	// DHCP takes a lease and the router as resolver.
	b.must(t, "pve2", "pct create 104 "+debian+" --hostname static --net0 name=eth0,ip=192.168.5.9/24,gw=192.168.5.1 --start 1")
	contains(t, "resolv.conf with the gateway as resolver", b.must(t, "pve2", "pct exec 104 -- cat /etc/resolv.conf"), "nameserver 192.168.5.1\n")
	b.must(t, "pve2", "pct create 105 "+debian+" --hostname leased --net0 name=eth0,bridge=vmbr0,ip=dhcp --start")
	diff(t, "dhcp lease", "10.0.0.101 \n", b.must(t, "pve2", "pct exec 105 -- hostname -I"))
	contains(t, "dhcp resolver", b.must(t, "pve2", "pct exec 105 -- cat /etc/resolv.conf"), "nameserver 10.0.0.1\n")
}

// hwaddr reads the MAC labsim gave a container of the lab cluster.
func (b *bundle) hwaddr(t *testing.T, vmid int) string {
	t.Helper()
	b.sim.mu.Lock()
	defer b.sim.mu.Unlock()
	_, ct := b.sim.state.findInCluster("pve1", vmid)
	if ct == nil {
		t.Fatalf("no container %d", vmid)
	}
	return ct.Conf.HWAddr
}

func TestPctSnapshotRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)

	diff(t, "snapshot", result{Stdout: "  Logical volume \"snap_vm-101-disk-0_before\" created.\n"}, b.run(t, "pve1", "pct snapshot 101 before --description 'before the upgrade'"))
	diff(t, "snapshot name reused", result{Stderr: "snapshot name 'before' already used\n", Exit: 255}, b.run(t, "pve1", "pct snapshot 101 before"))
	r := b.run(t, "pve1", "pct snapshot 101 1bad")
	if r.Exit != 255 || !strings.Contains(r.Stderr, "invalid configuration ID '1bad'") {
		t.Errorf("snapshot with a bad name: got %+v", r)
	}

	b.must(t, "pve1", "pct exec 101 -- systemctl disable --now jellyfin")
	b.must(t, "pve1", "pct exec 101 -- apt-get install -y nginx")
	b.clock.Advance(90 * 1e9)
	b.must(t, "pve1", "pct snapshot 101 after")

	diff(t, "listsnapshot", result{Stdout: "" +
		"`-> before                      2024-11-30 10:00:00     before the upgrade\n" +
		" `-> after                      2024-11-30 10:01:30     no-description\n" +
		"  `-> current                                           You are here!\n"}, b.run(t, "pve1", "pct listsnapshot 101"))

	diff(t, "rollback to a missing snapshot", result{Stderr: "snapshot 'nope' does not exist\n", Exit: 255}, b.run(t, "pve1", "pct rollback 101 nope"))
	b.must(t, "pve1", "pct rollback 101 before")
	// LXC snapshots hold no memory: the container comes back stopped.
	diff(t, "status after rollback", "status: stopped\n", b.must(t, "pve1", "pct status 101"))
	b.must(t, "pve1", "pct start 101")

	diff(t, "jellyfin active again", result{Stdout: "active\n"}, b.run(t, "pve1", "pct exec 101 -- systemctl is-active jellyfin"))
	diff(t, "jellyfin enabled again", result{Stdout: "enabled\n"}, b.run(t, "pve1", "pct exec 101 -- systemctl is-enabled jellyfin.service"))
	diff(t, "nginx gone", result{Stderr: "Unit nginx.service could not be found.\n", Exit: 4}, b.run(t, "pve1", "pct exec 101 -- systemctl status nginx"))
	diff(t, "nginx package gone", 1, b.run(t, "pve1", "pct exec 101 -- dpkg -s nginx").Exit)

	diff(t, "listsnapshot after rollback", result{Stdout: "" +
		"`-> before                      2024-11-30 10:00:00     before the upgrade\n" +
		" `-> after                      2024-11-30 10:01:30     no-description\n" +
		" `-> current                                            You are here!\n"}, b.run(t, "pve1", "pct listsnapshot 101"))

	// Rolling forward with --start brings nginx back, running.
	b.must(t, "pve1", "pct rollback 101 after --start 1")
	diff(t, "status after rollback --start", "status: running\n", b.must(t, "pve1", "pct status 101"))
	diff(t, "nginx back", "active\n", b.must(t, "pve1", "pct exec 101 -- systemctl is-active nginx"))
	diff(t, "jellyfin disabled as in the snapshot", result{Stdout: "inactive\n", Exit: 3}, b.run(t, "pve1", "pct exec 101 -- systemctl is-active jellyfin"))

	b.must(t, "pve1", "pct delsnapshot 101 before")
	diff(t, "listsnapshot after delsnapshot", result{Stdout: "" +
		"`-> after                       2024-11-30 10:01:30     no-description\n" +
		" `-> current                                            You are here!\n"}, b.run(t, "pve1", "pct listsnapshot 101"))
}

func TestPctUsageErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		cmd  string
		want result
	}{
		{"pct status", result{Stderr: "400 not enough arguments\npct status <vmid> [OPTIONS]\n", Exit: 255}},
		{"pct status abc", result{Stderr: "400 Parameter verification failed.\nvmid: type check ('integer') failed - got 'abc'\npct status <vmid> [OPTIONS]\n", Exit: 255}},
		{"pct frobnicate 101", result{Stderr: "ERROR: unknown command 'pct frobnicate'\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n", Exit: 255}},
		{"pct exec 102 -- true", result{Stderr: "container '102' not running!\n", Exit: 255}},
		{"pct exec 999 -- true", result{Stderr: "Configuration file 'nodes/pve1/lxc/999.conf' does not exist\n", Exit: 2}},
		{"pvesh get /nodes", result{Stderr: "No 'get' handler defined for '/nodes'\n", Exit: 255}},
		{"pvesh get /cluster/nextid --vmid 101", result{Stderr: "400 Parameter verification failed.\nvmid: VM 101 already exists\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n", Exit: 255}},
		{"pvesh get /cluster/nextid --vmid 201", result{Stderr: "400 Parameter verification failed.\nvmid: VM 201 already exists\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n", Exit: 255}},
		{"pvesh get /cluster/nextid --vmid 150", result{Stdout: "150\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			diff(t, tt.cmd, tt.want, b.run(t, "pve1", tt.cmd))
		})
	}
}

// TestPctSet: on a running container pct set applies the hot-pluggable
// options at once and leaves the rest pending until the next start
// (pve-container PVE::LXC::Config update_pct_config and
// vmconfig_hotplug_pending); pct config shows pending values as if live,
// --current the live ones, and pct pending both (PVE::GuestHelpers
// format_pending).
func TestPctSet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	diff(t, "set", result{}, b.run(t, "pve1", "pct set 101 --cores 8 --memory 8192 --nameserver 9.9.9.9 --onboot 1"))
	contains(t, "config after set", b.must(t, "pve1", "pct config 101"), "cores: 8\n", "memory: 8192\n", "nameserver: 9.9.9.9\n", "onboot: 1\n")
	current := b.must(t, "pve1", "pct config 101 --current 1")
	contains(t, "live config after set", current, "cores: 8\n", "memory: 8192\n", "onboot: 1\n")
	if strings.Contains(current, "nameserver") {
		t.Errorf("the nameserver is live on a running CT before a restart:\n%s", current)
	}
	pending := b.must(t, "pve1", "pct pending 101")
	contains(t, "pending", pending, "cur cores: 8\n", "new nameserver: 9.9.9.9\n", "cur hostname: jellyfin\n")
	if strings.Contains(pending, "new cores") {
		t.Errorf("cores, hot-pluggable, is pending:\n%s", pending)
	}
	contains(t, "raw config file", b.must(t, "pve1", "cat /etc/pve/lxc/101.conf"), "\n[pve:pending]\nnameserver: 9.9.9.9\n")
	diff(t, "resolv.conf waits for a restart", result{Stdout: "# --- BEGIN PVE ---\nsearch lan\nnameserver 10.0.0.1\n# --- END PVE ---\n"},
		b.run(t, "pve1", "pct exec 101 -- cat /etc/resolv.conf"))

	b.must(t, "pve1", "pct reboot 101")
	diff(t, "resolv.conf follows the nameserver after a reboot", result{Stdout: "# --- BEGIN PVE ---\nsearch lan\nnameserver 9.9.9.9\n# --- END PVE ---\n"},
		b.run(t, "pve1", "pct exec 101 -- cat /etc/resolv.conf"))
	contains(t, "live config after the reboot", b.must(t, "pve1", "pct config 101 --current 1"), "nameserver: 9.9.9.9\n")
	if p := b.must(t, "pve1", "pct pending 101"); strings.Contains(p, "new ") {
		t.Errorf("pending after a reboot:\n%s", p)
	}

	// A stopped container takes every change at once.
	b.must(t, "pve1", "pct set 102 --nameserver 1.1.1.1")
	contains(t, "stopped CT's live config", b.must(t, "pve1", "pct config 102 --current 1"), "nameserver: 1.1.1.1\n")

	diff(t, "set with a bad value", result{Stderr: "400 Parameter verification failed.\ncores: type check ('integer') failed - got 'many'\npct set <vmid> [OPTIONS]\n", Exit: 255},
		b.run(t, "pve1", "pct set 101 --cores many"))
	contains(t, "config unchanged by a failed set", b.must(t, "pve1", "pct config 101"), "cores: 8\n")
	diff(t, "current with snapshot", 255, b.run(t, "pve1", "pct config 101 --current 1 --snapshot x").Exit)
}

// TestPveshClusterResources: the cluster's resources answer from labsim's
// state on every node, so a container created or destroyed straight on a
// node is listed, or not, at once, and its status follows at pvestatd's
// next cycle.
func TestPveshClusterResources(t *testing.T) {
	t.Parallel()
	b := setup(t)
	list := func(host, cmd string) []resource {
		t.Helper()
		var out []resource
		if err := json.Unmarshal([]byte(b.must(t, host, cmd)), &out); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	type entry struct {
		ID, Node, Status, Name string
	}
	brief := func(rs []resource) []entry {
		var out []entry
		for _, r := range rs {
			out = append(out, entry{r.ID, r.Node, r.Status, r.Name})
		}
		return out
	}
	vms := []entry{{"lxc/101", "pve1", "running", "jellyfin"}, {"lxc/102", "pve1", "stopped", "pihole"}, {"lxc/201", "pve2", "running", "web"}}
	diff(t, "vms seen from pve1", vms, brief(list("pve1", "pvesh get /cluster/resources --type vm --output-format json")))
	diff(t, "vms seen from pve2", vms, brief(list("pve2", "pvesh get /cluster/resources --type=vm --output-format=json")))
	all := list("pve1", "pvesh get /cluster/resources --output-format json")
	var nodes []string
	for _, r := range all {
		if r.Type == "node" {
			nodes = append(nodes, r.Node+" "+r.Status)
		}
	}
	diff(t, "nodes", []string{"pve1 online", "pve2 online"}, nodes)
	jf := list("pve1", "pvesh get /cluster/resources --type vm --output-format json")[0]
	if jf.VMID != 101 || jf.MaxCPU != 4 || jf.MaxMem != 4096<<20 || jf.MaxDisk != 32<<30 || jf.Template == nil || *jf.Template != 0 {
		t.Errorf("jellyfin's resource = %+v", jf)
	}

	b.must(t, "pve2", "pct create 150 "+debian+" --hostname newbox --start 1")
	b.must(t, "pve1", "pct stop 101")
	b.must(t, "pve1", "pct destroy 102")
	b.clock.Advance(statsInterval) // pvestatd's next cycle broadcasts them
	diff(t, "after an admin's changes", []entry{{"lxc/101", "pve1", "stopped", "jellyfin"}, {"lxc/150", "pve2", "running", "newbox"}, {"lxc/201", "pve2", "running", "web"}},
		brief(list("pve1", "pvesh get /cluster/resources --type vm --output-format json")))

	contains(t, "text table", b.must(t, "pve1", "pvesh get /cluster/resources --type vm"), "lxc/150", "newbox")
	diff(t, "an unknown type", result{Stderr: "400 Parameter verification failed.\ntype: value 'lxc' does not have a value in the enumeration 'vm, storage, node, sdn'\n", Exit: 255},
		b.run(t, "pve1", "pvesh get /cluster/resources --type lxc"))
}
