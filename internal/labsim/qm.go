package labsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A VM in labsim is what qemu-server shows of it from the node: its
// config, run state, snapshots and guest agent. What runs inside is not
// simulated beyond what `qm guest exec` of a few commands answers; Nomos
// reaches services in VMs over the network, never from inside.
//
// The texts follow proxmox/qemu-server: src/PVE/CLI/qm.pm (the list,
// status and config printers, $print_agent_result), src/PVE/API2/Qemu.pm
// (vm_start, vm_shutdown, vm_reboot, vm_stop, snapshot, rollback,
// destroy_vm), src/PVE/QemuServer.pm (vm_start, _do_vm_stop) and
// src/PVE/QemuServer/Agent.pm (assert_agent_available).

// Faults of VMs, aimed at a vmid like the container faults.
const (
	// FaultAgentHung makes the VM's guest agent stop answering: it is
	// configured, the VM runs, and guest-ping times out.
	FaultAgentHung FaultKind = "agent_hung"
	// FaultIgnoreACPI makes the VM ignore the ACPI power button, as a
	// guest without acpid or one stuck in its shutdown does: qm shutdown
	// waits out its timeout and fails.
	FaultIgnoreACPI FaultKind = "acpi_ignored"
)

// VM is a QEMU virtual machine on a host.
type VM struct {
	VMID int
	// Name is the VM's name; default VM<vmid>, as qemu-server shows it.
	Name     string
	Cores    int // default 1
	MemoryMB int // default 2048
	DiskGB   int // default 32
	// Storage holds its disk; default the host's.
	Storage string
	// Status is running or stopped; default running.
	Status string
	// Agent sets agent: 1, so a guest agent is configured and answers
	// while the VM runs.
	Agent bool
	// OSType is the config's ostype; default l26.
	OSType string
	Onboot bool
	Tags   string
	// Template makes it a template: never running, never started.
	Template bool
	// HA, when set, puts the VM under Proxmox HA (vm:<vmid>) with this
	// requested state: started or stopped.
	HA string
	// IP is the VM's address on the LAN, without prefix; "" for none.
	IP string
	// Services answer on IP while the VM runs, each on its port (and
	// HealthPath); what runs inside is not simulated beyond that.
	Services []Service
}

func (v *VM) validate() error {
	if v.VMID < minVMID || v.VMID > maxVMID {
		return fmt.Errorf("vmid must be between %d and %d", minVMID, maxVMID)
	}
	v.Name = cmp.Or(v.Name, fmt.Sprintf("VM%d", v.VMID))
	if !hostnameRE.MatchString(v.Name) {
		return fmt.Errorf("name %q is not a valid DNS name", v.Name)
	}
	v.Cores = cmp.Or(v.Cores, 1)
	v.MemoryMB = cmp.Or(v.MemoryMB, 2048)
	v.DiskGB = cmp.Or(v.DiskGB, 32)
	v.OSType = cmp.Or(v.OSType, "l26")
	v.Status = cmp.Or(v.Status, statusRunning)
	if v.Template {
		v.Status = statusStopped
	}
	if v.Status != statusRunning && v.Status != statusStopped {
		return fmt.Errorf("status %q: want running or stopped", v.Status)
	}
	if v.Cores < 0 || v.MemoryMB < 0 || v.DiskGB < 0 {
		return fmt.Errorf("cores, memory and disk must not be negative")
	}
	if v.HA != "" && v.HA != haStarted && v.HA != haStopped {
		return fmt.Errorf("ha %q: want started, stopped or nothing", v.HA)
	}
	if v.IP != "" {
		if _, err := netip.ParseAddr(v.IP); err != nil {
			return fmt.Errorf("ip %q is not an address", v.IP)
		}
	}
	return nil
}

// vmState is a VM as labsim remembers it.
type vmState struct {
	VMID      int       `json:"vmid"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at,omitzero"`
	Conf      vmConf    `json:"conf"`
	// Parent is the snapshot the current state descends from.
	Parent    string       `json:"parent,omitempty"`
	Snapshots []vmSnapshot `json:"snapshots,omitempty"`
	Lock      string       `json:"lock,omitempty"`
	// HA is its HA resource (vm:<vmid>), nil when HA does not manage it.
	HA *haState `json:"ha,omitempty"`
}

// vmConf is what qm config shows.
type vmConf struct {
	Name       string `json:"name"`
	Cores      int    `json:"cores"`
	MemoryMB   int    `json:"memory_mb"`
	DiskGB     int    `json:"disk_gb"`
	Storage    string `json:"storage"`
	HWAddr     string `json:"hwaddr"`
	UUID       string `json:"uuid"`
	OSType     string `json:"ostype"`
	Agent      bool   `json:"agent,omitempty"`
	Onboot     bool   `json:"onboot,omitempty"`
	Tags       string `json:"tags,omitempty"`
	Protection bool   `json:"protection,omitempty"`
	IsTemplate bool   `json:"is_template,omitempty"`
	// IP and Services are what answers on the network while it runs.
	IP       string     `json:"ip,omitempty"`
	Services []svcState `json:"services,omitempty"`
}

// vmSnapshot is a qm snapshot: the config and, with --vmstate, the
// running state in RAM, which a rollback resumes.
type vmSnapshot struct {
	Name        string    `json:"name"`
	Parent      string    `json:"parent,omitempty"`
	Taken       time.Time `json:"taken"`
	Description string    `json:"description,omitempty"`
	VMState     bool      `json:"vmstate,omitempty"`
	Conf        vmConf    `json:"conf"`
}

func (v *vmState) running() bool { return v.Status == statusRunning }

func (v *vmState) boot(t time.Time) { v.Status, v.StartedAt = statusRunning, t }

func (v *vmState) halt() { v.Status, v.StartedAt = statusStopped, time.Time{} }

func newVM(host string, cfg VM, storage string, now time.Time) *vmState {
	h := hashString(host + "/vm/" + strconv.Itoa(cfg.VMID))
	v := &vmState{VMID: cfg.VMID, Status: statusStopped, Conf: vmConf{
		Name: cfg.Name, Cores: cfg.Cores, MemoryMB: cfg.MemoryMB, DiskGB: cfg.DiskGB,
		Storage: cmp.Or(cfg.Storage, storage, defaultStorage),
		HWAddr:  fmt.Sprintf("BC:24:11:%02X:%02X:%02X", byte(h>>16), byte(h>>8), byte(h)),
		UUID:    fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", h, h>>16, h&0xfff, (h>>4)&0xfff, uint64(h)*2654435761),
		OSType:  cfg.OSType, Agent: cfg.Agent, Onboot: cfg.Onboot, Tags: uniqueTags(cfg.Tags), IsTemplate: cfg.Template,
		IP: cfg.IP,
	}}
	for _, s := range cfg.Services {
		v.Conf.Services = append(v.Conf.Services, svcState{Name: s.Name, Port: s.Port, HealthPath: s.HealthPath})
	}
	if cfg.Status == statusRunning {
		v.boot(now)
	}
	if cfg.HA != "" {
		state := haStopped
		if v.running() {
			state = haStarted
		}
		v.HA = &haState{Request: cfg.HA, State: state}
	}
	return v
}

// qmUsage is what qm prints for each verb after a parameter error.
var qmUsage = map[string]string{
	"list":         "qm list  [OPTIONS]",
	"status":       "qm status <vmid> [OPTIONS]",
	"start":        "qm start <vmid> [OPTIONS]",
	"shutdown":     "qm shutdown <vmid> [OPTIONS]",
	"reboot":       "qm reboot <vmid> [OPTIONS]",
	"stop":         "qm stop <vmid> [OPTIONS]",
	"config":       "qm config <vmid> [OPTIONS]",
	"snapshot":     "qm snapshot <vmid> <snapname> [OPTIONS]",
	"listsnapshot": "qm listsnapshot <vmid>",
	"rollback":     "qm rollback <vmid> <snapname> [OPTIONS]",
	"delsnapshot":  "qm delsnapshot <vmid> <snapname> [OPTIONS]",
	"destroy":      "qm destroy <vmid> [OPTIONS]",
	"guest":        "qm guest <cmd|exec> <vmid> ...",
}

// qmOptions lists, per verb, the options accepted and whether each is a
// boolean that may be given without a value (the API schemas of
// src/PVE/API2/Qemu.pm).
var qmOptions = map[string]map[string]bool{
	"list":         {"full": true},
	"status":       {"verbose": true},
	"start":        {"skiplock": true, "timeout": false},
	"shutdown":     {"skiplock": true, "forceStop": true, "keepActive": true, "timeout": false},
	"reboot":       {"timeout": false},
	"stop":         {"skiplock": true, "keepActive": true, "overrule-shutdown": true, "timeout": false},
	"config":       {"current": true, "snapshot": false},
	"snapshot":     {"description": false, "vmstate": true},
	"listsnapshot": {},
	"rollback":     {"start": true},
	"delsnapshot":  {"force": true},
	"destroy":      {"purge": true, "skiplock": true, "destroy-unreferenced-disks": true},
}

func qmCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("ERROR: no command specified\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n")
		for _, v := range slices.Sorted(maps.Keys(qmUsage)) {
			c.errf("       %s\n", qmUsage[v])
		}
		return 255
	}
	verb, args := c.args[0], c.args[1:]
	if verb == "guest" {
		return qmGuest(c, args)
	}
	if _, ok := qmOptions[verb]; !ok {
		c.errf("ERROR: unknown command 'qm %s'\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n", verb)
		return 255
	}
	pos, opts, perr := parseArgs(args, qmOptions[verb], qmUsage[verb])
	if perr != nil {
		return c.fail(perr)
	}
	if verb == "list" {
		return qmList(c)
	}
	vm, code := qmFind(c, verb, pos, qmUsage[verb])
	if vm == nil {
		return code
	}
	switch verb {
	case "status":
		c.outf("status: %s\n", vm.Status)
		return 0
	case "config":
		if opts["current"] == "1" && opts["snapshot"] != "" {
			return c.fail(configParamConflict())
		}
		return qmShowConfig(c, vm, opts["snapshot"])
	case "listsnapshot":
		c.outf("%s", listVMSnapshots(vm))
		return 0
	}
	if vm.haManaged() && (verb == "start" || verb == "shutdown" || verb == "stop") {
		// Before the lock check and qm's own "already running": vm_start,
		// vm_shutdown and vm_stop hand an HA resource over first.
		return haRequestVM(c, vm, verb)
	}
	if e := vmLockError(vm); e != "" {
		c.errf("%s", e)
		return 255
	}
	switch verb {
	case "start":
		return qmStart(c, vm)
	case "shutdown":
		return qmShutdown(c, vm, opts)
	case "reboot":
		return qmReboot(c, vm, opts)
	case "stop":
		if vm.running() {
			vm.halt()
			c.dirty = true
		}
		return 0
	case "snapshot":
		return qmSnapshot(c, vm, pos[1], opts)
	case "rollback":
		return qmRollback(c, vm, pos[1], opts["start"] == "1")
	case "delsnapshot":
		return qmDelSnapshot(c, vm, pos[1])
	case "destroy":
		return qmDestroy(c, vm)
	}
	return 0
}

// qmFind reads the vmid (and the snapshot name for the snapshot verbs)
// and returns the VM, or nil and the exit status after an error.
func qmFind(c *call, verb string, pos []string, usage string) (*vmState, int) {
	need := 1
	if verb == "snapshot" || verb == "rollback" || verb == "delsnapshot" {
		need = 2
	}
	switch {
	case len(pos) < need:
		return nil, c.fail(&pveError{"400 not enough arguments\n" + usage + "\n", 255})
	case len(pos) > need:
		return nil, c.fail(&pveError{"400 too many arguments\n" + usage + "\n", 255})
	}
	vmid, err := strconv.Atoi(pos[0])
	if err != nil || vmid < minVMID || vmid > maxVMID {
		return nil, c.fail(&pveError{fmt.Sprintf("400 Parameter verification failed.\nvmid: type check ('integer') failed - got '%s'\n%s\n", pos[0], usage), 255})
	}
	vm := c.hs.VMs[vmid]
	if vm == nil {
		// src/PVE/QemuConfig.pm load_config via PVE::AbstractConfig.
		c.errf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist\n", c.env.host, vmid)
		return nil, 2
	}
	return vm, 0
}

// vmLockError is PVE::AbstractConfig check_lock for a VM: "VM is locked
// (backup)". A rollback of a VM locked for its own snapshot is not
// modelled.
func vmLockError(vm *vmState) string {
	if vm.Lock == "" {
		return ""
	}
	return fmt.Sprintf("VM is locked (%s)\n", vm.Lock)
}

func qmStart(c *call, vm *vmState) int {
	switch {
	case vm.Conf.IsTemplate:
		c.errf("you can't start a vm if it's a template\n")
		return 255
	case vm.running():
		c.errf("VM %d already running\n", vm.VMID)
		return 255
	}
	vm.boot(c.now)
	c.dirty = true
	return 0
}

// qmShutdown asks the guest to power off over ACPI (or the guest agent)
// and waits up to --timeout seconds, 60 by default, for it to go. A VM
// that is already off succeeds at once, as _do_vm_stop returns without a
// pid. A guest that ignores the request fails after the whole timeout.
func qmShutdown(c *call, vm *vmState, opts map[string]string) int {
	timeout := 60
	if v, ok := opts["timeout"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c.fail(&pveError{fmt.Sprintf("400 Parameter verification failed.\ntimeout: type check ('integer') failed - got '%s'\n%s\n", v, qmUsage["shutdown"]), 255})
		}
		timeout = n
	}
	if !vm.running() {
		return 0
	}
	if c.env.faults.inContainer(FaultIgnoreACPI, vm.VMID) && !vm.agentAnswers(c) {
		c.sleep = time.Duration(timeout) * time.Second
		if opts["forceStop"] == "1" {
			c.errf("VM still running - terminating now with SIGTERM\n")
			vm.halt()
			c.dirty = true
			return 0
		}
		c.errf("VM quit/powerdown failed - got timeout\n")
		return 255
	}
	vm.halt()
	c.dirty = true
	return 0
}

func qmReboot(c *call, vm *vmState, opts map[string]string) int {
	if !vm.running() {
		c.errf("VM %d not running\n", vm.VMID)
		return 255
	}
	if c.env.faults.inContainer(FaultIgnoreACPI, vm.VMID) && !vm.agentAnswers(c) {
		timeout, _ := strconv.Atoi(cmp.Or(opts["timeout"], "60"))
		c.sleep = time.Duration(timeout) * time.Second
		c.errf("VM quit/powerdown failed - got timeout\n")
		return 255
	}
	vm.boot(c.now)
	c.dirty = true
	return 0
}

// agentAnswers reports whether the VM's guest agent is configured and
// answers guest-ping. A shutdown then goes through the agent, which a
// guest ignoring ACPI still obeys (_do_vm_stop uses guest-shutdown).
func (vm *vmState) agentAnswers(c *call) bool {
	return vm.running() && vm.Conf.Agent && !c.env.faults.inContainer(FaultAgentHung, vm.VMID)
}

func qmSnapshot(c *call, vm *vmState, name string, opts map[string]string) int {
	switch {
	case !snapNameRE.MatchString(name):
		return c.fail(&pveError{fmt.Sprintf("400 Parameter verification failed.\nsnapname: invalid format - invalid configuration ID '%s'\n\n%s\n", name, qmUsage["snapshot"]), 255})
	case vm.Conf.IsTemplate:
		c.errf("you can't take a snapshot if it's a template\n")
		return 255
	case name == "current" || name == "pending":
		// src/PVE/API2/Qemu.pm snapshot.
		c.errf("unable to use snapshot name '%s' (reserved name)\n", name)
		return 255
	case slices.ContainsFunc(vm.Snapshots, func(s vmSnapshot) bool { return s.Name == name }):
		c.errf("snapshot name '%s' already used\n", name)
		return 255
	}
	vmstate := opts["vmstate"] == "1" && vm.running()
	if vmstate {
		// src/PVE/QemuConfig.pm __snapshot_create_vol_snapshots_hook.
		c.outf("saving VM state and RAM using storage '%s'\n", vm.Conf.Storage)
		c.outf("completed saving the VM state in 2s, saved %s\n", renderBytes(float64(vm.Conf.MemoryMB)*0.4*(1<<20)))
	}
	c.outf("snapshotting 'drive-scsi0' (%s:vm-%d-disk-0)\n", vm.Conf.Storage, vm.VMID)
	c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" created.\n", vm.VMID, name)
	vm.Snapshots = append(vm.Snapshots, vmSnapshot{
		Name: name, Parent: vm.Parent, Taken: c.now, Description: opts["description"], VMState: vmstate, Conf: vm.Conf,
	})
	vm.Parent = name
	c.dirty = true
	return 0
}

// qmRollback puts the VM back at the snapshot: stopped, unless the
// snapshot holds the VM's RAM, which QEMU resumes, or --start is given.
func qmRollback(c *call, vm *vmState, name string, start bool) int {
	i := slices.IndexFunc(vm.Snapshots, func(s vmSnapshot) bool { return s.Name == name })
	if i < 0 {
		c.errf("snapshot '%s' does not exist\n", name)
		return 255
	}
	snap := vm.Snapshots[i]
	vm.halt()
	vm.Conf, vm.Parent = snap.Conf, name
	c.outf("  Logical volume \"vm-%d-disk-0\" successfully removed.\n", vm.VMID)
	c.outf("  Logical volume \"vm-%d-disk-0\" created.\n", vm.VMID)
	if snap.VMState || start {
		vm.boot(c.now)
	}
	if !vm.running() && vm.haManaged() && vm.HA.Request == haStarted {
		// The LRM finds a "started" resource off and starts it.
		vm.HA.Due = c.now.Add(c.env.sim.haDelay)
	}
	c.dirty = true
	return 0
}

func qmDelSnapshot(c *call, vm *vmState, name string) int {
	i := slices.IndexFunc(vm.Snapshots, func(s vmSnapshot) bool { return s.Name == name })
	if i < 0 {
		c.errf("snapshot '%s' does not exist\n", name)
		return 255
	}
	parent := vm.Snapshots[i].Parent
	vm.Snapshots = slices.Delete(vm.Snapshots, i, i+1)
	for j := range vm.Snapshots {
		if vm.Snapshots[j].Parent == name {
			vm.Snapshots[j].Parent = parent
		}
	}
	if vm.Parent == name {
		vm.Parent = parent
	}
	c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" successfully removed.\n", vm.VMID, name)
	c.dirty = true
	return 0
}

// qmDestroy removes a stopped VM and its disks (destroy_vm: protection,
// then "VM <vmid> is running - destroy failed").
func qmDestroy(c *call, vm *vmState) int {
	if vm.Conf.Protection {
		c.errf("can't remove VM %d - protection mode enabled\n", vm.VMID)
		return 255
	}
	if vm.running() {
		c.errf("VM %d is running - destroy failed\n", vm.VMID)
		return 255
	}
	for _, s := range vm.Snapshots {
		c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" successfully removed.\n", vm.VMID, s.Name)
	}
	c.outf("  Logical volume \"vm-%d-disk-0\" successfully removed.\n", vm.VMID)
	delete(c.hs.VMs, vm.VMID)
	if !slices.Contains(c.hs.Destroyed, vm.VMID) {
		c.hs.Destroyed = append(c.hs.Destroyed, vm.VMID)
	}
	c.dirty = true
	return 0
}

// qmList prints qm list as src/PVE/CLI/qm.pm does: nothing on a node
// without VMs, else a header and one line a VM, by vmid.
func qmList(c *call) int {
	if len(c.hs.VMs) == 0 {
		return 0
	}
	c.outf("%10s %-20s %-10s %-10s %12s %-10s\n", "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")
	for _, vmid := range slices.Sorted(maps.Keys(c.hs.VMs)) {
		vm := c.hs.VMs[vmid]
		c.outf("%10d %-20s %-10s %-10d %12.2f %-10d\n", vmid, vm.Conf.Name, vm.Status, vm.Conf.MemoryMB, float64(vm.Conf.DiskGB), vm.pid())
	}
	return 0
}

func (vm *vmState) pid() int {
	if !vm.running() {
		return 0
	}
	return 2000 + int(hashString(vm.Conf.Name)%30000)
}

// qmShowConfig prints `qm config` as the CLI does: every key sorted, one
// "key: value" a line, without digest. The current config and a
// snapshot's differ only by parent, which a snapshot does not carry.
func qmShowConfig(c *call, vm *vmState, snap string) int {
	conf, parent := vm.Conf, vm.Parent
	if snap != "" {
		i := slices.IndexFunc(vm.Snapshots, func(s vmSnapshot) bool { return s.Name == snap })
		if i < 0 {
			c.errf("snapshot '%s' does not exist\n", snap)
			return 255
		}
		conf, parent = vm.Snapshots[i].Conf, ""
	}
	c.outf("%s", qmConfigText(vm.VMID, conf, parent, vm.Lock))
	return 0
}

func qmConfigText(vmid int, conf vmConf, parent, lock string) string {
	kv := map[string]string{
		"boot":    "order=scsi0;net0",
		"cores":   strconv.Itoa(conf.Cores),
		"cpu":     "x86-64-v2-AES",
		"memory":  strconv.Itoa(conf.MemoryMB),
		"meta":    "creation-qemu=9.0.2,ctime=1718000000",
		"name":    conf.Name,
		"net0":    "virtio=" + conf.HWAddr + ",bridge=vmbr0,firewall=1",
		"numa":    "0",
		"ostype":  conf.OSType,
		"scsi0":   fmt.Sprintf("%s:vm-%d-disk-0,iothread=1,size=%dG", conf.Storage, vmid, conf.DiskGB),
		"scsihw":  "virtio-scsi-single",
		"smbios1": "uuid=" + conf.UUID,
		"sockets": "1",
		"vmgenid": conf.UUID,
	}
	if conf.Agent {
		kv["agent"] = "1"
	}
	if conf.Onboot {
		kv["onboot"] = "1"
	}
	if conf.Tags != "" {
		kv["tags"] = conf.Tags
	}
	if conf.Protection {
		kv["protection"] = "1"
	}
	if conf.IsTemplate {
		kv["template"] = "1"
	}
	if parent != "" {
		kv["parent"] = parent
	}
	if lock != "" {
		kv["lock"] = lock
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(&b, "%s: %s\n", k, kv[k])
	}
	return b.String()
}

// listVMSnapshots prints the snapshot tree as pve-guest-common
// PVE::GuestHelpers print_snapshot_tree does, like pct listsnapshot.
func listVMSnapshots(vm *vmState) string {
	var b strings.Builder
	var walk func(parent, indent string)
	walk = func(parent, indent string) {
		for _, s := range vm.Snapshots {
			if s.Parent != parent {
				continue
			}
			fmt.Fprintf(&b, "%s`-> %-20s %s     %s\n", indent, s.Name, s.Taken.UTC().Format("2006-01-02 15:04:05"), s.Description)
			walk(s.Name, indent+"  ")
		}
	}
	walk("", "")
	fmt.Fprintf(&b, "`-> %-20s %-24s %s\n", "current", "", "You are here!")
	return b.String()
}

// qmGuest answers qm guest cmd <vmid> ping and qm guest exec <vmid> --
// <argv>, through assert_agent_available: no agent configured, VM not
// running, agent not answering, in that order.
func qmGuest(c *call, args []string) int {
	if len(args) < 2 || (args[0] != "cmd" && args[0] != "exec") {
		c.errf("ERROR: unknown command 'qm guest %s'\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n", strings.Join(args, " "))
		return 255
	}
	sub := args[0]
	vm, code := qmFind(c, "guest", args[1:2], qmUsage["guest"])
	if vm == nil {
		return code
	}
	rest := args[2:]
	if sub == "cmd" && (len(rest) != 1 || rest[0] != "ping") {
		c.errf("400 Parameter verification failed.\ncommand: value '%s' does not have a value in the enumeration 'fsfreeze-freeze, fsfreeze-status, fsfreeze-thaw, fstrim, get-fsinfo, get-host-name, get-memory-block-info, get-memory-blocks, get-osinfo, get-time, get-timezone, get-users, get-vcpus, info, network-get-interfaces, ping, shutdown, suspend-disk, suspend-hybrid, suspend-ram'\nqm guest cmd <vmid> <command>\n", strings.Join(rest, " "))
		return 255
	}
	switch {
	case !vm.Conf.Agent:
		c.errf("No QEMU guest agent configured\n")
		return 255
	case !vm.running():
		c.errf("VM %d is not running\n", vm.VMID)
		return 255
	case c.env.faults.inContainer(FaultAgentHung, vm.VMID):
		c.sleep = 3 * time.Second // guest-ping's timeout
		c.errf("QEMU guest agent is not running\n")
		return 255
	}
	if sub == "cmd" {
		return 0 // ping answers {}, which $print_agent_result prints as nothing
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		c.errf("No command given\n")
		return 255
	}
	c.outf("%s", perlJSON(guestExecResult(vm, rest)))
	return 0
}

// perlJSON renders a flat object as Perl's to_json with pretty and
// canonical does: keys sorted, three-space indent, " : " between key and
// value.
func perlJSON(m map[string]any) string {
	var b strings.Builder
	b.WriteString("{\n")
	keys := slices.Sorted(maps.Keys(m))
	for i, k := range keys {
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "   %s : %s", kj, vj)
		if i < len(keys)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// guestExecResult is what qemu_exec_status gives once the command exits:
// exitcode, exited and the decoded out-data and err-data. The guest runs
// a few commands an appliance has; others are not found.
func guestExecResult(vm *vmState, argv []string) map[string]any {
	cmd := strings.Join(argv, " ")
	if len(argv) == 3 && (argv[0] == "sh" || argv[0] == "/bin/sh") && argv[1] == "-c" {
		cmd = argv[2]
	}
	res := map[string]any{"exited": 1, "exitcode": 0}
	switch strings.TrimSpace(cmd) {
	case "true", ":":
	case "false":
		res["exitcode"] = 1
	case "hostname":
		res["out-data"] = vm.Conf.Name + "\n"
	case "uptime":
		res["out-data"] = fmt.Sprintf(" %s up %d min,  0 users,  load average: 0.08, 0.05, 0.01\n", time.Now().UTC().Format("15:04:05"), 1+int(time.Since(vm.StartedAt).Minutes()))
	default:
		name, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
		res["exitcode"] = 127
		res["err-data"] = fmt.Sprintf("sh: 1: %s: not found\n", name)
	}
	return res
}

// vmstatus is a VM's entry in /nodes/<node>/qemu, live, with the fields
// src/PVE/QemuServer.pm vmstatus gives it: lock, tags and template only
// where set, pid only while running.
func (vm *vmState) vmstatus(now time.Time) map[string]any {
	d := map[string]any{
		"vmid": vm.VMID, "status": vm.Status, "name": vm.Conf.Name,
		"cpus": vm.Conf.Cores, "maxmem": int64(vm.Conf.MemoryMB) << 20, "maxdisk": int64(vm.Conf.DiskGB) << 30,
		"mem": 0, "disk": 0, "uptime": 0, "cpu": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
	}
	if vm.Conf.Tags != "" {
		d["tags"] = vm.Conf.Tags
	}
	if vm.Conf.IsTemplate {
		d["template"] = 1
	}
	if vm.Lock != "" {
		d["lock"] = vm.Lock
	}
	if vm.running() {
		up := int64(now.Sub(vm.StartedAt).Seconds())
		d["pid"], d["uptime"] = vm.pid(), up
		d["mem"] = int64(vm.Conf.MemoryMB) << 19 // QEMU holds about half once the guest booted
		d["netin"], d["netout"] = up*1200, up*400
	}
	return d
}

// resource is the VM's /cluster/resources entry. labsim broadcasts VM
// stats at once, unlike containers' (see statsInterval).
func (vm *vmState) resource(node string, now time.Time) map[string]any {
	d := vm.vmstatus(now)
	r := map[string]any{"id": fmt.Sprintf("qemu/%d", vm.VMID), "type": "qemu", "node": node, "vmid": vm.VMID,
		"status": vm.Status, "name": vm.Conf.Name, "uptime": d["uptime"], "template": 0,
		"maxcpu": vm.Conf.Cores, "cpu": 0, "maxmem": d["maxmem"], "maxdisk": d["maxdisk"], "mem": d["mem"], "disk": 0,
		"netin": d["netin"], "netout": d["netout"], "diskread": 0, "diskwrite": 0}
	if vm.Conf.IsTemplate {
		r["template"] = 1
	}
	if vm.Lock != "" {
		r["lock"] = vm.Lock
	}
	if vm.Conf.Tags != "" {
		r["tags"] = vm.Conf.Tags
	}
	if vm.HA != nil {
		r["hastate"] = vm.HA.State
	}
	return r
}
