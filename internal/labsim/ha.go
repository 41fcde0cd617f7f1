package labsim

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Proxmox HA, as far as Nomos meets it (pve-ha-manager, pve-container):
//
//   - pct start, shutdown and stop of a container HA manages do not start
//     or stop it. They print "Requesting HA start for CT N" (or stop), ask
//     the HA stack (ha-manager set … --state started, ha-manager
//     crm-command stop …) and exit 0 at once (pve-container
//     src/PVE/API2/LXC/Status.pm vm_start, vm_shutdown, vm_stop). The CRM
//     and the LRM carry the request out on their next rounds, each about
//     10 s long (pve-ha-manager src/PVE/HA/CRM.pm and LRM.pm, max_time
//     10): labsim applies it Config.HADelay later on its clock.
//   - pct destroy of an HA resource without --purge is refused: "unable to
//     remove CT N - used in HA resources and purge parameter not set."
//     (src/PVE/API2/LXC.pm destroy_vm); with --purge the resource goes
//     too.
//   - /cluster/resources gives the CRM's state of the resource as hastate
//     (pve-manager PVE/API2/Cluster.pm).
//   - VMs take part the same way (vm:<vmid> resources): qm start, shutdown
//     and stop print "Requesting HA start for VM N" (or stop) and exit 0
//     (qemu-server src/PVE/API2/Qemu.pm vm_start, vm_shutdown, vm_stop).
//     A rollback stops a running VM itself (QemuConfig.pm
//     __snapshot_rollback_vm_stop), and HA's LRM starts a "started"
//     resource it finds not running on its next round (pve-ha-manager
//     src/PVE/HA/LRM.pm exec_resource_agent), so an HA VM rolled back
//     runs again Config.HADelay later.

const (
	haStarted  = "started"
	haStopped  = "stopped"
	haDisabled = "disabled"
	haIgnored  = "ignored"

	defaultHADelay = 10 * time.Second
)

// haState is a container's HA resource.
type haState struct {
	// Request is the state resources.cfg asks for: started, stopped,
	// disabled or ignored.
	Request string `json:"request"`
	// State is the CRM's service state: started or stopped.
	State string `json:"state"`
	// Due is when the HA stack will have carried Request out; zero when
	// nothing waits.
	Due time.Time `json:"due,omitzero"`
	// Node is where HA starts the container next, when not where it is.
	Node string `json:"node,omitempty"`
}

// haManaged reports whether pct hands the container's power to HA: it has
// a resource that is not ignored (src/PVE/HA/Config.pm vm_is_ha_managed).
func (ct *ctState) haManaged() bool {
	return ct.HA != nil && ct.HA.Request != haIgnored
}

// verbose is the service state ha-manager status shows, with the fast
// feedback of pve-ha-manager's get_verbose_service_state (src/PVE/HA/Tools.pm).
func (h *haState) verbose() string {
	switch {
	case h.Request == haIgnored:
		return haIgnored
	case h.Due.IsZero():
		return h.State
	case h.State == haStopped && h.Request == haStarted:
		return "starting"
	case h.State == haStarted && (h.Request == haStopped || h.Request == haDisabled):
		return "stopping"
	}
	return h.State
}

// settle carries out what is due by now: HA requests and locks that end
// (lock.go). It runs before every command, so labsim needs no clock of
// its own ticking.
func (st *simState) settle(now time.Time) bool {
	changed := false
	for _, ct := range st.all() {
		if !ct.LockUntil.IsZero() && !now.Before(ct.LockUntil) {
			ct.Lock, ct.LockUntil = "", time.Time{}
			changed = true
		}
		h := ct.HA
		if h == nil || h.Due.IsZero() || now.Before(h.Due) {
			continue
		}
		if ct.Lock != "" {
			// The LRM cannot act on a locked guest; it tries again next round.
			h.Due = now.Add(defaultHADelay)
			continue
		}
		switch h.Request {
		case haStarted:
			if !ct.running() {
				st.relocate(ct, h.Node)
				ct.boot(h.Due)
			}
			h.State, h.Node = haStarted, ""
		case haStopped, haDisabled:
			if ct.running() {
				ct.halt(h.Due)
			}
			h.State = haStopped
		}
		h.Due = time.Time{}
		changed = true
	}
	for _, vm := range st.allVMs() {
		h := vm.HA
		if h == nil || h.Due.IsZero() || now.Before(h.Due) {
			continue
		}
		if vm.Lock != "" {
			h.Due = now.Add(defaultHADelay)
			continue
		}
		switch h.Request {
		case haStarted:
			if !vm.running() {
				vm.boot(h.Due)
			}
			h.State = haStarted
		case haStopped, haDisabled:
			if vm.running() {
				vm.halt()
			}
			h.State = haStopped
		}
		h.Due = time.Time{}
		changed = true
	}
	return changed
}

// allVMs are every host's VMs, by vmid.
func (st *simState) allVMs() []*vmState {
	var out []*vmState
	for _, name := range slices.Sorted(maps.Keys(st.Hosts)) {
		for _, v := range st.Hosts[name].VMs {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b *vmState) int { return a.VMID - b.VMID })
	return out
}

// haManaged reports whether qm hands the VM's power to HA.
func (v *vmState) haManaged() bool {
	return v.HA != nil && v.HA.Request != haIgnored
}

// haRequestVM is qm start, shutdown or stop of an HA-managed VM: queued,
// and qm exits 0 at once.
func haRequestVM(c *call, vm *vmState, verb string) int {
	want, word := haStarted, "start"
	if verb != "start" {
		want, word = haStopped, "stop"
	}
	c.outf("Requesting HA %s for VM %d\n", word, vm.VMID)
	vm.HA.Request = want
	vm.HA.Due = c.now.Add(c.env.sim.haDelay)
	c.dirty = true
	return 0
}

// relocate moves a stopped container to node, as HA does when it starts
// it elsewhere; an unknown or empty node leaves it where it is.
func (st *simState) relocate(ct *ctState, node string) {
	from := st.hostOf(ct)
	to := st.Hosts[node]
	if node == "" || node == from || to == nil || !slices.Contains(st.clusterNodes(from), node) {
		return // HA moves a guest only within its cluster
	}
	delete(st.Hosts[from].Containers, ct.VMID)
	to.Containers[ct.VMID] = ct
}

// haRequest is pct start, shutdown or stop of an HA-managed container: the
// request is queued and pct exits 0 before anything has happened.
func haRequest(c *call, ct *ctState, verb string) int {
	want, word := haStarted, "start"
	if verb != "start" {
		want, word = haStopped, "stop"
	}
	c.outf("Requesting HA %s for CT %d\n", word, ct.VMID)
	ct.HA.Request = want
	ct.HA.Due = c.now.Add(c.env.sim.haDelay)
	c.dirty = true
	return 0
}

// purgeRelated is pct destroy --purge after the container itself is
// gone: its replication jobs go (with it, from the state), and its HA
// resource.
func purgeRelated(c *call, ct *ctState) {
	c.outf("purging CT %d from related configurations..\n", ct.VMID)
	if ct.HA != nil {
		c.outf("NOTE: removed CT %d from HA resource configuration.\n", ct.VMID)
	}
}

// haManagerCmd is ha-manager: add, remove, set and status.
func haManagerCmd(c *call) int {
	const usage = "USAGE: ha-manager <COMMAND> [ARGS] [OPTIONS]\n" +
		"       ha-manager add <sid> [OPTIONS]\n" +
		"       ha-manager remove <sid> [OPTIONS]\n" +
		"       ha-manager set <sid> [OPTIONS]\n" +
		"       ha-manager status  [OPTIONS]\n"
	if len(c.args) == 0 {
		c.errf("ERROR: no command specified\n%s", usage)
		return 255
	}
	verb, args := c.args[0], c.args[1:]
	switch verb {
	case "status":
		haStatus(c)
		return 0
	case "add", "set", "remove", "delete":
	default:
		c.errf("ERROR: unknown command 'ha-manager %s'\n%s", verb, usage)
		return 255
	}
	if len(args) == 0 {
		c.errf("400 not enough arguments\nha-manager %s <sid> [OPTIONS]\n", verb)
		return 255
	}
	res, sid, code := haResource(c, args[0])
	if res.slot == nil {
		return code
	}
	state := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--state" && i+1 < len(args) && verb != "remove" && verb != "delete":
			state = args[i+1]
			i++
		case strings.HasPrefix(a, "--state=") && verb != "remove" && verb != "delete":
			state = strings.TrimPrefix(a, "--state=")
		case a == "--comment" && i+1 < len(args) && verb != "remove" && verb != "delete":
			i++
		default:
			c.errf("Unknown option: %s\n400 unable to parse option\nha-manager %s <sid> [OPTIONS]\n", strings.TrimLeft(a, "-"), verb)
			return 255
		}
	}
	switch state {
	case "", haStarted, haStopped, haDisabled, haIgnored:
	case "enabled":
		state = haStarted
	default:
		c.errf("400 Parameter verification failed.\nstate: value '%s' does not have a value in the enumeration 'started, stopped, enabled, disabled, ignored'\n", state)
		return 255
	}
	ha := res.slot
	switch verb {
	case "add":
		if *ha != nil {
			c.errf("resource ID '%s' already defined\n", sid)
			return 255
		}
		cur := haStopped
		if res.running {
			cur = haStarted
		}
		*ha = &haState{Request: cmpOr(state, haStarted), State: cur}
		if (*ha).Request != cur && (*ha).Request != haIgnored {
			(*ha).Due = c.now.Add(c.env.sim.haDelay)
		}
	case "set":
		if *ha == nil {
			c.errf("no such resource '%s'\n", sid)
			return 255
		}
		if state != "" {
			(*ha).Request = state
			(*ha).Due = c.now.Add(c.env.sim.haDelay)
		}
	case "remove", "delete":
		if *ha == nil {
			c.errf("cannot delete service '%s', not HA managed!\n", sid)
			return 255
		}
		*ha = nil
	}
	c.dirty = true
	return 0
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// haGuest is the container or VM an HA service id names: where its HA
// resource is kept, and whether it runs now.
type haGuest struct {
	slot    **haState
	running bool
}

// haResource finds the guest a service id (ct:105, vm:200, or a bare
// vmid) names, anywhere in the cluster.
func haResource(c *call, sid string) (haGuest, string, int) {
	typ, id, typed := strings.Cut(sid, ":")
	if !typed {
		id = sid
	}
	vmid, err := strconv.Atoi(id)
	if err != nil || (typed && typ != "ct" && typ != "vm") || vmid < minVMID {
		c.errf("unable to parse service id '%s'\n", sid)
		return haGuest{}, "", 255
	}
	var g haGuest
	kind := ""
	if _, ct := c.st.findInCluster(c.env.host, vmid); ct != nil {
		g, kind = haGuest{slot: &ct.HA, running: ct.running()}, "ct"
	} else if node := c.st.vmidOwner(c.env.host, vmid); node != "" && c.st.Hosts[node].VMs[vmid] != nil {
		vm := c.st.Hosts[node].VMs[vmid]
		g, kind = haGuest{slot: &vm.HA, running: vm.running()}, "vm"
	}
	switch {
	case kind == "" && !typed:
		c.errf("unable to detect SID from VMID - VM/CT %d does not exist\n", vmid)
		return haGuest{}, "", 255
	case kind == "" && typ == "vm":
		c.errf("VM %d does not exist\n", vmid)
		return haGuest{}, "", 255
	case kind == "":
		c.errf("CT %d does not exist\n", vmid)
		return haGuest{}, "", 255
	case typed && typ != kind:
		c.errf("types does not match\n")
		return haGuest{}, "", 255
	}
	return g, kind + ":" + strconv.Itoa(vmid), 0
}

// haStatus prints ha-manager status: one line per entry of the HA status
// API, "<type> <status>" (pve-ha-manager src/PVE/CLI/ha_manager.pm and
// src/PVE/API2/HA/Status.pm), times in the node's local time as Perl's
// scalar localtime writes them.
func haStatus(c *call) {
	c.outf("quorum OK\n")
	var managed []*ctState
	for _, ct := range c.st.all() {
		if ct.HA != nil {
			managed = append(managed, ct)
		}
	}
	var vms []*vmState
	for _, vm := range c.st.allVMs() {
		if vm.HA != nil {
			vms = append(vms, vm)
		}
	}
	if len(managed)+len(vms) == 0 {
		c.outf("fencing standby (CRM watchdog standby)\n")
		return
	}
	stamp := c.now.UTC().Format("Mon Jan _2 15:04:05 2006")
	nodes := slices.Sorted(maps.Keys(c.st.Hosts))
	c.outf("master %s (active, %s)\n", nodes[0], stamp)
	c.outf("fencing armed (CRM watchdog active)\n")
	for _, n := range nodes {
		active := false
		for _, ct := range managed {
			if c.st.hostOf(ct) == n && ct.HA.Request != haIgnored {
				active = true
			}
		}
		for _, vm := range vms {
			if c.st.Hosts[n].VMs[vm.VMID] == vm && vm.HA.Request != haIgnored {
				active = true
			}
		}
		if active {
			c.outf("lrm %s (active, watchdog active, %s)\n", n, stamp)
		} else {
			c.outf("lrm %s (idle, watchdog standby, %s)\n", n, stamp)
		}
	}
	for _, ct := range managed {
		c.outf("service ct:%d (%s, %s)\n", ct.VMID, c.st.hostOf(ct), ct.HA.verbose())
	}
	for _, vm := range vms {
		c.outf("service vm:%d (%s, %s)\n", vm.VMID, c.st.vmHostOf(vm), vm.HA.verbose())
	}
}

// vmHostOf is the node that has the VM, or "".
func (st *simState) vmHostOf(vm *vmState) string {
	for name, hs := range st.Hosts {
		if hs.VMs[vm.VMID] == vm {
			return name
		}
	}
	return ""
}
