package labsim

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// vmFleet is sampleFleet with the demo's two VMs: Home Assistant OS with
// a guest agent, running, and OPNsense without one, stopped.
func vmFleet() []Host {
	hosts := sampleFleet()
	hosts[0].VMs = []VM{
		{VMID: 200, Name: "homeassistant", Cores: 2, MemoryMB: 4096, DiskGB: 32, Agent: true, Onboot: true, Tags: "homeassistant"},
		{VMID: 201, Name: "opnsense", Cores: 1, MemoryMB: 2048, DiskGB: 16, Status: "stopped", OSType: "other"},
	}
	return hosts
}

// pidColumnRE is qm list's PID column of a running VM, whose number is
// the host's own.
var pidColumnRE = regexp.MustCompile(`(?m)(running\s+\d+\s+[0-9.]+) \d+\s*$`)

// sameKeys compares "key: value" lines by key, and by value for every key
// but those whose value is the host's own (uuids, MAC, creation time).
func sameKeys(own ...string) func(t *testing.T, want, got string) {
	return func(t *testing.T, want, got string) {
		t.Helper()
		parse := func(s string) map[string]string {
			m := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
				k, v, _ := strings.Cut(l, ": ")
				if slices.Contains(own, k) {
					v = "(the host's own)"
				}
				m[k] = v
			}
			return m
		}
		diff(t, "config", parse(want), parse(got))
		var keys []string
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			k, _, _ := strings.Cut(l, ": ")
			keys = append(keys, k)
		}
		if !slices.IsSorted(keys) {
			t.Errorf("qm config prints its keys sorted; got %v", keys)
		}
	}
}

func init() {
	vms := vmFleet()
	addSampleCases(
		sampleCase{sample: "qm-list.stdout", hosts: vms, cmd: "qm list", match: func(t *testing.T, want, got string) {
			t.Helper()
			diff(t, "qm list, PID column aside", pidColumnRE.ReplaceAllString(want, "$1 PID"), pidColumnRE.ReplaceAllString(got, "$1 PID"))
		}},
		sampleCase{sample: "qm-status.running.stdout", hosts: vms, cmd: "qm status 200"},
		sampleCase{sample: "qm-start.already-running.stderr", hosts: vms, cmd: "qm start 200", exit: 255},
		sampleCase{sample: "qm-start.template.stderr", hosts: templateVMFleet(), cmd: "qm start 9000", exit: 255},
		sampleCase{sample: "qm-reboot.not-running.stderr", hosts: vms, cmd: "qm reboot 201", exit: 255},
		sampleCase{sample: "qm-shutdown.timeout.stderr", hosts: vms, setup: []string{"qm start 201", "labsim fault acpi_ignored 201"},
			cmd: "qm shutdown 201 --timeout 1", exit: 255},
		sampleCase{sample: "qm-any.locked.stderr", hosts: vms, state: func(st *simState) { st.Hosts["pve1"].VMs[200].Lock = "backup" },
			cmd: "qm shutdown 200 --timeout 60", exit: 255},
		sampleCase{sample: "qm-guest-cmd.agent-not-running.stderr", hosts: vms, setup: []string{"labsim fault agent_hung 200"},
			cmd: "qm guest cmd 200 ping", exit: 255},
		sampleCase{sample: "qm-guest-cmd.no-agent.stderr", hosts: vms, cmd: "qm guest cmd 201 ping", exit: 255},
		sampleCase{sample: "qm-config.missing.stderr", hosts: vms, cmd: "qm config 999 --current 1", exit: 2},
		sampleCase{sample: "qm-destroy.running.stderr", hosts: vms, cmd: "qm destroy 200 --purge 1", exit: 255},
		sampleCase{sample: "qm-guest-exec.hostname.stdout", hosts: vms, cmd: "qm guest exec 200 -- hostname"},
		sampleCase{sample: "qm-config.agent.source-derived.txt", hosts: vms, cmd: "qm config 200 --current 1",
			match: sameKeys("net0", "smbios1", "vmgenid", "meta")},
		sampleCase{sample: "pvesh-nodes-qemu.source-derived.json", hosts: vms, cmd: "pvesh get /nodes/pve1/qemu --output-format json",
			match: func(t *testing.T, want, got string) {
				t.Helper()
				diff(t, "/nodes/pve1/qemu, counters aside", stripCounters(t, want), stripCounters(t, got))
			}},
	)
}

func templateVMFleet() []Host {
	hosts := sampleFleet()
	hosts[0].VMs = []VM{{VMID: 9000, Name: "debian-tpl", Template: true}}
	return hosts
}

// stripCounters reads a VM listing and blanks what grows with time and
// differs by host: pid, uptime and the network counters.
func stripCounters(t *testing.T, s string) []map[string]any {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		t.Fatalf("not a JSON list: %v\n%s", err, s)
	}
	for _, e := range list {
		for _, k := range []string{"pid", "uptime", "netin", "netout"} {
			if _, ok := e[k]; ok {
				e[k] = "(grows)"
			}
		}
	}
	return list
}

// TestQmShutdownIgnoredACPI: a VM that ignores the ACPI power button
// stays up, and qm shutdown fails once its --timeout passes, as
// _do_vm_stop does without forceStop (qemu-server src/PVE/QemuServer.pm);
// a VM whose guest agent answers is shut down through the agent even
// then, and one whose agent hangs is not.
func TestQmShutdownIgnoredACPI(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, vmFleet())
	b.must(t, "pve1", "qm start 201")
	if err := b.sim.Inject(Fault{Kind: FaultIgnoreACPI, Target: "*"}); err != nil {
		t.Fatal(err)
	}
	diff(t, "shutdown ignored", result{Stderr: "VM quit/powerdown failed - got timeout\n", Exit: 255}, b.run(t, "pve1", "qm shutdown 201 --timeout 1"))
	diff(t, "still running", "status: running\n", b.must(t, "pve1", "qm status 201"))

	diff(t, "shutdown through the agent", result{}, b.run(t, "pve1", "qm shutdown 200 --timeout 1"))
	diff(t, "agent VM off", "status: stopped\n", b.must(t, "pve1", "qm status 200"))

	b.must(t, "pve1", "qm start 200")
	if err := b.sim.Inject(Fault{Kind: FaultAgentHung, Target: "200"}); err != nil {
		t.Fatal(err)
	}
	diff(t, "hung agent, ACPI ignored", 255, b.run(t, "pve1", "qm shutdown 200 --timeout 1").Exit)

	diff(t, "stop pulls the plug", result{}, b.run(t, "pve1", "qm stop 201"))
	diff(t, "off after stop", "status: stopped\n", b.must(t, "pve1", "qm status 201"))
	diff(t, "shutdown of a stopped VM succeeds at once", result{}, b.run(t, "pve1", "qm shutdown 201 --timeout 60"))
}

// TestQmSnapshotRollback: a disk-only snapshot rolls back to a stopped
// VM; one with --vmstate resumes it running (QemuConfig's vmstate), and
// both survive a restart of labsim.
func TestQmSnapshotRollback(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, vmFleet())
	contains(t, "snapshot", b.must(t, "pve1", "qm snapshot 200 before-update"), `Logical volume "snap_vm-200-disk-0_before-update" created.`)
	contains(t, "vmstate snapshot", b.must(t, "pve1", "qm snapshot 200 with-ram --vmstate 1"), "saving VM state and RAM using storage 'local-lvm'")
	diff(t, "name used twice", result{Stderr: "snapshot name 'with-ram' already used\n", Exit: 255}, b.run(t, "pve1", "qm snapshot 200 with-ram"))
	b.restart(t)
	b.must(t, "pve1", "qm rollback 200 before-update")
	diff(t, "disk-only rollback stops it", "status: stopped\n", b.must(t, "pve1", "qm status 200"))
	contains(t, "config names the parent", b.must(t, "pve1", "qm config 200 --current 1"), "parent: before-update\n")
	b.must(t, "pve1", "qm rollback 200 with-ram")
	diff(t, "vmstate rollback resumes it", "status: running\n", b.must(t, "pve1", "qm status 200"))
	diff(t, "unknown snapshot", result{Stderr: "snapshot 'nope' does not exist\n", Exit: 255}, b.run(t, "pve1", "qm rollback 200 nope"))
}

// TestQmGuestAgent: ping answers nothing and exits 0 where the agent is
// configured and running; each failure of assert_agent_available
// (qemu-server src/PVE/QemuServer/Agent.pm) in its order otherwise.
func TestQmGuestAgent(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, vmFleet())
	diff(t, "ping", result{}, b.run(t, "pve1", "qm guest cmd 200 ping"))
	diff(t, "exec of an unknown command", 0, b.run(t, "pve1", "qm guest exec 200 -- sh -c 'rm -rf /data'").Exit)
	contains(t, "exec result", b.run(t, "pve1", "qm guest exec 200 -- sh -c 'rm -rf /data'").Stdout, `"exitcode" : 127`)
	diff(t, "no agent", result{Stderr: "No QEMU guest agent configured\n", Exit: 255}, b.run(t, "pve1", "qm guest exec 201 -- hostname"))
	b.must(t, "pve1", "qm stop 200")
	diff(t, "VM off", result{Stderr: "VM 200 is not running\n", Exit: 255}, b.run(t, "pve1", "qm guest cmd 200 ping"))
	diff(t, "other agent commands are not simulated", 255, b.run(t, "pve1", "qm guest cmd 200 shutdown").Exit)
}

// TestQmSharesVMIDSpace: a VM's vmid is taken for containers too, and
// /cluster/resources lists VMs as type qemu beside the containers.
func TestQmSharesVMIDSpace(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, vmFleet())
	diff(t, "pct create on a VM's vmid", result{Stderr: "VM 200 already exists on node 'pve1'\n", Exit: 255},
		b.run(t, "pve1", "pct create 200 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"))
	var types []string
	for _, r := range b.jsonList(t, "pve1", "pvesh get /cluster/resources --type vm --output-format json") {
		types = append(types, r["id"].(string)+"="+r["status"].(string))
	}
	diff(t, "guests", []string{"lxc/101=running", "lxc/105=stopped", "qemu/200=running", "qemu/201=stopped"}, types)
	diff(t, "destroyed VM", result{Stdout: "  Logical volume \"vm-201-disk-0\" successfully removed.\n"}, b.run(t, "pve1", "qm destroy 201 --purge 1"))
	b.restart(t)
	diff(t, "stays destroyed", 2, b.run(t, "pve1", "qm status 201").Exit)
}

// TestQmRefusesWhatItDoesNotSimulate: verbs Nomos never sends are
// unknown to labsim's qm, so a test cannot pass by accident through them.
func TestQmRefusesWhatItDoesNotSimulate(t *testing.T) {
	t.Parallel()
	b := setupFleet(t, vmFleet())
	for _, cmd := range []string{"qm set 200 --memory 1", "qm monitor 200", "qm terminal 200", "qm importdisk 200 x local-lvm"} {
		diff(t, cmd, 255, b.run(t, "pve1", cmd).Exit)
	}
}

// TestVMServicesOnTheNetwork: a VM's services answer curl from the node
// on its address while it runs, and not once it is stopped, so Nomos's
// network probes see a VM as they see a container.
func TestVMServicesOnTheNetwork(t *testing.T) {
	t.Parallel()
	hosts := vmFleet()
	hosts[0].VMs[0].IP = "192.168.1.40"
	hosts[0].VMs[0].Services = []Service{{Name: "homeassistant", Port: 8123, HealthPath: "/manifest.json"}}
	b := setupFleet(t, hosts)
	probe := "curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://192.168.1.40:8123/manifest.json"
	diff(t, "running", result{Stdout: "200"}, b.run(t, "pve1", probe))
	diff(t, "closed port", 7, b.run(t, "pve1", "curl -sS http://192.168.1.40:22/").Exit)
	b.must(t, "pve1", "qm stop 200")
	diff(t, "stopped", 7, b.run(t, "pve1", probe).Exit)
}
