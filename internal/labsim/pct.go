package labsim

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// pctUsage is what pct prints for each verb after a parameter error.
var pctUsage = map[string]string{
	"list":         "pct list",
	"status":       "pct status <vmid> [OPTIONS]",
	"start":        "pct start <vmid> [OPTIONS]",
	"stop":         "pct stop <vmid> [OPTIONS]",
	"shutdown":     "pct shutdown <vmid> [OPTIONS]",
	"reboot":       "pct reboot <vmid> [OPTIONS]",
	"create":       "pct create <vmid> <ostemplate> [OPTIONS]",
	"destroy":      "pct destroy <vmid> [OPTIONS]",
	"config":       "pct config <vmid> [OPTIONS]",
	"set":          "pct set <vmid> [OPTIONS]",
	"snapshot":     "pct snapshot <vmid> <snapname> [OPTIONS]",
	"listsnapshot": "pct listsnapshot <vmid>",
	"rollback":     "pct rollback <vmid> <snapname> [OPTIONS]",
	"delsnapshot":  "pct delsnapshot <vmid> <snapname> [OPTIONS]",
	"exec":         "pct exec <vmid> [<extra-args>] [OPTIONS]",
	"pending":      "pct pending <vmid>",
	"template":     "pct template <vmid>",
}

// pctOptions lists, per verb, the options accepted and whether each is a
// boolean that may be given without a value.
var pctOptions = map[string]map[string]bool{
	"list":         {},
	"status":       {"verbose": true},
	"start":        {"skiplock": true, "debug": true},
	"stop":         {"skiplock": true, "overrule-shutdown": true, "timeout": false},
	"shutdown":     {"forceStop": true, "timeout": false},
	"reboot":       {"timeout": false},
	"destroy":      {"purge": true, "force": true, "destroy-unreferenced-disks": true},
	"config":       {"current": true, "snapshot": false},
	"snapshot":     {"description": false},
	"listsnapshot": {},
	"rollback":     {"start": true},
	"delsnapshot":  {"force": true},
	"pending":      {},
	"template":     {},
	"create": {
		"hostname": false, "cores": false, "memory": false, "swap": false, "net0": false,
		"rootfs": false, "storage": false, "nameserver": false, "searchdomain": false,
		"password": false, "ssh-public-keys": false, "unprivileged": true, "features": false,
		"onboot": true, "start": true, "description": false, "tags": false, "ostype": false,
		"arch": false, "timezone": false, "cpulimit": false, "cpuunits": false, "protection": true,
	},
	"set": {
		"hostname": false, "cores": false, "memory": false, "swap": false, "net0": false,
		"nameserver": false, "searchdomain": false, "onboot": true, "description": false,
		"tags": false, "features": false, "cpulimit": false, "protection": true,
	},
}

// pveError is a failure worded as the Proxmox tools word it.
type pveError struct {
	msg  string
	code int
}

// parsePVEArgs splits PVE CLI arguments into positionals and --options.
func parsePVEArgs(verb string, args []string) ([]string, map[string]string, *pveError) {
	return parseArgs(args, pctOptions[verb], pctUsage[verb])
}

// parseArgs splits the arguments of a PVE CLI verb (pct, qm) whose
// options are allowed and whose usage line is usage.
func parseArgs(args []string, allowed map[string]bool, usage string) ([]string, map[string]string, *pveError) {
	var pos []string
	opts := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		boolean, ok := allowed[name]
		if !ok {
			return nil, nil, &pveError{fmt.Sprintf("Unknown option: %s\n400 unable to parse option\n%s\n", name, usage), 255}
		}
		if !hasVal {
			switch {
			case i+1 < len(args) && (!boolean || isPVEBool(args[i+1])):
				val = args[i+1]
				i++
			case boolean:
				val = "1"
			default:
				return nil, nil, &pveError{fmt.Sprintf("Option %s requires an argument\n400 unable to parse option\n%s\n", name, usage), 255}
			}
		}
		if boolean {
			b, ok := pveBool(val)
			if !ok {
				return nil, nil, &pveError{fmt.Sprintf("400 Parameter verification failed.\n%s: type check ('boolean') failed - got '%s'\n%s\n", name, val, usage), 255}
			}
			val = b
		}
		opts[name] = val
	}
	return pos, opts, nil
}

func isPVEBool(s string) bool {
	_, ok := pveBool(s)
	return ok
}

func pveBool(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "1", "yes", "on", "true":
		return "1", true
	case "0", "no", "off", "false":
		return "0", true
	}
	return "", false
}

func paramError(verb, param, msg string) *pveError {
	return &pveError{fmt.Sprintf("400 Parameter verification failed.\n%s: %s\n%s\n", param, msg, pctUsage[verb]), 255}
}

func (c *call) fail(e *pveError) int {
	c.err.WriteString(e.msg)
	return e.code
}

func pctCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("ERROR: no command specified\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n")
		for _, v := range slices.Sorted(maps.Keys(pctUsage)) {
			c.errf("       %s\n", pctUsage[v])
		}
		return 255
	}
	verb, args := c.args[0], c.args[1:]
	if _, ok := pctUsage[verb]; !ok || verb == "exec" {
		// exec reaches here only without a vmid; the runner handles it otherwise.
		if verb == "exec" {
			return c.fail(&pveError{"400 not enough arguments\n" + pctUsage["exec"] + "\n", 255})
		}
		c.errf("ERROR: unknown command 'pct %s'\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n", verb)
		return 255
	}
	pos, opts, perr := parsePVEArgs(verb, args)
	if perr != nil {
		return c.fail(perr)
	}
	if verb == "list" {
		return pctList(c)
	}
	vmid, perr := pctTarget(verb, pos)
	if perr != nil {
		return c.fail(perr)
	}
	if verb == "create" {
		return pctCreate(c, vmid, pos[1], opts)
	}
	ct := c.hs.Containers[vmid]
	if ct == nil {
		c.errf("%s", configMissing(c.env.host, vmid))
		return 2
	}
	return pctVerb(c, verb, ct, pos, opts)
}

// pctTarget checks the positional arguments of verb and reads the vmid.
func pctTarget(verb string, pos []string) (int, *pveError) {
	need := 1 // the vmid
	if verb == "create" || verb == "snapshot" || verb == "rollback" || verb == "delsnapshot" {
		need = 2
	}
	if len(pos) < need {
		return 0, &pveError{"400 not enough arguments\n" + pctUsage[verb] + "\n", 255}
	}
	if len(pos) > need {
		return 0, &pveError{"400 too many arguments\n" + pctUsage[verb] + "\n", 255}
	}
	vmid, err := strconv.Atoi(pos[0])
	if err != nil {
		return 0, paramError(verb, "vmid", fmt.Sprintf("type check ('integer') failed - got '%s'", pos[0]))
	}
	if vmid < minVMID || vmid > maxVMID {
		return 0, paramError(verb, "vmid", fmt.Sprintf("value must have a minimum value of %d", minVMID))
	}
	return vmid, nil
}

// pctVerb runs a verb on an existing container.
func pctVerb(c *call, verb string, ct *ctState, pos []string, opts map[string]string) int {
	if code, done := pctGuard(c, verb, ct, pos, opts); done {
		return code
	}
	switch verb {
	case "status":
		c.outf("status: %s\n", ct.Status)
		return 0
	case "config":
		if opts["current"] == "1" && opts["snapshot"] != "" {
			return c.fail(configParamConflict())
		}
		return pctShowConfig(c, ct, opts["snapshot"], opts["current"] == "1")
	case "pending":
		return pctPending(c, ct)
	case "template":
		return pctTemplate(c, ct)
	case "start", "stop", "shutdown", "reboot":
		return pctPower(c, verb, ct)
	case "destroy":
		return pctDestroy(c, ct, opts["force"] == "1")
	case "set":
		if code := pctSet(c, ct, opts); code != 0 {
			return code
		}
		c.dirty = true
		return 0
	case "snapshot":
		return pctSnapshot(c, ct, pos[1], opts["description"])
	case "listsnapshot":
		c.outf("%s", listSnapshots(ct))
		return 0
	case "rollback":
		return pctRollback(c, ct, pos[1], opts["start"] == "1")
	case "delsnapshot":
		return pctDelSnapshot(c, ct, pos[1])
	}
	return 0
}

// pctShowConfig prints the container's config, or a snapshot's. Pending
// values show as if live unless current is set (pve-guest-common
// PVE::AbstractConfig load_current_config).
func pctShowConfig(c *call, ct *ctState, snap string, current bool) int {
	if snap == "" {
		conf := ct.Conf
		if ct.Pending != nil && !current {
			conf = *ct.Pending
		}
		c.outf("%s", pctConfigText(ct, conf))
		return 0
	}
	i := slices.IndexFunc(ct.Snapshots, func(s snapshot) bool { return s.Name == snap })
	if i < 0 {
		c.errf("snapshot '%s' does not exist\n", snap)
		return 255
	}
	c.outf("%s", pctConfigText(ct, ct.Snapshots[i].Conf))
	return 0
}

// pctPower starts, stops or reboots a container.
func pctPower(c *call, verb string, ct *ctState) int {
	// The words are pve-container's src/PVE/API2/LXC/Status.pm: vm_reboot
	// says VM, the others CT.
	switch {
	case verb == "start" && ct.running():
		c.errf("CT %d already running\n", ct.VMID)
		return 255
	case verb == "start" && ct.Conf.IsTemplate:
		c.errf("you can't start a CT if it's a template\n")
		return 255
	case verb == "reboot" && !ct.running():
		c.errf("VM %d not running\n", ct.VMID)
		return 255
	case verb != "start" && !ct.running():
		c.errf("CT %d not running\n", ct.VMID)
		return 255
	}
	if verb != "start" {
		ct.halt(c.now)
	}
	if verb == "start" || verb == "reboot" {
		applyPending(c, ct)
		c.errf("%s", nestingWarning(ct))
		ct.boot(c.now)
	}
	c.dirty = true
	return 0
}

func pctDestroy(c *call, ct *ctState, force bool) int {
	vmid := ct.VMID
	if ct.Conf.Protection {
		c.errf("can't remove CT %d - protection mode enabled\n", vmid)
		return 255
	}
	if ct.running() {
		if !force {
			c.errf("unable to destroy CT %d - container is running\n", vmid)
			return 255
		}
		ct.halt(c.now)
	}
	for _, s := range ct.Snapshots {
		c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" successfully removed.\n", vmid, s.Name)
	}
	c.outf("  Logical volume \"vm-%d-disk-0\" successfully removed.\n", vmid)
	delete(c.hs.Containers, vmid)
	if !slices.Contains(c.hs.Destroyed, vmid) {
		c.hs.Destroyed = append(c.hs.Destroyed, vmid)
	}
	c.dirty = true
	return 0
}

// pctList prints pct list as pve-container's src/PVE/CLI/pct.pm does:
// nothing at all, not even the header, on a node without containers.
func pctList(c *call) int {
	if len(c.hs.Containers) == 0 {
		return 0
	}
	c.outf("%-10s %-10s %-12s %-20s\n", "VMID", "Status", "Lock", "Name")
	for _, vmid := range slices.Sorted(maps.Keys(c.hs.Containers)) {
		ct := c.hs.Containers[vmid]
		c.outf("%-10d %-10s %-12s %-20s\n", vmid, ct.Status, ct.Lock, ct.vmstatus(c.now)["name"])
	}
	return 0
}

var storages = map[string]bool{"local-lvm": true, "local": true, "local-zfs": true}

func pctCreate(c *call, vmid int, tpl string, opts map[string]string) int {
	tpl = c.templateVolume(tpl)
	if node := c.st.vmidOwner(c.env.host, vmid); node != "" {
		// pve-cluster check_vmid_unused names the guest's kind.
		kind := "CT"
		if c.st.Hosts[node].VMs[vmid] != nil {
			kind = "VM"
		}
		c.errf("%s %d already exists on node '%s'\n", kind, vmid, node)
		return 255
	}
	if _, ok := templates[tpl]; !ok {
		if !strings.Contains(tpl, ":") {
			c.errf("unable to parse volume ID '%s'\n", tpl)
		} else {
			c.errf("volume '%s' does not exist\n", tpl)
		}
		return 255
	}
	conf := ctConf{
		Hostname:     cmp.Or(opts["hostname"], fmt.Sprintf("CT%d", vmid)),
		Template:     tpl,
		Cores:        1,
		MemoryMB:     512,
		SwapMB:       512,
		DiskGB:       8,
		Storage:      cmp.Or(opts["storage"], "local-lvm"),
		Onboot:       opts["onboot"] == "1",
		Description:  opts["description"],
		Unprivileged: opts["unprivileged"] != "0",
		NoNesting:    true, // unless --features says nesting=1
	}
	if perr := applyConf(&conf, "create", opts); perr != nil {
		return c.fail(perr)
	}
	if rootfs, ok := opts["rootfs"]; ok {
		storage, size, hasStorage := strings.Cut(rootfs, ":")
		if !hasStorage {
			storage, size = conf.Storage, rootfs
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(size, "size="), "G"))
		if err != nil || n < 1 || n > 131072 {
			return c.fail(paramError("create", "rootfs", fmt.Sprintf("invalid format - unable to parse size '%s'", size)))
		}
		conf.Storage, conf.DiskGB = storage, n
	}
	if !storages[conf.Storage] {
		c.errf("storage '%s' does not exist\n", conf.Storage)
		return 255
	}
	ct := c.st.newContainer(c.env.host, vmid, conf, c.now)
	c.hs.Containers[vmid] = ct
	c.hs.Destroyed = slices.DeleteFunc(c.hs.Destroyed, func(id int) bool { return id == vmid })
	c.dirty = true

	blocks := conf.DiskGB * 262144
	fp := fmt.Sprintf("%x", hashString(conf.Hostname+fmt.Sprint(vmid)))
	c.outf("  Logical volume \"vm-%d-disk-0\" created.\n", vmid)
	c.outf("Creating filesystem with %d 4k blocks and %d inodes\n", blocks, blocks/4)
	c.outf("Filesystem UUID: %s-%s-4f2a-9c1e-%012x\n", fp, fp[:4], vmid)
	c.outf("Superblock backups stored on blocks: \n\t32768, 98304, 163840, 229376, 294912, 819200, 884736, 1605632\n\n")
	c.outf("extracting archive '/var/lib/vz/template/cache/%s'\n", strings.TrimPrefix(tpl, "local:vztmpl/"))
	c.outf("Total bytes read: %d (%dMiB, 283MiB/s)\n", templates[tpl].sizeMB*4*1048576, templates[tpl].sizeMB*4)
	c.outf("Detected container architecture: amd64\n")
	for _, kt := range []string{"rsa", "ecdsa", "ed25519"} {
		c.outf("Creating SSH host key 'ssh_host_%s_key' - this may take some time ...\n", kt)
		c.outf("done: SHA256:%s%s root@%s\n", strings.Repeat(fp, 5)[:38], kt[:1], conf.Hostname)
	}
	c.errf("%s", nestingWarning(ct))
	if opts["start"] == "1" {
		ct.boot(c.now)
	}
	return 0
}

// applyConf sets the options pct create and pct set share.
func applyConf(conf *ctConf, verb string, opts map[string]string) *pveError {
	if h, ok := opts["hostname"]; ok {
		if !hostnameRE.MatchString(h) {
			return paramError(verb, "hostname", "value does not match the regex pattern")
		}
		conf.Hostname = h
	}
	for _, f := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"cores", &conf.Cores, 1, 8192}, {"memory", &conf.MemoryMB, 16, 1 << 22}, {"swap", &conf.SwapMB, 0, 1 << 22}} {
		v, ok := opts[f.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return paramError(verb, f.name, fmt.Sprintf("type check ('integer') failed - got '%s'", v))
		}
		if n < f.min {
			return paramError(verb, f.name, fmt.Sprintf("value must have a minimum value of %d", f.min))
		}
		if n > f.max {
			return paramError(verb, f.name, fmt.Sprintf("value must have a maximum value of %d", f.max))
		}
		*f.dst = n
	}
	if ns, ok := opts["nameserver"]; ok {
		for _, a := range strings.Fields(ns) {
			if _, err := netip.ParseAddr(a); err != nil {
				return paramError(verb, "nameserver", fmt.Sprintf("value '%s' does not look like a valid IP address", a))
			}
		}
		conf.Nameserver = strings.Join(strings.Fields(ns), " ")
	}
	if v, ok := opts["onboot"]; ok {
		conf.Onboot = v == "1"
	}
	if v, ok := opts["description"]; ok {
		conf.Description = v
	}
	if perr := applyCreateOptions(conf, verb, opts); perr != nil {
		return perr
	}
	if net0, ok := opts["net0"]; ok {
		ip, gw, hw := "", "", ""
		for _, kv := range strings.Split(net0, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "gw":
				gw = v
			case "hwaddr":
				if _, err := net.ParseMAC(v); err != nil || len(v) != 17 {
					return paramError(verb, "net0", "invalid format - format error\nnet0.hwaddr: invalid format - value does not look like a valid MAC address")
				}
				hw = strings.ToUpper(v)
			case "name", "bridge", "firewall", "tag", "type", "mtu", "rate", "ip6", "gw6":
			default:
				return paramError(verb, "net0", fmt.Sprintf("invalid format - format error\nnet0.%s: property is not defined in schema and the schema does not allow additional properties", k))
			}
		}
		if ip != "" && ip != "dhcp" && ip != "manual" {
			p, err := netip.ParsePrefix(ip)
			if err != nil || !p.Addr().Is4() {
				return paramError(verb, "net0", "invalid format - format error\nnet0.ip: invalid format - value does not look like a valid ipv4 network configuration")
			}
		}
		if gw != "" {
			if _, err := netip.ParseAddr(gw); err != nil {
				return paramError(verb, "net0", "invalid format - format error\nnet0.gw: invalid format - value does not look like a valid ipv4 address")
			}
		}
		if ip == "manual" {
			ip = ""
		}
		conf.IP, conf.Gateway = ip, gw
		if hw != "" {
			conf.HWAddr = hw
		}
	}
	return nil
}

// pctSet changes the config. On a running container only the
// hot-pluggable options apply at once; the others wait in [pve:pending]
// until it starts again (pve-container PVE::LXC::Config update_pct_config).
func pctSet(c *call, ct *ctState, opts map[string]string) int {
	old := ct.Conf
	next := ct.Conf
	if ct.Pending != nil {
		next = *ct.Pending
	}
	if perr := applyConf(&next, "set", opts); perr != nil {
		return c.fail(perr)
	}
	if v, ok := opts["tags"]; ok {
		next.Tags = uniqueTags(v)
	}
	if v, ok := opts["protection"]; ok {
		next.Protection = v == "1"
	}
	if next.IP == "dhcp" && (old.IP != "dhcp" || next.Lease == "") {
		next.Lease, next.Gateway = c.st.lease(c.env.host, next.Gateway)
	}
	if ct.running() {
		applyHot(&ct.Conf, next, opts)
		ct.Pending = &next
		if next == ct.Conf {
			ct.Pending = nil
		}
	} else {
		ct.Conf, ct.Pending = next, nil
	}
	syncGuestFiles(ct, old)
	return 0
}

// syncGuestFiles writes what Proxmox manages inside the container after
// its live config changed from old.
func syncGuestFiles(ct *ctState, old ctConf) {
	if ct.Conf.Hostname != old.Hostname {
		ct.Guest.Files["/etc/hostname"] = ct.Conf.Hostname + "\n"
	}
	if ct.Conf.Nameserver != old.Nameserver || ct.Conf.Gateway != old.Gateway {
		resolver := cmp.Or(ct.Conf.Nameserver, ct.Conf.Gateway)
		var b strings.Builder
		b.WriteString("# --- BEGIN PVE ---\nsearch lan\n")
		for _, ns := range strings.Fields(resolver) {
			fmt.Fprintf(&b, "nameserver %s\n", ns)
		}
		b.WriteString("# --- END PVE ---\n")
		ct.Guest.Files["/etc/resolv.conf"] = b.String()
	}
}

var snapNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{1,39}$`)

func pctSnapshot(c *call, ct *ctState, name, desc string) int {
	if !snapNameRE.MatchString(name) {
		return c.fail(paramError("snapshot", "snapname", fmt.Sprintf("invalid format - invalid configuration ID '%s'", name)))
	}
	if name == "current" || name == "vzdump" {
		c.errf("snapshot name '%s' is reserved\n", name)
		return 255
	}
	if slices.ContainsFunc(ct.Snapshots, func(s snapshot) bool { return s.Name == name }) {
		c.errf("snapshot name '%s' already used\n", name)
		return 255
	}
	ct.Snapshots = append(ct.Snapshots, snapshot{
		Name:        name,
		Parent:      ct.Parent,
		Taken:       c.now,
		Description: desc,
		Conf:        ct.Conf,
		Guest:       ct.Guest.clone(),
	})
	ct.Parent = name
	c.dirty = true
	c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" created.\n", ct.VMID, name)
	return 0
}

func pctRollback(c *call, ct *ctState, name string, start bool) int {
	i := slices.IndexFunc(ct.Snapshots, func(s snapshot) bool { return s.Name == name })
	if i < 0 {
		c.errf("snapshot '%s' does not exist\n", name)
		return 255
	}
	snap := ct.Snapshots[i]
	// LXC snapshots carry no memory, so rolling back leaves the container
	// stopped unless asked to start it.
	ct.Conf = snap.Conf
	ct.Guest = snap.Guest.clone()
	ct.halt(c.now)
	ct.Parent = name
	c.dirty = true
	c.outf("  Logical volume \"vm-%d-disk-0\" successfully removed.\n", ct.VMID)
	c.outf("  Logical volume \"vm-%d-disk-0\" created.\n", ct.VMID)
	if start {
		ct.boot(c.now)
	}
	return 0
}

func pctDelSnapshot(c *call, ct *ctState, name string) int {
	i := slices.IndexFunc(ct.Snapshots, func(s snapshot) bool { return s.Name == name })
	if i < 0 {
		c.errf("snapshot '%s' does not exist\n", name)
		return 255
	}
	parent := ct.Snapshots[i].Parent
	ct.Snapshots = slices.Delete(ct.Snapshots, i, i+1)
	for j := range ct.Snapshots {
		if ct.Snapshots[j].Parent == name {
			ct.Snapshots[j].Parent = parent
		}
	}
	if ct.Parent == name {
		ct.Parent = parent
	}
	c.dirty = true
	c.outf("  Logical volume \"snap_vm-%d-disk-0_%s\" successfully removed.\n", ct.VMID, name)
	return 0
}

// pctConfig renders the container's /etc/pve/lxc/<vmid>.conf.
func pctConfig(ct *ctState) string {
	return rawConf(ct)
}

func pveshCmd(c *call) int {
	if len(c.args) < 2 {
		c.errf("ERROR: no command specified\nUSAGE: pvesh <COMMAND> [ARGS] [OPTIONS]\n")
		return 255
	}
	verb, p := c.args[0], strings.TrimSuffix(c.args[1], "/")
	format := "text"
	var want, typ string
	var tf tableFormat
	for i := 2; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "--output-format" && i+1 < len(c.args):
			format = c.args[i+1]
			i++
		case strings.HasPrefix(a, "--output-format="):
			format = strings.TrimPrefix(a, "--output-format=")
		case a == "--vmid" && i+1 < len(c.args) && p == "/cluster/nextid":
			want = c.args[i+1]
			i++
		case strings.HasPrefix(a, "--vmid=") && p == "/cluster/nextid":
			want = strings.TrimPrefix(a, "--vmid=")
		case a == "--type" && i+1 < len(c.args) && p == "/cluster/resources":
			typ = c.args[i+1]
			i++
		case strings.HasPrefix(a, "--type=") && p == "/cluster/resources":
			typ = strings.TrimPrefix(a, "--type=")
		case a == "--noborder" || a == "--noborder=1":
			tf.noBorder = true
		case a == "--noheader" || a == "--noheader=1":
			tf.noHeader = true
		case a == "--human-readable":
		default:
			c.errf("Unknown option: %s\n400 unable to parse option\n", strings.TrimLeft(a, "-"))
			return 255
		}
	}
	switch {
	case verb == "get" && p == "/cluster/nextid":
		return pveshNextID(c, want, format)
	case verb == "get" && p == "/cluster/resources":
		return pveshResources(c, typ, format)
	case verb == "get" && p == "/cluster/backup":
		return pveshBackupJobs(c, format)
	case verb == "get" && p == "/cluster/replication":
		return pveshClusterReplication(c, format)
	case verb == "get" && nodeReplicationPathRE.MatchString(p):
		return pveshNodeReplication(c, nodeReplicationPathRE.FindStringSubmatch(p)[1], format)
	case verb == "get" && nodeLXCPathRE.MatchString(p):
		return pveshNodeLXC(c, nodeLXCPathRE.FindStringSubmatch(p)[1], format, tf)
	case verb == "get" && nodeQemuPathRE.MatchString(p):
		return pveshNodeQemu(c, nodeQemuPathRE.FindStringSubmatch(p)[1], format, tf)
	case verb == "get" && strings.HasSuffix(p, "/interfaces"):
		return pveshInterfaces(c, p, format)
	}
	c.errf("No '%s' handler defined for '%s'\n", verb, p)
	return 255
}

// pveshNextID answers /cluster/nextid for the node's cluster. The API
// returns an integer, so JSON output is 100, not "100"; a taken --vmid is a
// parameter error (pve-manager PVE/API2/Cluster.pm nextid).
func pveshNextID(c *call, want, format string) int {
	id := c.st.nextIDIn(c.env.host)
	if want != "" {
		n, err := strconv.Atoi(want)
		if err != nil || n < minVMID {
			c.errf("400 Parameter verification failed.\nvmid: type check ('integer') failed - got '%s'\n%s\n", want, pveshGetUsage)
			return 255
		}
		if c.st.vmidOwner(c.env.host, n) != "" {
			c.errf("400 Parameter verification failed.\nvmid: VM %d already exists\n%s\n", n, pveshGetUsage)
			return 255
		}
		id = n
	}
	if id == 0 {
		c.errf("unable to get any free VMID in range [%d, %d]\n", minVMID, maxNextID)
		return 255
	}
	c.outf("%d\n", id) // the same in text and JSON
	return 0
}

// pveshGetUsage is what pvesh adds to a parameter error of pvesh get.
const pveshGetUsage = "pvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]"

var storagePlugins = map[string]string{"local": "dir", "local-lvm": "lvmthin", "local-zfs": "zfspool"}

func pveamCmd(c *call) int {
	if len(c.args) == 0 {
		c.errf("ERROR: no command specified\nUSAGE: pveam <COMMAND> [ARGS] [OPTIONS]\n")
		return 255
	}
	names := slices.Sorted(maps.Keys(templates))
	switch c.args[0] {
	case "list":
		return pveamList(c)
	case "available":
		for _, n := range names {
			c.outf("%-15s %s\n", "system", strings.TrimPrefix(n, "local:vztmpl/"))
		}
		return 0
	case "update":
		c.outf("update successful\n")
		return 0
	}
	c.errf("ERROR: unknown command 'pveam %s'\n", c.args[0])
	return 255
}
