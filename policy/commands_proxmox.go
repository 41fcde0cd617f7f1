package policy

import (
	"path"
	"slices"
	"strings"
)

// addProxmoxRules adds the rules of the proxmox commands.
func addProxmoxRules(rules map[string]rule, modelsPaths map[string]bool) {
	rules["pct"] = rulePct
	rules["qm"] = ruleQm
	rules["pvesm"] = subRule("pvesm", set("status", "list", "path", "scan", "help", "apiinfo"), set("free", "prune-backups"))
	rules["vzdump"] = ruleVzdump
	rules["pvecm"] = subRule("pvecm", set("status", "nodes", "help"), set("delnode"))
	rules["pvesh"] = rulePvesh
	rules["pveam"] = subRule("pveam", set("list", "available", "help"), nil)
	rules["zfs"] = subRule("zfs", set("list", "get", "help", "userspace", "groupspace", "projectspace", "holds", "version"), set("destroy", "rollback"))
	rules["zpool"] = ruleZpool
	rules["docker"] = ruleDocker
	rules["smartctl"] = ruleSmartctl
	rules["mount"] = ruleMount
	rules["fdisk"] = partitionRule("fdisk", set("-l", "--list", "-x", "--list-details"), nil, true)
	rules["gdisk"] = partitionRule("gdisk", set("-l"), nil, true)
	rules["sfdisk"] = partitionRule("sfdisk", set("-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify", "-F", "--list-free"), set("-q", "--quiet"), true)
	rules["sgdisk"] = partitionRule("sgdisk", set("-p", "--print", "-O", "--print-mbr", "-v", "--verify"), nil, true)
	rules["cfdisk"] = fixed(Destructive, "cfdisk edits partition tables")
	rules["parted"] = ruleParted
	rules["crontab"] = ruleCrontab
	rules["nvme"] = subRule("nvme", set("list", "list-subsys", "smart-log", "id-ctrl", "id-ns", "error-log", "fw-log", "show-regs", "version", "help"), set("format", "sanitize", "delete-ns", "write-zeroes", "write", "dsm", "detach-ns"))
	rules["ipmitool"] = ruleIpmitool
	rules["ceph"] = ruleCeph
	rules["ceph-volume"] = ruleCeph
	rules["lxc-attach"] = ruleLxcAttach
	for _, n := range []string{"wipefs", "blkdiscard", "shred", "lvremove", "vgremove", "pvremove", "lvreduce", "qmrestore", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs"} {
		rules[n] = fixed(Destructive, n+" destroys data")
	}
	rules["cryptsetup"] = ruleCryptsetup
	rules["mdadm"] = ruleMdadm
	rules["hdparm"] = ruleHdparm
}

// subRule handles tools whose first argument is a subcommand. Read-only
// needs a read-only subcommand in first position with literal arguments;
// a destructive subcommand anywhere it could be the subcommand is
// destructive.
func subRule(name string, ro, destructive map[string]bool) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		sub := firstOperand(args)
		if destructive[sub] {
			return Destructive, name + " " + sub + " destroys data"
		}
		if len(destructive) > 0 && len(args) > 0 && !args[0].static() {
			return Destructive, name + " with a subcommand only known at run time"
		}
		if len(args) == 0 {
			return cfgf("%s without a subcommand", name)
		}
		if anyDynamic(args) {
			return notLiteral(name)
		}
		if ro[args[0].val] {
			return ReadOnly, ""
		}
		return cfgf("%s %s is not on the read-only list", name, sub)
	}
}

func firstOperand(args []word) string {
	for _, w := range args {
		if !strings.HasPrefix(w.val, "-") {
			return w.val
		}
	}
	return ""
}

// rulePvesh: reading /access shows users, tokens and two-factor entries.
// Writing through the API can do anything the node can, such as
// `pvesh create /nodes/N/status --command reboot` or `/stopall`, so create
// and set are destructive like delete.
func rulePvesh(a *analyzer, args []word, depth int) (Class, string) {
	c, why := subRule("pvesh", set("get", "ls", "usage", "help"), set("delete", "create", "set"))(a, args, depth)
	if sub := firstOperand(args); c == Destructive && (sub == "create" || sub == "set") {
		why = "pvesh " + sub + " writes through the Proxmox API, which can stop or reboot the node"
	}
	if len(args) > 1 && (args[0].val == "get" || args[0].val == "ls") {
		p := path.Clean("/" + args[1].val)
		if under(p, "/access") || !args[1].static() {
			a.secret("pvesh " + args[0].val + " " + args[1].val)
		}
	}
	return c, why
}

func ruleZpool(a *analyzer, args []word, depth int) (Class, string) {
	if len(args) > 0 && args[0].val == "events" {
		if hasShort(args, "c") {
			return cfgf("zpool events -c clears the event log")
		}
	}
	return subRule("zpool", set("status", "list", "get", "iostat", "history", "version", "help", "events"),
		set("destroy", "labelclear", "create", "split"))(a, args, depth)
}

func rulePct(a *analyzer, args []word, depth int) (Class, string) {
	if len(args) == 0 {
		return cfgf("pct without a subcommand")
	}
	sub := args[0].val
	switch {
	case !args[0].static():
		return Destructive, "pct with a subcommand only known at run time"
	case sub == "destroy" || sub == "rollback" || sub == "delsnapshot" || sub == "restore":
		return Destructive, "pct " + sub + " destroys data"
	case sub == "exec":
		for i, w := range args {
			if w.val == "--" && i+1 < len(args) {
				a.inContainer(args[i+1:], depth)
				return ReadOnly, ""
			}
		}
		if len(args) > 2 {
			a.inContainer(args[2:], depth)
		}
		return cfgf("pct exec without -- before the command")
	case sub == "set" || sub == "create":
		if c, why, ok := guestOptions("pct "+sub, args[1:]); ok {
			return c, why
		}
	}
	if anyDynamic(args) {
		return notLiteral("pct")
	}
	switch sub {
	case "list", "status", "config", "listsnapshot", "pending", "df", "cpusets", "help":
		return ReadOnly, ""
	}
	return cfgf("pct %s changes state", sub)
}

// qmSub: qm stop and reset cut a running guest's power ("akin to pulling
// the power plug", qemu-server's own vm_stop description), and monitor
// reaches QEMU's human monitor, from which any disk can be detached.
var qmSub = subRule("qm", set("list", "status", "config", "listsnapshot", "pending", "showcmd", "help"), set("destroy", "rollback", "delsnapshot", "stop", "reset", "monitor"))

// qmAgentReads are the guest agent commands that only read.
var qmAgentReads = set("ping", "info", "get-fsinfo", "get-host-name", "get-osinfo", "get-time", "get-timezone", "get-users", "get-vcpus", "network-get-interfaces", "fsfreeze-status", "get-memory-blocks", "get-memory-block-info")

// ruleQm: qm guest exec runs a program inside a VM through its guest
// agent, so, as for pct exec, the class is that of the program it runs
// there, as in a container. A guest subcommand only known at run time may
// be exec, so what follows the vmid is read that way too.
func ruleQm(a *analyzer, args []word, depth int) (Class, string) {
	sub := ""
	if len(args) > 0 {
		sub = args[0].val
	}
	switch {
	case sub == "set" || sub == "create":
		if c, why, ok := guestOptions("qm "+sub, args[1:]); ok {
			return c, why
		}
	case sub == "unlink" || sub == "disk" && len(args) > 1 && args[1].val == "unlink":
		if forced(args) {
			name := "qm unlink"
			if sub == "disk" {
				name = "qm disk unlink"
			}
			return Destructive, name + " --force erases the disks it unlinks"
		}
	}
	if len(args) == 4 && !anyDynamic(args) && args[0].val == "guest" && args[1].val == "cmd" && qmAgentReads[args[3].val] {
		return ReadOnly, ""
	}
	if len(args) < 2 || !args[0].static() || args[0].val != "guest" || (args[1].static() && args[1].val != "exec") {
		return qmSub(a, args, depth)
	}
	rest := args[2:]
	for i, w := range rest {
		if w.val == "--" && i+1 < len(rest) {
			a.inContainer(rest[i+1:], depth)
			if !args[1].static() {
				return notLiteral("qm")
			}
			return ReadOnly, ""
		}
	}
	if len(rest) > 1 {
		a.inContainer(rest[1:], depth)
	}
	return cfgf("qm guest exec without -- before the command")
}

func ruleLxcAttach(a *analyzer, args []word, depth int) (Class, string) {
	for i, w := range args {
		if w.val == "--" && i+1 < len(args) {
			a.inContainer(args[i+1:], depth)
			return ReadOnly, ""
		}
	}
	if c, r := crudeClass(joinRaw(args), false); c == Destructive {
		return c, r
	}
	return cfgf("lxc-attach without -- opens a shell or runs a command it does not follow")
}

// inContainer classifies a command that runs inside a container.
func (a *analyzer) inContainer(argv []word, depth int) {
	saved, cwds := a.onHost, a.cwds
	a.onHost = false
	a.cwds = []string{"/", "/root"}
	a.argv(argv, depth)
	a.onHost, a.cwds = saved, cwds
}

var dockerRO = set("ps", "images", "logs", "stats", "version", "info", "top", "port", "diff", "history", "events", "search", "inspect")

var dockerGroupRO = map[string]map[string]bool{
	"container": set("ls", "list", "ps", "inspect", "logs", "top", "port", "diff", "stats"),
	"image":     set("ls", "list", "inspect", "history"),
	"volume":    set("ls", "list", "inspect"),
	"network":   set("ls", "list", "inspect"),
	"system":    set("df", "info", "events"),
	"compose":   set("ps", "logs", "ls", "images", "top", "version", "port"),
}

func ruleDocker(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "Hcl", []string{"host", "context", "config", "log-level"}, true)
	if len(p.operands) == 0 {
		return cfgf("docker without a subcommand")
	}
	sub := p.operands[0].val
	rest := p.operands[1:]
	if !p.operands[0].static() {
		return Destructive, "docker with a subcommand only known at run time"
	}
	if sub == "run" || sub == "create" || (sub == "container" && len(rest) > 0 && (rest[0].val == "run" || rest[0].val == "create")) {
		if c, r := crudeClass(joinRaw(rest), false); c == Destructive {
			return c, r
		}
		return cfgf("docker %s starts a container", sub)
	}
	second := ""
	if len(rest) > 0 {
		second = firstOperand(rest)
	}
	if sub == "inspect" || second == "inspect" || (sub == "compose" && second == "config") {
		// Container and image configurations carry their environment.
		a.secret("docker " + strings.TrimSpace(sub+" "+second) + " shows environment variables")
	}
	switch {
	case sub == "exec":
		return dockerExec(a, rest, depth, "euwi", []string{"env", "env-file", "user", "workdir", "detach-keys"})
	case sub == "compose" && second == "exec":
		i := slices.IndexFunc(rest, func(w word) bool { return w.val == "exec" })
		return dockerExec(a, rest[i+1:], depth, "euwi", []string{"env", "user", "workdir", "index"})
	case (sub == "volume" && (second == "rm" || second == "remove" || second == "prune")) ||
		(sub == "system" && second == "prune") || (sub == "container" && second == "prune"):
		return Destructive, "docker " + sub + " " + second + " deletes data"
	case sub == "compose" && (second == "down" || second == "rm") && (hasShort(rest, "v") || hasLong(rest, "volumes")):
		return Destructive, "docker compose " + second + " --volumes deletes volumes"
	case (sub == "rm" || (sub == "container" && second == "rm")) && (hasShort(rest, "v") || hasLong(rest, "volumes")):
		return Destructive, "docker rm --volumes deletes volumes"
	case p.dynamic:
		return notLiteral("docker")
	case len(p.opts) > 0:
		return cfgf("docker with global options is not on the read-only list")
	case dockerRO[sub]:
		return ReadOnly, ""
	case dockerGroupRO[sub] != nil && len(rest) > 0 && dockerGroupRO[sub][rest[0].val]:
		if sub == "compose" && (hasShort(rest, "o") || hasLong(rest, "output")) {
			return cfgf("docker compose with --output writes a file")
		}
		return ReadOnly, ""
	}
	return cfgf("docker %s changes state", strings.TrimSpace(sub+" "+second))
}

func dockerExec(a *analyzer, args []word, depth int, shortVal string, longVal []string) (Class, string) {
	p := parseOpts(args, shortVal, longVal, true)
	if len(p.operands) < 2 {
		return cfgf("docker exec without a command")
	}
	a.inContainer(p.operands[1:], depth)
	return cfgf("docker exec runs a command in an application container")
}

var smartctlOpts = set(
	"-a", "--all", "-i", "--info", "-H", "--health", "-x", "--xall", "-A",
	"--attributes", "-c", "--capabilities", "--scan", "--scan-open", "-j",
	"--json", "-d", "--device", "-l", "--log", "-f", "--format", "-q",
	"--quietmode",
)

func ruleSmartctl(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("smartctl")
	}
	p := parseOpts(args, "dlfq", []string{"device", "log", "format", "quietmode"}, false)
	if o, ok := p.onlyOpts(smartctlOpts); !ok {
		return cfgf("smartctl %s changes drive settings or runs tests", o)
	}
	if v, ok := p.value("-l", "--log"); ok && strings.Contains(v, ",") {
		return cfgf("smartctl -l %s changes drive settings", v)
	}
	return ReadOnly, ""
}

func ruleMount(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("mount")
	}
	p := parseOpts(args, "t", []string{"types"}, false)
	if _, ok := p.onlyOpts(set("-l", "--show-labels", "-t", "--types", "-v", "--verbose")); !ok || len(p.operands) > 0 {
		return cfgf("mount with arguments mounts filesystems")
	}
	return ReadOnly, ""
}

// partitionRule: read-only with one of the listing options and nothing
// else; anything else edits a partition table and is destructive.
func partitionRule(name string, listing, extra map[string]bool, needListing bool) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		if anyDynamic(args) {
			return Destructive, name + " with arguments only known at run time may edit partition tables"
		}
		p := parseOpts(args, "i", []string{"info"}, false)
		listed := false
		for _, o := range p.opts {
			switch {
			case listing[o.name]:
				listed = true
			case extra[o.name], name == "sgdisk" && (o.name == "-i" || o.name == "--info"):
			default:
				return Destructive, name + " " + o.name + " edits partition tables"
			}
		}
		if needListing && !listed && !(name == "sgdisk" && p.has("-i", "--info")) {
			return Destructive, name + " edits partition tables"
		}
		return ReadOnly, ""
	}
}

var partedRO = set("print", "p", "unit", "s", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "%", "cyl", "chs", "compact", "free", "list")

func ruleParted(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return Destructive, "parted with arguments only known at run time may edit partition tables"
	}
	p := parseOpts(args, "", nil, false)
	if _, ok := p.onlyOpts(set("-l", "--list", "-s", "--script", "-m", "--machine")); !ok {
		return Destructive, "parted edits partition tables"
	}
	if p.has("-l", "--list") && len(p.operands) == 0 {
		return ReadOnly, ""
	}
	if len(p.operands) < 2 {
		return Destructive, "parted edits partition tables"
	}
	for _, o := range p.operands[1:] {
		if !partedRO[strings.ToLower(o.val)] {
			return Destructive, "parted " + o.val + " edits partition tables"
		}
	}
	return ReadOnly, ""
}

func ruleCrontab(_ *analyzer, args []word, _ int) (Class, string) {
	if hasShort(args, "r") {
		return Destructive, "crontab -r deletes every cron job"
	}
	if !anyDynamic(args) && len(args) == 1 && args[0].val == "-l" {
		return ReadOnly, ""
	}
	return cfgf("crontab changes scheduled jobs")
}

func ruleIpmitool(a *analyzer, args []word, _ int) (Class, string) {
	for i, w := range args {
		if w.val == "power" && i+1 < len(args) {
			switch args[i+1].val {
			case "off", "cycle", "reset", "soft", "diag":
				return Destructive, "ipmitool power " + args[i+1].val + " takes a machine down"
			}
		}
	}
	return cfgf("ipmitool talks to a baseboard controller")
}

func ruleCeph(_ *analyzer, args []word, _ int) (Class, string) {
	for _, w := range args {
		switch w.val {
		case "destroy", "purge", "rm", "remove", "delete", "zap", "rmfailed":
			return Destructive, "ceph " + w.val + " destroys data"
		}
		if w.dynamic {
			return Destructive, "ceph with arguments only known at run time"
		}
	}
	return cfgf("ceph changes the cluster")
}

func ruleCryptsetup(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "cdhiklLsStT", []string{"cipher", "key-file", "hash", "iter-time", "key-size", "key-slot", "type", "pbkdf", "label"}, false)
	action := ""
	if len(p.operands) > 0 {
		action = p.operands[0].val
	}
	switch action {
	case "luksFormat", "erase", "luksErase", "luksKillSlot", "reencrypt", "format":
		return Destructive, "cryptsetup " + action + " destroys keys or data"
	case "status", "luksDump", "isLuks", "luksUUID", "tcryptDump", "bitlkDump", "benchmark":
		if !p.dynamic {
			return ReadOnly, ""
		}
	}
	return cfgf("cryptsetup %s changes encrypted devices", action)
}

func ruleMdadm(_ *analyzer, args []word, _ int) (Class, string) {
	if hasLong(args, "zero-superblock", "create") || hasShort(args, "C") {
		return Destructive, "mdadm --create or --zero-superblock overwrites disks"
	}
	p := parseOpts(args, "", nil, false)
	if _, ok := p.onlyOpts(set("--detail", "-D", "--examine", "-E", "--query", "-Q", "--scan", "-s", "--brief", "-b", "-v", "--verbose")); ok && !p.dynamic && len(p.opts) > 0 {
		return ReadOnly, ""
	}
	return cfgf("mdadm changes RAID arrays")
}

func ruleHdparm(_ *analyzer, args []word, _ int) (Class, string) {
	if hasLong(args, "security-erase", "security-erase-enhanced", "trim-sector-ranges", "trim-sector-ranges-stdin", "make-bad-sector", "write-sector", "dco-restore", "dco-setmax") {
		return Destructive, "hdparm erases or overwrites sectors"
	}
	return cfgf("hdparm changes drive settings")
}

// guestOptions judges the options of pct set and create, and qm set and
// create, that reach past the guest's own configuration: --delete unusedN
// erases the volume, --mpN and --devN give a container a path or device of
// the host, and --hookscript runs a script on the host at every start and
// stop. ok is false when none is given. Proxmox reads -name as --name and
// --name=value as --name value.
func guestOptions(cmd string, args []word) (c Class, why string, ok bool) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.static() {
			if i == 0 || !strings.HasPrefix(args[i-1].val, "-") || strings.Contains(args[i-1].val, "=") {
				return Destructive, cmd + " with an option only known at run time (" + w.raw + "), which may be --delete unused0", true
			}
			continue
		}
		if !strings.HasPrefix(w.val, "-") {
			continue
		}
		name, val, has := strings.Cut(strings.TrimLeft(w.val, "-"), "=")
		vw := sub(w, val)
		if !has && i+1 < len(args) {
			vw = args[i+1]
			val = vw.val
		}
		switch {
		case name == "delete":
			if !vw.static() {
				return Destructive, cmd + " --delete of volumes only known at run time may erase them", true
			}
			for _, item := range strings.Split(val, ",") {
				if strings.HasPrefix(strings.TrimSpace(item), "unused") {
					return Destructive, cmd + " --delete " + strings.TrimSpace(item) + " erases the volume", true
				}
			}
		case name == "hookscript":
			return Destructive, cmd + " --hookscript runs " + val + " on the host at every start and stop of the guest", true
		case strings.HasPrefix(cmd, "pct") && guestKey(name, "mp"):
			return Destructive, cmd + " --" + name + " gives the container the host path " + val, true
		case strings.HasPrefix(cmd, "pct") && guestKey(name, "dev"):
			return Destructive, cmd + " --" + name + " gives the container the host device " + val, true
		}
	}
	return ReadOnly, "", false
}

// guestKey reports whether name is prefix followed by an index, as mp0.
func guestKey(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && rest != "" && allBytes(rest, isDigit)
}

// forced reports whether a Proxmox command is given --force (or -force)
// with a value other than 0.
func forced(args []word) bool {
	for i, w := range args {
		name, val, has := strings.Cut(strings.TrimLeft(w.val, "-"), "=")
		if !strings.HasPrefix(w.val, "-") || name != "force" {
			continue
		}
		if !has && i+1 < len(args) && (args[i+1].val == "0" || args[i+1].val == "1") {
			val = args[i+1].val
		}
		if val != "0" {
			return true
		}
	}
	return false
}

// ruleVzdump: vzdump prunes older backups by the storage's retention
// unless --remove 0 says otherwise, and --prune-backups (or the old
// --maxfiles) sets what it keeps; either deletes backups.
func ruleVzdump(a *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return Destructive, "vzdump with arguments only known at run time may delete backups"
	}
	keep := false
	for i, w := range args {
		name, val, has := strings.Cut(strings.TrimLeft(w.val, "-"), "=")
		if !strings.HasPrefix(w.val, "-") {
			continue
		}
		if !has && i+1 < len(args) {
			val = args[i+1].val
		}
		switch name {
		case "remove":
			keep = val == "0"
			if !keep {
				return Destructive, "vzdump --remove deletes older backups"
			}
		case "prune-backups", "maxfiles":
			if val != "keep-all=1" {
				return Destructive, "vzdump --" + name + " deletes older backups"
			}
		}
	}
	if !keep {
		return Destructive, "vzdump deletes older backups by the storage's retention unless given --remove 0"
	}
	return a.opaqueClass("vzdump is not on the read-only list")
}
