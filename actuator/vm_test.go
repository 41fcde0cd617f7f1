package actuator

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/hostgate"
	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// withVMs gives pve1 the demo's two VMs: Home Assistant OS with a guest
// agent and OPNsense without one, both running. It restarts labsim, so it
// goes before withGate or after it with the gate kept. tune, when given,
// adjusts labsim's config once the VMs are in it.
func withVMs(tune ...func(*labsim.Config)) option {
	return func(t *testing.T, b *bundle) {
		if err := b.sim.Close(); err != nil {
			t.Fatal(err)
		}
		b.simCfg.Hosts[0].VMs = []labsim.VM{
			{VMID: 200, Name: "homeassistant", Cores: 2, MemoryMB: 4096, Agent: true},
			{VMID: 201, Name: "opnsense", MemoryMB: 2048, OSType: "other"},
		}
		for _, f := range tune {
			f(&b.simCfg)
		}
		b.startSim(t)
	}
}

func (b *bundle) vm(vmid int, name string) tasks.Target {
	return tasks.Target{ID: "vm-" + strconv.Itoa(vmid), Slug: "vm:pve1/" + strconv.Itoa(vmid), Type: "vm", Host: "pve1", HostAddr: b.addr,
		VMID: vmid, Hostname: name}
}

// TestVMShutdownIgnoredIsNoSuccess: a VM that ignores the ACPI request
// fails guest_shutdown once its timeout passes, with a message that says it
// did not shut down within that time and is still running; nothing forces
// it off (qemu-server _do_vm_stop without forceStop: "VM quit/powerdown
// failed - got timeout"). Through the gate.
func TestVMShutdownIgnoredIsNoSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(), withGate(hostgate.Rules{}))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultIgnoreACPI, Target: "201"}); err != nil {
		t.Fatal(err)
	}
	res := b.run(t, b.order(t, "x-shutdown", policy.GuestShutdownParams{Timeout: 1}, b.vm(201, "opnsense")))
	if res.Status != tasks.StatusFailed {
		t.Fatalf("shutdown of a VM ignoring ACPI: %s, want failed\n%s", res.Status, res.Output)
	}
	contains(t, "error", res.Error, "VM 201 did not shut down within 1 s and is still running", "Nothing was forced")
	diff(t, "still running", "status: running\n", b.ssh(t, "qm status 201"))

	res = b.run(t, b.order(t, "x-shutdown-ha", policy.GuestShutdownParams{Timeout: 1}, b.vm(200, "homeassistant")))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("shutdown of a VM that obeys: %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	diff(t, "off", "status: stopped\n", b.ssh(t, "qm status 200"))
}

// TestVMSnapshotRollbackThroughTheGate: a snapshot then a rollback of the
// Home Assistant VM run as qm through the gate, and labsim's command log
// records exactly the catalogue's forms; the VM is left stopped, as a
// disk-only rollback leaves it. A hard stop runs qm stop and nothing else.
func TestVMSnapshotRollbackThroughTheGate(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(), withGate(hostgate.Rules{}))
	ha := b.vm(200, "homeassistant")
	for _, tc := range []struct {
		id     string
		params policy.Params
	}{
		{"snapshot", policy.PctSnapshotParams{Name: "before-update"}},
		{"rollback", policy.PctRollbackParams{Name: "before-update"}},
		{"start", policy.PctStartParams{}},
		{"stop", policy.PctStopParams{}},
	} {
		res := b.run(t, b.order(t, "x-"+tc.id, tc.params, ha))
		if res.Status != tasks.StatusSucceeded {
			t.Fatalf("%s through the gate: %s at %s: %s\n%s", tc.id, res.Status, res.FailedPhase, res.Error, res.Output)
		}
	}
	var qm []string
	for _, l := range commandLines(b.commands(t)) {
		if strings.Contains(l, "qm ") {
			qm = append(qm, l)
		}
	}
	want := []string{"qm snapshot 200 before-update", "qm rollback 200 before-update", "qm start 200", "qm stop 200"}
	for _, w := range want {
		if !slicesContainsSuffix(qm, w) {
			t.Errorf("labsim's log lacks %q; its qm commands were %q", w, qm)
		}
	}
	diff(t, "stopped", "status: stopped\n", b.ssh(t, "qm status 200"))
	contains(t, "snapshot kept", b.ssh(t, "qm listsnapshot 200"), "before-update")
}

func slicesContainsSuffix(lines []string, s string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, s) {
			return true
		}
	}
	return false
}

// TestVMRunStateAndAgentProbe: pct_status on a VM reads qm status, and
// where the guest agent is enabled it pings the agent: answering is
// healthy, a hung agent degraded, a VM without an agent healthy on its run
// state alone, a stopped VM unhealthy. Probes that read from inside a
// guest are refused for a VM rather than sent as pct exec. Through the
// gate.
func TestVMRunStateAndAgentProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(), withGate(hostgate.Rules{}))
	b.ssh(t, "qm stop 201")
	ha, opn := b.vm(200, "homeassistant"), b.vm(201, "opnsense")
	ha.Agent = true
	cases := []struct {
		id, kind string
		target   tasks.Target
		health   string
		detail   string
	}{
		{"ha", "pct_status", ha, healthy, "VM 200 is running and its guest agent answers"},
		{"opnsense", "pct_status", opn, unhealthy, "VM 201 is stopped"},
		{"tcp-in-vm", "tcp", ha, unhealthy, "the check cannot run: invalid probe: tcp reads from inside the guest"},
	}
	for _, tc := range cases {
		b.probe(t, tasks.CheckRun{CheckID: "check-" + tc.id, TargetID: "entity-" + tc.id, Kind: tc.kind, Target: tc.target})
	}
	for _, tc := range cases {
		got := b.results.check(t, "check-"+tc.id)
		diff(t, tc.id+" health", tc.health, got.Health)
		contains(t, tc.id+" detail", got.Detail, tc.detail)
	}
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultAgentHung, Target: "200"}); err != nil {
		t.Fatal(err)
	}
	b.probe(t, tasks.CheckRun{CheckID: "check-hung", TargetID: "entity-hung", Kind: "pct_status", Target: ha})
	got := b.results.check(t, "check-hung")
	diff(t, "hung agent", degraded, got.Health)
	contains(t, "hung agent detail", got.Detail, "its guest agent does not answer: QEMU guest agent is not running")
	diff(t, "agent_up", 0.0, got.Metrics["agent_up"])
	for _, e := range b.commands(t) {
		if strings.HasPrefix(e.Command, "pct ") {
			t.Errorf("a VM probe sent %q", e.Command)
		}
	}
}

// TestInventoryListsTheVMs: the inventory lists the node's VMs from
// /nodes/<node>/qemu and reads each one's name, memory, disks and guest
// agent from qm config --current 1, and its snapshots from qm
// listsnapshot; a stopped VM is listed stopped. Through the gate.
func TestInventoryListsTheVMs(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(), withGate(hostgate.Rules{}))
	b.ssh(t, "qm stop 201")
	b.inventoryRun(t, tasks.InventoryRun{RunID: "run-vms"})
	got := b.results.inventory(t, "run-vms")
	if got.Error != "" {
		t.Fatalf("inventory failed: %s", got.Error)
	}
	free, err := pveout.ParseStorageFree(b.ssh(t, "pvesm status"))
	if err != nil {
		t.Fatal(err)
	}
	lvmFree := free["local-lvm"] >> 10
	// The lab has no backup job: each VM is known to be in none.
	diff(t, "VMs", []tasks.InventoryVM{
		{VMID: 200, Status: "running", Name: "homeassistant", Agent: true, MemoryMB: 4096, StorageType: "lvmthin", VMStateStorage: "local-lvm", VMStateFreeMB: &lvmFree, Backup: &tasks.BackupStatus{}},
		{VMID: 201, Status: "stopped", Name: "opnsense", MemoryMB: 2048, StorageType: "lvmthin", VMStateStorage: "local-lvm", VMStateFreeMB: &lvmFree, Backup: &tasks.BackupStatus{}},
	}, got.VMs)
	cmds := commandLines(b.commands(t))
	for _, want := range []string{"pvesh get /nodes/pve1/qemu --output-format json", "qm config 200 --current 1", "qm config 201 --current 1", "qm listsnapshot 200"} {
		if !slicesContainsSuffix(cmds, want) {
			t.Errorf("the inventory did not run %q: %q", want, cmds)
		}
	}
}

// TestVMPreviewsReadTheVM: a VM's destroy and rollback previews read it
// with qm, not pct, through the gate: its snapshots as qm listsnapshot
// prints them (qemu-server, PVE::GuestHelpers::print_snapshot_tree, the
// same tree as pct's), its disks from qm config, and what backs it up.
func TestVMPreviewsReadTheVM(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(), withGate(hostgate.Rules{}))
	b.ssh(t, "qm snapshot 200 before-update")
	b.ssh(t, "qm snapshot 200 after-update")

	d := b.preview(t, "p-vm-destroy", policy.ActionPctDestroy, b.vm(200, "homeassistant"))
	diff(t, "destroy error", "", d.Error)
	var snaps []string
	for _, s := range d.Snapshots {
		snaps = append(snaps, s.Name)
	}
	diff(t, "snapshots", []string{"before-update", "after-update"}, snaps)
	diff(t, "disks", []string{"local-lvm:vm-200-disk-0"}, d.Volumes)
	if d.Backup == nil || len(d.Backup.Jobs) != 0 {
		t.Errorf("VM 200 is in no backup job; got %+v", d.Backup)
	}

	rb := b.preview(t, "p-vm-rollback", policy.ActionPctRollback, b.vm(200, "homeassistant"))
	diff(t, "rollback error", "", rb.Error)
	diff(t, "rollback snapshots", 2, len(rb.Snapshots))

	for _, e := range b.commands(t) {
		if e.Refused != "" {
			t.Errorf("the gate refused %q: %s", e.Command, e.Refused)
		}
		if strings.HasPrefix(e.Command, "pct listsnapshot") || strings.HasPrefix(e.Command, "pct config") {
			t.Errorf("a VM's preview read it as a container: %q", e.Command)
		}
	}
}

// TestHAManagedVMStopWaitsForHA: qm stop of a VM under Proxmox HA prints
// "Requesting HA stop for VM 200" and exits 0 at once (qemu-server
// src/PVE/API2/Qemu.pm vm_stop); the step succeeds only once qm status
// says stopped, as for an HA container. A rollback of it is noted as one
// HA starts again. Through the gate.
func TestHAManagedVMStopWaitsForHA(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(func(c *labsim.Config) {
		c.HADelay = 700 * time.Millisecond
		c.Hosts[0].VMs[0].HA = "started"
	}), withConfig(fastPolls), withGate(hostgate.Rules{}))
	ha := b.vm(200, "homeassistant")
	res := b.run(t, b.order(t, "x-ha-vm-stop", policy.PctStopParams{}, ha))
	if res.Status != tasks.StatusSucceeded {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, res.Output)
	}
	diff(t, "state once the step succeeded", "status: stopped\n", b.ssh(t, "qm status 200"))
	contains(t, "output", res.Output, "Requesting HA stop for VM 200", "waiting up to 3m0s for it to be stopped")
	contains(t, "phase note", res.Phases[len(res.Phases)-1].Note, "HA had VM 200 stopped after")
	if n := strings.Count(strings.Join(commandLines(b.commands(t)), "\n"), "qm status 200"); n < 2 {
		t.Errorf("want the state polled until it changed (qm status more than once), got %q", commandLines(b.commands(t)))
	}
}

// TestInventoryReadsVMs: the inventory reads each VM's HA state from the
// cluster's resources, its memory and disks from qm config, its snapshots
// from qm listsnapshot (pve-guest-common's snapshot tree, as for pct),
// the type of the storage its disks are on, and where a snapshot with
// its RAM would go and what that storage has free (`pvesm status`,
// Available in KiB; qemu-server src/PVE/QemuConfig.pm
// find_vmstate_storage: a storage the VM's disks are on). It says the
// VMs were listed, so the bot may mark a missing one gone.
func TestInventoryReadsVMs(t *testing.T) {
	t.Parallel()
	b := setup(t, withVMs(func(c *labsim.Config) {
		c.Hosts[0].VMs[0].HA = "started"
		c.Hosts[0].VMs[1].Storage = "local-zfs"
	}))
	b.ssh(t, "qm snapshot 200 first")
	b.ssh(t, "qm snapshot 200 second")
	free, err := pveout.ParseStorageFree(b.ssh(t, "pvesm status"))
	if err != nil {
		t.Fatal(err)
	}
	lvmFree, zfsFree := free["local-lvm"]>>10, free["local-zfs"]>>10
	b.inventoryRun(t, tasks.InventoryRun{RunID: "run-vms"})
	got := b.results.inventory(t, "run-vms")
	if !got.VMsListed {
		t.Error("the inventory does not say the VMs were listed")
	}
	diff(t, "VMs", []tasks.InventoryVM{
		{VMID: 200, Status: "running", Name: "homeassistant", Agent: true, HAState: "started", MemoryMB: 4096, Backup: &tasks.BackupStatus{},
			Snapshots: []string{"first", "second"}, StorageType: "lvmthin", VMStateStorage: "local-lvm", VMStateFreeMB: &lvmFree},
		{VMID: 201, Status: "running", Name: "opnsense", MemoryMB: 2048, Backup: &tasks.BackupStatus{},
			StorageType: "zfspool", VMStateStorage: "local-zfs", VMStateFreeMB: &zfsFree},
	}, got.VMs)
	for _, want := range []string{"qm listsnapshot 200", "qm listsnapshot 201"} {
		if !slices.Contains(commandLines(b.commands(t)), want) {
			t.Errorf("the inventory did not run %q", want)
		}
	}
}
