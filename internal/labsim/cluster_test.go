package labsim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// standaloneFleet is two standalone nodes, as in many homelabs: both count
// VMIDs from 100, so each has a CT 100.
func standaloneFleet() []Host {
	return []Host{
		{Name: "strong", Containers: []Container{
			{VMID: 100, Hostname: "media", IP: "10.0.0.40/24", Gateway: "10.0.0.1", Services: []Service{{Name: "nginx", Port: 80, Active: true, Enabled: true}}},
			{VMID: 101, Hostname: "books", IP: "10.0.0.41/24", Gateway: "10.0.0.1", Status: "stopped"},
		}},
		{Name: "hubris", Containers: []Container{
			{VMID: 100, Hostname: "dns", IP: "10.0.0.50/24", Gateway: "10.0.0.1", Status: "stopped"},
		}},
	}
}

func mustAuthorizedKey(t *testing.T) []byte {
	t.Helper()
	return gossh.MarshalAuthorizedKey(newKey(t).PublicKey())
}

// TestStandaloneNodesShareVMIDs: a VMID is unique within a Proxmox cluster
// (pve-cluster PVE/Cluster.pm check_vmid_unused reads the cluster's vmlist),
// so two standalone nodes may each have CT 100, and each node's pct and
// pvesh see only its own.
func TestStandaloneNodesShareVMIDs(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, standaloneFleet())

	diff(t, "status of strong's CT 100", "status: running\n", b.must(t, "strong", "pct status 100"))
	diff(t, "status of hubris's CT 100", "status: stopped\n", b.must(t, "hubris", "pct status 100"))
	b.must(t, "hubris", "pct start 100")
	b.must(t, "strong", "pct stop 100")
	diff(t, "strong's CT 100 after its own stop", "status: stopped\n", b.must(t, "strong", "pct status 100"))
	diff(t, "hubris's CT 100 after its own start", "status: running\n", b.must(t, "hubris", "pct status 100"))
	diff(t, "hubris's CT 100 is its own", "dns\n", b.must(t, "hubris", "pct exec 100 -- hostname"))

	diff(t, "CT 101 exists only on strong", result{Stderr: "Configuration file 'nodes/hubris/lxc/101.conf' does not exist\n", Exit: 2},
		b.run(t, "hubris", "pct config 101"))
	diff(t, "nextid on strong", "102\n", b.must(t, "strong", "pvesh get /cluster/nextid"))
	diff(t, "nextid on hubris", "101\n", b.must(t, "hubris", "pvesh get /cluster/nextid --output-format json"))
	b.must(t, "hubris", "pct create 101 "+debian+" --hostname paperless")
	diff(t, "CT 101 on hubris too", "status: stopped\n", b.must(t, "hubris", "pct status 101"))

	var vms []resource
	if err := json.Unmarshal([]byte(b.must(t, "hubris", "pvesh get /cluster/resources --type vm --output-format json")), &vms); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range vms {
		ids = append(ids, r.ID+"@"+r.Node)
	}
	diff(t, "hubris's cluster resources", []string{"lxc/100@hubris", "lxc/101@hubris"}, ids)
	contains(t, "strong's nodes", b.must(t, "strong", "pvesh get /cluster/resources --type node"), "node/strong")
	if out := b.must(t, "strong", "pvesh get /cluster/resources --type node"); strings.Contains(out, "hubris") {
		t.Errorf("strong lists a node of another cluster:\n%s", out)
	}

	// Each CT 100 has its own MAC: both are on one LAN.
	b.sim.mu.Lock()
	m1, m2 := b.sim.state.Hosts["strong"].Containers[100].Conf.HWAddr, b.sim.state.Hosts["hubris"].Containers[100].Conf.HWAddr
	b.sim.mu.Unlock()
	if m1 == m2 {
		t.Errorf("both CT 100s have MAC %s", m1)
	}

	// Both survive a restart.
	b.restart(t)
	diff(t, "hubris's CT 100 after restart", "status: running\n", b.must(t, "hubris", "pct status 100"))
	diff(t, "strong's CT 100 after restart", "status: stopped\n", b.must(t, "strong", "pct status 100"))
}

// TestClusterVMIDsAreShared: within one cluster a VMID is taken on every
// node, pct answers only for the node's own CTs, and the cluster's
// resources list every node's.
func TestClusterVMIDsAreShared(t *testing.T) {
	t.Parallel()
	b := setup(t) // pve1 and pve2 in cluster lab

	diff(t, "create over a vmid of another node", result{Stderr: "CT 201 already exists on node 'pve2'\n", Exit: 255},
		b.run(t, "pve1", "pct create 201 "+debian))
	diff(t, "a CT on another node of the cluster", result{Stderr: "Configuration file 'nodes/pve1/lxc/201.conf' does not exist\n", Exit: 2},
		b.run(t, "pve1", "pct start 201"))
	diff(t, "nextid skips the other node's", "100\n", b.must(t, "pve2", "pvesh get /cluster/nextid"))
	b.must(t, "pve2", "pct create 100 "+debian)
	diff(t, "nextid sees the other node's new CT", "103\n", b.must(t, "pve1", "pvesh get /cluster/nextid"))
}

func TestClusterConfigValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, mustAuthorizedKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	// Standalone nodes may share a vmid.
	if _, err := New(Config{Hosts: standaloneFleet(), StateDir: filepath.Join(dir, "a"), AuthorizedKeysFile: keys}); err != nil {
		t.Fatalf("New with standalone nodes sharing vmid 100: %v", err)
	}
	// One cluster may not.
	hosts := standaloneFleet()
	hosts[0].Cluster, hosts[1].Cluster = "home", "home"
	_, err := New(Config{Hosts: hosts, StateDir: filepath.Join(dir, "b"), AuthorizedKeysFile: keys})
	if err == nil || !strings.Contains(err.Error(), "container 100: vmid already used on host strong of cluster home") {
		t.Fatalf("New with a vmid twice in one cluster: got %v", err)
	}
	// Nor may a saved state whose standalone nodes now join one cluster.
	hosts = standaloneFleet()
	hosts[1].Containers = nil
	if _, err := New(Config{Hosts: standaloneFleet(), StateDir: filepath.Join(dir, "c"), AuthorizedKeysFile: keys}); err != nil {
		t.Fatal(err)
	}
	hosts[0].Cluster, hosts[1].Cluster = "home", "home"
	_, err = New(Config{Hosts: hosts, StateDir: filepath.Join(dir, "c"), AuthorizedKeysFile: keys})
	if err == nil || !strings.Contains(err.Error(), "CT 100 is on both hubris and strong of cluster home") {
		t.Fatalf("New over a saved state that does not fit the clusters: got %v", err)
	}
}

// TestStateBeforeClusters: a state.json saved before nodes had clusters
// loads, and its nodes take the clusters of the config.
func TestStateBeforeClusters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, mustAuthorizedKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"version": 1, "hosts": {"pve1": {"booted": "2024-11-30T10:00:00Z", "containers": {"101": {"vmid": 101, "status": "stopped",
		"conf": {"hostname": "kept", "template": "` + debian + `", "ip": "10.0.0.9/24", "cores": 1, "memory_mb": 512, "swap_mb": 512, "disk_gb": 8,
		"storage": "local-lvm", "hwaddr": "BC:24:11:00:00:01", "unprivileged": true}, "guest": {}, "next_pid": 0}}}}}`
	if err := os.WriteFile(filepath.Join(state, "state.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	sim, err := New(Config{Hosts: testFleet(), StateDir: state, AuthorizedKeysFile: keys})
	if err != nil {
		t.Fatalf("New over a version 1 state: %v", err)
	}
	defer func() {
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
	}()
	diff(t, "saved container kept", "kept", sim.state.Hosts["pve1"].Containers[101].Conf.Hostname)
	diff(t, "cluster from the config", "lab", sim.state.Hosts["pve1"].Cluster)
}
