package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// rule classifies one command from its arguments. It returns the command's
// own contribution; commands it runs in turn (sudo's, sh -c's) are
// classified through the analyzer and raise the class themselves.
type rule func(a *analyzer, args []word, depth int) (Class, string)

var rules map[string]rule

// roAny are read-only whatever their arguments: no option makes them write
// a file, change state or run another program.
var roAny = []string{
	"cat", "ls", "df", "du", "free", "uptime", "uname", "whoami", "id", "groups",
	"ps", "pgrep", "pidof", "head", "tail", "wc", "grep", "egrep", "fgrep",
	"zgrep", "zcat", "bzcat", "xzcat", "cut", "tr", "column", "jq", "stat",
	"readlink", "realpath", "basename", "dirname", "which", "whereis", "getent",
	"netstat", "ping", "ping6", "dig", "host", "nslookup", "traceroute",
	"tracepath", "lsblk", "findmnt", "lsof", "vmstat", "iostat",
	"mpstat", "nproc", "lscpu", "lsmem", "lspci", "lsusb", "lsmod", "lsns",
	"last", "w", "who", "users", "printenv", "pwd", "echo", "printf", "true",
	"false", "test", "[", "[[", "sleep", "cd", ":", "md5sum", "sha1sum",
	"sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "cmp",
	"diff", "lsattr", "getfacl", "pveversion", "nl", "rev", "tac", "od",
	"hexdump", "strings", "seq", "expr", "locale", "tty", "lvs", "vgs", "pvs",
	"lvdisplay", "vgdisplay", "pvdisplay", "exit", "type", "dpkg-query",
	"arch", "hostid", "logname", "getconf", "ipcs", "lsipc", "nproc",
}

func init() {
	rules = map[string]rule{}
	for _, n := range roAny {
		rules[n] = func(*analyzer, []word, int) (Class, string) { return ReadOnly, "" }
	}
	deny := func(name, shortDeny string, longDeny ...string) {
		rules[name] = func(_ *analyzer, args []word, _ int) (Class, string) {
			return denyOpts(name, args, shortDeny, longDeny...)
		}
	}
	deny("ss", "K", "kill")
	deny("file", "C", "compile")
	deny("sort", "o", "output", "compress-program")
	deny("dmesg", "cCDEn", "clear", "read-clear", "console-off", "console-on", "console-level")
	deny("journalctl", "", "vacuum-size", "vacuum-time", "vacuum-files", "rotate", "flush",
		"sync", "relinquish-var", "smart-relinquish-var", "setup-keys", "update-catalog", "cursor-file")
	deny("sensors", "s", "set")
	deny("blkid", "cg", "cache-file", "garbage-collect")
	deny("iptables-save", "f", "file")
	deny("ip6tables-save", "f", "file")

	rules["uniq"] = ruleUniq
	rules["hostname"] = ruleHostname
	rules["date"] = ruleDate
	rules["top"] = ruleTop
	rules["systemctl"] = ruleSystemctl
	rules["ip"] = ruleIP
	rules["curl"] = ruleCurl
	rules["wget"] = ruleWget
	rules["apt"] = subRule("apt", set("list", "show", "policy", "search", "depends", "rdepends", "showsrc", "madison", "changelog", "help"), nil)
	rules["apt-cache"] = subRule("apt-cache", set("policy", "show", "showpkg", "showsrc", "search", "depends", "rdepends", "madison", "pkgnames", "stats", "dump", "dumpavail", "unmet"), nil)
	rules["dpkg"] = ruleDpkg
	rules["pct"] = rulePct
	rules["qm"] = subRule("qm", set("list", "status", "config", "listsnapshot", "pending", "showcmd", "help"), set("destroy", "rollback", "delsnapshot"))
	rules["pvesm"] = subRule("pvesm", set("status", "list", "path", "scan", "help", "apiinfo"), set("free"))
	rules["pvecm"] = subRule("pvecm", set("status", "nodes", "help"), set("delnode"))
	rules["pvesh"] = subRule("pvesh", set("get", "ls", "usage", "help"), set("delete"))
	rules["pveam"] = subRule("pveam", set("list", "available", "help"), nil)
	rules["zfs"] = subRule("zfs", set("list", "get", "help", "userspace", "groupspace", "projectspace", "holds", "version"), set("destroy", "rollback"))
	rules["zpool"] = ruleZpool
	rules["docker"] = ruleDocker
	rules["smartctl"] = ruleSmartctl
	rules["resolvectl"] = ruleResolvectl
	for _, n := range []string{"hostnamectl", "timedatectl", "networkctl", "loginctl", "localectl"} {
		rules[n] = ruleCtlStatus(n)
	}
	rules["mount"] = ruleMount
	rules["fdisk"] = partitionRule("fdisk", set("-l", "--list", "-x", "--list-details"), nil, true)
	rules["gdisk"] = partitionRule("gdisk", set("-l"), nil, true)
	rules["sfdisk"] = partitionRule("sfdisk", set("-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify", "-F", "--list-free"), set("-q", "--quiet"), true)
	rules["sgdisk"] = partitionRule("sgdisk", set("-p", "--print", "-O", "--print-mbr", "-v", "--verify"), nil, true)
	rules["cfdisk"] = func(*analyzer, []word, int) (Class, string) { return Destructive, "cfdisk edits partition tables" }
	rules["parted"] = ruleParted
	for _, n := range []string{"iptables", "ip6tables", "iptables-legacy", "iptables-nft", "ip6tables-legacy", "ip6tables-nft"} {
		rules[n] = ruleIptables(n)
	}
	rules["nft"] = ruleNft
	rules["ufw"] = subRule("ufw", set("status", "show", "version"), nil)
	rules["find"] = ruleFind
	rules["crontab"] = ruleCrontab
	rules["nvme"] = subRule("nvme", set("list", "list-subsys", "smart-log", "id-ctrl", "id-ns", "error-log", "fw-log", "show-regs", "version", "help"), set("format", "sanitize", "delete-ns", "write-zeroes", "write", "dsm", "detach-ns"))

	// Programs that run another program.
	rules["sudo"] = ruleSudo
	rules["doas"] = wrapper("doas", "uC", nil)
	rules["nice"] = wrapper("nice", "n", []string{"adjustment"})
	rules["nohup"] = wrapper("nohup", "", nil)
	rules["stdbuf"] = wrapper("stdbuf", "ioe", []string{"input", "output", "error"})
	rules["setsid"] = wrapper("setsid", "", nil)
	rules["builtin"] = wrapper("builtin", "", nil)
	rules["exec"] = wrapper("exec", "a", nil)
	rules["busybox"] = wrapper("busybox", "", nil)
	rules["command"] = ruleCommand
	rules["timeout"] = ruleTimeout
	rules["ionice"] = ruleIonice
	rules["chroot"] = ruleChroot
	rules["time"] = ruleTime
	rules["watch"] = ruleWatch
	rules["flock"] = ruleFlock
	rules["xargs"] = ruleXargs
	rules["env"] = ruleEnv
	rules["su"] = ruleSu
	rules["runuser"] = ruleSu
	for _, n := range []string{"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh"} {
		rules[n] = ruleShell(n)
	}
	rules["eval"] = ruleEval
	rules["alias"] = ruleAlias
	rules["trap"] = ruleTrap
	rules["source"] = func(*analyzer, []word, int) (Class, string) { return ConfigMutation, "source runs a script file" }
	rules["."] = func(*analyzer, []word, int) (Class, string) { return ConfigMutation, ". runs a script file" }
	rules["ssh"] = ruleSSH
	rules["ipmitool"] = ruleIpmitool
	rules["ceph"] = ruleCeph
	rules["ceph-volume"] = ruleCeph
	// Programs that run a command given after options this classifier does
	// not model: never read-only, destructive if their words say so.
	for _, n := range []string{"nsenter", "unshare", "systemd-run", "setpriv", "prlimit", "taskset", "chrt",
		"numactl", "cgexec", "firejail", "strace", "ltrace", "script", "parallel", "at", "batch", "screen",
		"tmux", "sg", "newgrp", "lxc-execute", "expect"} {
		rules[n] = ruleOpaqueWrapper(n)
	}
	rules["lxc-attach"] = ruleLxcAttach

	// Destructive and potentially destructive commands.
	for _, n := range []string{"wipefs", "blkdiscard", "shred", "lvremove", "vgremove", "pvremove", "lvreduce", "qmrestore", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs"} {
		rules[n] = fixed(Destructive, n+" destroys data")
	}
	rules["killall5"] = func(a *analyzer, _ []word, _ int) (Class, string) { return a.power("killall5 kills every process") }
	for _, n := range []string{"shutdown", "poweroff", "halt", "reboot"} {
		rules[n] = rulePower(n)
	}
	rules["init"] = ruleInit
	rules["telinit"] = ruleInit
	rules["kill"] = ruleKill
	rules["rm"] = ruleRm
	rules["mv"] = ruleMv
	for _, n := range []string{"chmod", "chown", "chgrp", "setfacl"} {
		rules[n] = ruleRecursiveOwner(n)
	}
	rules["dd"] = ruleDD
	rules["rsync"] = ruleRsync
	rules["cryptsetup"] = ruleCryptsetup
	rules["mdadm"] = ruleMdadm
	rules["hdparm"] = ruleHdparm
}

func fixed(c Class, why string) rule {
	return func(*analyzer, []word, int) (Class, string) { return c, why }
}

// power is the class of taking a machine down: destructive on a host,
// config_mutation inside a container.
func (a *analyzer) power(why string) (Class, string) {
	if a.onHost {
		return Destructive, why + " on the host"
	}
	return ConfigMutation, why + " in the container"
}

func cfgf(format string, args ...any) (Class, string) {
	return ConfigMutation, fmt.Sprintf(format, args...)
}

func notLiteral(name string) (Class, string) {
	return cfgf("%s has arguments only known at run time", name)
}

// beforeDashDash returns the arguments before a literal "--".
func beforeDashDash(args []word) []word {
	for i, w := range args {
		if w.val == "--" {
			return args[:i]
		}
	}
	return args
}

// hasShort reports whether any short-option cluster (before "--") contains
// one of letters. Clusters are read whole, so a letter inside an attached
// value counts too, which can only err upward.
func hasShort(args []word, letters string) bool {
	if letters == "" {
		return false
	}
	for _, w := range beforeDashDash(args) {
		v := w.val
		if len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsAny(v[1:], letters) {
			return true
		}
	}
	return false
}

// hasLong reports whether any long option (before "--") is one of names or
// an abbreviation of one, as getopt_long accepts.
func hasLong(args []word, names ...string) bool {
	for _, w := range beforeDashDash(args) {
		v, ok := strings.CutPrefix(w.val, "--")
		if !ok || v == "" {
			continue
		}
		v, _, _ = strings.Cut(v, "=")
		for _, n := range names {
			if strings.HasPrefix(n, v) {
				return true
			}
		}
	}
	return false
}

func denyOpts(name string, args []word, shortDeny string, longDeny ...string) (Class, string) {
	if anyDynamic(args) {
		return notLiteral(name)
	}
	if hasShort(args, shortDeny) || hasLong(args, longDeny...) {
		return cfgf("%s with options that change state or write files", name)
	}
	return ReadOnly, ""
}

type opt struct {
	name   string // "-x" or "--name"
	val    string
	hasVal bool
}

type parsed struct {
	opts     []opt
	operands []word
	dynamic  bool
	bad      bool // an option that needs a value has none
}

func (p parsed) has(names ...string) bool {
	return slices.ContainsFunc(p.opts, func(o opt) bool { return slices.Contains(names, o.name) })
}

func (p parsed) value(names ...string) (string, bool) {
	for _, o := range p.opts {
		if slices.Contains(names, o.name) {
			return o.val, true
		}
	}
	return "", false
}

// parseOpts reads getopt-style options. shortVal lists short options that
// take a value, longVal long ones. With stop, the first operand ends option
// parsing (for commands that run another command).
func parseOpts(args []word, shortVal string, longVal []string, stop bool) parsed {
	var p parsed
	done := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.dynamic {
			p.dynamic = true
		}
		v := w.val
		switch {
		case done:
			p.operands = append(p.operands, w)
		case v == "--":
			done = true
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v[2:], "=")
			o := opt{name: "--" + name, val: val, hasVal: has}
			if !has && slices.Contains(longVal, name) {
				if i+1 < len(args) {
					i++
					o.val, o.hasVal = args[i].val, true
					p.dynamic = p.dynamic || args[i].dynamic
				} else {
					p.bad = true
				}
			}
			p.opts = append(p.opts, o)
		case len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				o := opt{name: "-" + v[j:j+1]}
				if strings.IndexByte(shortVal, v[j]) >= 0 {
					switch {
					case j+1 < len(v):
						o.val, o.hasVal = v[j+1:], true
					case i+1 < len(args):
						i++
						o.val, o.hasVal = args[i].val, true
						p.dynamic = p.dynamic || args[i].dynamic
					default:
						p.bad = true
					}
					p.opts = append(p.opts, o)
					break
				}
				p.opts = append(p.opts, o)
			}
		default:
			p.operands = append(p.operands, w)
			if stop {
				done = true
			}
		}
	}
	return p
}

// onlyOpts reports whether every option is in allowed.
func (p parsed) onlyOpts(allowed map[string]bool) (string, bool) {
	for _, o := range p.opts {
		if !allowed[o.name] {
			return o.name, false
		}
	}
	return "", true
}

func ruleUniq(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "fsw", []string{"skip-fields", "skip-chars", "check-chars", "group", "all-repeated"}, false)
	if p.dynamic {
		return notLiteral("uniq")
	}
	if len(p.operands) > 1 {
		return cfgf("uniq with two operands writes the second")
	}
	return ReadOnly, ""
}

func ruleHostname(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "F", []string{"file"}, false)
	if p.dynamic {
		return notLiteral("hostname")
	}
	if len(p.operands) > 0 || p.has("-F", "-b", "--file", "--boot") {
		return cfgf("hostname with an argument sets the hostname")
	}
	return ReadOnly, ""
}

func ruleDate(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "dfr", []string{"date", "file", "reference"}, false)
	if p.dynamic {
		return notLiteral("date")
	}
	if hasShort(args, "s") || hasLong(args, "set") {
		return cfgf("date --set changes the clock")
	}
	for _, o := range p.operands {
		if !strings.HasPrefix(o.val, "+") {
			return cfgf("date with an operand sets the clock")
		}
	}
	return ReadOnly, ""
}

func ruleTop(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "dnpuUoEew", nil, false)
	if p.dynamic {
		return notLiteral("top")
	}
	if !p.has("-b") {
		return cfgf("top without -b is interactive")
	}
	return ReadOnly, ""
}

var systemctlRO = set(
	"status", "is-active", "is-enabled", "is-failed", "is-system-running", "show",
	"cat", "list-units", "list-unit-files", "list-sockets", "list-timers",
	"list-dependencies", "list-jobs", "list-machines", "list-automounts",
	"list-paths", "show-environment", "get-default", "help",
)

var systemctlPower = set(
	"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep",
	"suspend-then-hibernate", "rescue", "emergency", "soft-reboot", "isolate",
	"switch-root",
)

var systemctlOpts = set(
	"--no-pager", "-l", "--full", "-a", "--all", "--no-legend", "--plain", "-q",
	"--quiet", "--value", "-r", "--recursive", "--reverse", "--before", "--after",
	"--failed", "--system", "--user", "--no-ask-password", "--show-types",
	"--with-dependencies", "-t", "--type", "--state", "-p", "--property", "-P",
	"-n", "--lines", "-o", "--output", "-H", "--host", "-M", "--machine",
	"--version", "-h", "--help",
)

func ruleSystemctl(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "tpPnoHM", []string{"type", "state", "property", "lines", "output", "host", "machine", "root"}, true)
	sub := ""
	if len(p.operands) > 0 {
		sub = p.operands[0].val
	}
	if systemctlPower[sub] {
		return a.power("systemctl " + sub + " takes the machine down")
	}
	if len(p.operands) > 0 && p.operands[0].dynamic {
		return a.power("systemctl with a verb only known at run time may take the machine down")
	}
	if p.dynamic {
		return notLiteral("systemctl")
	}
	if o, ok := p.onlyOpts(systemctlOpts); !ok {
		return cfgf("systemctl option %s is not on the read-only list", o)
	}
	if sub == "" || systemctlRO[sub] {
		return ReadOnly, ""
	}
	return cfgf("systemctl %s changes state", sub)
}

var ipOpts = set(
	"-4", "-6", "-0", "-br", "-brief", "--brief", "-c", "-color", "--color", "-d",
	"-details", "-j", "-json", "--json", "-o", "-oneline", "-p", "-pretty", "-r",
	"-resolve", "-s", "-stats", "-statistics", "-t", "-timestamp", "-ts",
	"-tshort", "-h", "-human", "-human-readable", "-a", "-all", "-iec", "-N",
	"-numeric", "-V", "-Version",
)

var ipValueOpts = set("-n", "-netns", "-f", "-family", "-l", "-loops", "-rc", "-rcvbuf")

var ipObjects = []string{
	"address", "addrlabel", "route", "link", "neighbour", "neighbor", "rule",
	"maddress", "mroute", "tunnel", "tuntap", "monitor", "netconf", "ntable",
	"netns", "nexthop", "stats", "token", "tcp_metrics", "vrf", "help",
}

func ruleIP(a *analyzer, args []word, depth int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("ip")
	}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i].val, "-"); i++ {
		v := args[i].val
		switch {
		case ipOpts[v], strings.HasPrefix(v, "-color="), strings.HasPrefix(v, "--color="):
		case ipValueOpts[v]:
			i++
		default:
			return cfgf("ip option %s is not on the read-only list", v)
		}
	}
	if i >= len(args) {
		return ReadOnly, ""
	}
	obj := args[i].val
	if !slices.ContainsFunc(ipObjects, func(o string) bool { return strings.HasPrefix(o, obj) }) {
		return cfgf("ip %s is not on the read-only list", obj)
	}
	if i+1 >= len(args) {
		return ReadOnly, ""
	}
	switch sub := args[i+1].val; sub {
	case "show", "list", "lst", "ls", "get", "help":
		return ReadOnly, ""
	case "exec":
		if strings.HasPrefix("netns", obj) && i+3 < len(args) {
			a.argv(args[i+3:], depth)
		}
		return cfgf("ip netns exec runs a command in another network namespace")
	default:
		return cfgf("ip %s %s changes network state", obj, sub)
	}
}

var curlFlags = set(
	"-s", "--silent", "-S", "--show-error", "-f", "--fail", "--fail-with-body",
	"-L", "--location", "-I", "--head", "-i", "--include", "-v", "--verbose",
	"-k", "--insecure", "--compressed", "-4", "--ipv4", "-6", "--ipv6",
	"--http1.0", "--http1.1", "--http2", "-N", "--no-buffer", "-#",
	"--progress-bar", "-q", "--disable", "--retry-all-errors",
	"--no-progress-meter", "-g", "--globoff", "--no-keepalive", "--path-as-is",
	"-G", "--get", "--tcp-nodelay", "--raw",
)

var curlValueOpts = map[string]bool{
	"-m": true, "--max-time": true, "--connect-timeout": true, "-H": true,
	"--header": true, "-A": true, "--user-agent": true, "-u": true, "--user": true,
	"--retry": true, "--retry-delay": true, "--retry-max-time": true, "-w": true,
	"--write-out": true, "-o": true, "--output": true, "-x": true, "--proxy": true,
	"--noproxy": true, "-e": true, "--referer": true, "-b": true, "--cookie": true,
	"--cacert": true, "--capath": true, "-E": true, "--cert": true, "--key": true,
	"--max-redirs": true, "--resolve": true, "--connect-to": true,
	"--unix-socket": true, "--url": true, "--interface": true, "--limit-rate": true,
	"-D": true, "--dump-header": true, "--oauth2-bearer": true,
}

// ruleCurl allows plain GETs: only the listed options, no request method
// or body, output to stdout or /dev/null only, and http(s) URLs only (other
// schemes such as gopher:// can talk to local services).
func ruleCurl(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("curl")
	}
	shortVal := ""
	for k := range curlValueOpts {
		if len(k) == 2 {
			shortVal += k[1:]
		}
	}
	var long []string
	for k := range curlValueOpts {
		if strings.HasPrefix(k, "--") {
			long = append(long, k[2:])
		}
	}
	p := parseOpts(args, shortVal, long, false)
	if p.bad {
		return cfgf("curl option without its value")
	}
	for _, o := range p.opts {
		switch {
		case curlFlags[o.name]:
		case curlValueOpts[o.name]:
			switch o.name {
			case "-o", "--output", "-D", "--dump-header":
				if o.val != "-" && o.val != "/dev/null" {
					return cfgf("curl %s writes to %s", o.name, o.val)
				}
			case "-w", "--write-out":
				if strings.Contains(o.val, "%output") {
					return cfgf("curl --write-out %%output writes a file")
				}
			case "--url":
				if !httpURL(o.val) {
					return cfgf("curl of a non-http URL")
				}
			}
		default:
			return cfgf("curl option %s may send data or write files", o.name)
		}
	}
	for _, u := range p.operands {
		if !httpURL(u.val) {
			return cfgf("curl of a non-http URL %s", u.val)
		}
	}
	return ReadOnly, ""
}

func httpURL(u string) bool {
	lower := strings.ToLower(u)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		return true
	}
	if strings.Contains(u, "://") || strings.HasPrefix(lower, "file:") {
		return false
	}
	// curl guesses the protocol from these host prefixes.
	for _, p := range []string{"ftp.", "dict.", "ldap.", "imap.", "smtp.", "pop3.", "telnet.", "gopher.", "mqtt."} {
		if strings.HasPrefix(lower, p) {
			return false
		}
	}
	return u != ""
}

func ruleWget(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("wget")
	}
	var norm []word
	for _, w := range args {
		if w.val == "-nv" {
			w.val = "--no-verbose"
		}
		norm = append(norm, w)
	}
	p := parseOpts(norm, "OTtU", []string{"output-document", "timeout", "tries", "header", "user-agent"}, false)
	if p.bad {
		return cfgf("wget option without its value")
	}
	stdout := false
	for _, o := range p.opts {
		switch o.name {
		case "-q", "--quiet", "--no-verbose", "-S", "--server-response", "--no-check-certificate",
			"-T", "--timeout", "-t", "--tries", "--header", "-U", "--user-agent":
		case "--spider":
			stdout = true
		case "-O", "--output-document":
			if o.val != "-" && o.val != "/dev/null" {
				return cfgf("wget -O writes to %s", o.val)
			}
			stdout = true
		default:
			return cfgf("wget option %s may send data or write files", o.name)
		}
	}
	if !stdout {
		return cfgf("wget saves a file unless given -O - or --spider")
	}
	for _, u := range p.operands {
		if !httpURL(u.val) {
			return cfgf("wget of a non-http URL %s", u.val)
		}
	}
	return ReadOnly, ""
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
		if len(destructive) > 0 && len(args) > 0 && args[0].dynamic {
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

func ruleZpool(a *analyzer, args []word, depth int) (Class, string) {
	if len(args) > 0 && args[0].val == "events" {
		if hasShort(args, "c") {
			return cfgf("zpool events -c clears the event log")
		}
	}
	return subRule("zpool", set("status", "list", "get", "iostat", "history", "version", "help", "events"),
		set("destroy", "labelclear", "create", "split"))(a, args, depth)
}

var dpkgRO = set(
	"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "-p",
	"--print-avail", "--get-selections", "--print-architecture",
	"--print-foreign-architectures", "--compare-versions", "--version", "-V",
	"--verify", "-C", "--audit", "--help", "--no-pager",
)

func ruleDpkg(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("dpkg")
	}
	p := parseOpts(args, "", nil, false)
	if len(p.opts) == 0 {
		return cfgf("dpkg without an action")
	}
	if o, ok := p.onlyOpts(dpkgRO); !ok {
		return cfgf("dpkg %s changes packages", o)
	}
	return ReadOnly, ""
}

func rulePct(a *analyzer, args []word, depth int) (Class, string) {
	if len(args) == 0 {
		return cfgf("pct without a subcommand")
	}
	sub := args[0].val
	switch {
	case args[0].dynamic:
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
	case anyDynamic(args):
		return notLiteral("pct")
	}
	switch sub {
	case "list", "status", "config", "listsnapshot", "pending", "df", "cpusets", "help":
		return ReadOnly, ""
	}
	return cfgf("pct %s changes state", sub)
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
	saved := a.onHost
	a.onHost = false
	a.argv(argv, depth)
	a.onHost = saved
}

var dockerRO = set("ps", "images", "logs", "inspect", "stats", "version", "info", "top", "port", "diff", "history", "events", "search")

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
	if p.operands[0].dynamic {
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

func ruleResolvectl(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("resolvectl")
	}
	p := parseOpts(args, "itp", []string{"interface", "type", "protocol", "class"}, false)
	if len(p.operands) == 0 {
		return ReadOnly, ""
	}
	switch sub := p.operands[0].val; sub {
	case "status", "query", "statistics", "show-cache", "show-server-state", "service", "openpgp", "tlsa":
		return ReadOnly, ""
	case "dns", "domain", "llmnr", "mdns", "dnssec", "dnsovertls", "default-route":
		if len(p.operands) <= 2 {
			return ReadOnly, ""
		}
		return cfgf("resolvectl %s with values changes resolver settings", sub)
	default:
		return cfgf("resolvectl %s changes resolver state", sub)
	}
}

func ruleCtlStatus(name string) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		if anyDynamic(args) {
			return notLiteral(name)
		}
		sub := firstOperand(args)
		switch {
		case sub == "", sub == "status", sub == "show", sub == "lldp",
			strings.HasPrefix(sub, "list"), strings.HasPrefix(sub, "show-"),
			strings.HasSuffix(sub, "-status"):
			return ReadOnly, ""
		}
		return cfgf("%s %s changes settings", name, sub)
	}
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

func ruleIptables(name string) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		if anyDynamic(args) {
			return notLiteral(name)
		}
		p := parseOpts(args, "t", []string{"table"}, false)
		listing := p.has("-L", "-S", "--list", "--list-rules")
		if _, ok := p.onlyOpts(set("-L", "--list", "-S", "--list-rules", "-n", "--numeric", "-v", "--verbose", "-x", "--exact", "--line-numbers", "-t", "--table", "-w", "--wait")); !ok || !listing {
			return cfgf("%s changes firewall rules", name)
		}
		return ReadOnly, ""
	}
}

func ruleNft(_ *analyzer, args []word, _ int) (Class, string) {
	if anyDynamic(args) {
		return notLiteral("nft")
	}
	p := parseOpts(args, "", nil, false)
	if _, ok := p.onlyOpts(set("-a", "--handle", "-n", "--numeric", "-j", "--json", "-s", "--stateless", "-t", "--terse", "-N", "-S", "-y")); !ok {
		return cfgf("nft with these options changes or loads rules")
	}
	cmd := joinVals(p.operands)
	if !strings.HasPrefix(cmd, "list ") || strings.ContainsAny(cmd, ";\n") {
		return cfgf("nft changes firewall rules")
	}
	return ReadOnly, ""
}

func ruleFind(a *analyzer, args []word, depth int) (Class, string) {
	for i := 0; i < len(args); i++ {
		switch v := args[i].val; v {
		case "-delete":
			return Destructive, "find -delete deletes files"
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].val != ";" && args[j].val != "+" {
				j++
			}
			inner := args[i+1 : j]
			if len(inner) > 0 {
				base, _ := commandBase(inner[0].val)
				switch base {
				case "rm", "shred", "unlink", "rmdir", "wipefs", "truncate":
					return Destructive, "find " + v + " " + base + " deletes files in bulk"
				}
				a.argv(inner, depth)
			}
			i = j
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			return cfgf("find %s writes a file", v)
		}
	}
	if anyDynamic(args) {
		return Destructive, "find with arguments only known at run time (one could be -delete)"
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

// wrapper runs the command that follows its options.
func wrapper(name, shortVal string, longVal []string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		p := parseOpts(args, shortVal, longVal, true)
		if len(p.operands) == 0 {
			return ReadOnly, ""
		}
		a.argv(p.operands, depth)
		return ReadOnly, ""
	}
}

func ruleSudo(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "CDghpRrTtUu", []string{"chdir", "close-from", "group", "host", "prompt", "role", "type", "command-timeout", "other-user", "user", "chroot"}, true)
	if p.has("-e", "--edit") {
		return cfgf("sudo -e edits files")
	}
	c := ReadOnly
	why := ""
	if p.has("-b", "--background") {
		c, why = ConfigMutation, "sudo -b runs a command in the background"
	}
	switch {
	case len(p.operands) == 0:
		if p.has("-l", "--list", "-v", "--validate", "-k", "-K", "--reset-timestamp", "-V", "--version") {
			return c, why
		}
		return cfgf("sudo without a command opens a shell")
	case p.has("-s", "--shell", "-i", "--login"):
		if anyDynamic(p.operands) {
			return notLiteral("sudo")
		}
		a.script(joinVals(p.operands), depth+1)
	default:
		a.argv(p.operands, depth)
	}
	return c, why
}

func ruleCommand(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "", nil, true)
	if p.has("-v", "-V") || len(p.operands) == 0 {
		return ReadOnly, ""
	}
	a.argv(p.operands, depth)
	return ReadOnly, ""
}

func ruleTimeout(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "sk", []string{"signal", "kill-after"}, true)
	if len(p.operands) < 2 {
		return cfgf("timeout without a command")
	}
	a.argv(p.operands[1:], depth)
	return ReadOnly, ""
}

func ruleIonice(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cnpPu", []string{"class", "classdata", "pid", "pgid", "uid"}, true)
	if p.has("-p", "-P", "-u", "--pid", "--pgid", "--uid") {
		return cfgf("ionice -p changes the priority of running processes")
	}
	if len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return ReadOnly, ""
}

func ruleChroot(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "", []string{"userspec", "groups"}, true)
	if len(p.operands) < 2 {
		return cfgf("chroot without a command opens a shell")
	}
	a.argv(p.operands[1:], depth)
	return ReadOnly, ""
}

func ruleTime(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "fo", []string{"format", "output"}, true)
	c, why := ReadOnly, ""
	if p.has("-o", "--output") {
		c, why = ConfigMutation, "time -o writes a file"
	}
	if len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return c, why
}

func ruleWatch(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "nq", []string{"interval", "equexit"}, true)
	if len(p.operands) == 0 {
		return cfgf("watch without a command")
	}
	if p.has("-x", "--exec") {
		a.argv(p.operands, depth)
		return ReadOnly, ""
	}
	if anyDynamic(p.operands) {
		return notLiteral("watch")
	}
	a.script(joinVals(p.operands), depth+1)
	return ReadOnly, ""
}

func ruleFlock(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "wEc", []string{"timeout", "conflict-exit-code", "command"}, true)
	if cmd, ok := p.value("-c", "--command"); ok {
		a.script(cmd, depth+1)
	} else if len(p.operands) > 1 {
		a.argv(p.operands[1:], depth)
	}
	return cfgf("flock creates a lock file")
}

func ruleXargs(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "adEILnPs", []string{"arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}, true)
	if len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return ReadOnly, ""
}

func ruleEnv(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "uCS", []string{"unset", "chdir", "split-string"}, true)
	if cmd, ok := p.value("-S", "--split-string"); ok {
		if anyDynamic(args) {
			return notLiteral("env -S")
		}
		a.script(cmd+" "+joinVals(p.operands), depth+1)
		return cfgf("env -S splits a string into a command")
	}
	ops := p.operands
	// env's own NAME=value operands come before the command.
	var c Class = ReadOnly
	why := ""
	for len(ops) > 0 && strings.Contains(ops[0].val, "=") {
		c, why = ConfigMutation, "env sets environment variables for the command"
		ops = ops[1:]
	}
	if len(ops) > 0 {
		a.argv(ops, depth)
	}
	return c, why
}

func ruleSu(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cgGswu", []string{"command", "group", "supp-group", "shell", "whitelist-environment", "user"}, false)
	if cmd, ok := p.value("-c", "--command"); ok {
		a.script(cmd, depth+1)
		return ReadOnly, ""
	}
	if p.has("-u", "--user") {
		for i, w := range args {
			if w.val == "--" && i+1 < len(args) {
				a.argv(args[i+1:], depth)
				return ReadOnly, ""
			}
		}
	}
	return cfgf("su without -c opens a shell")
}

// ruleShell follows sh -c SCRIPT into SCRIPT; a shell that reads a file or
// standard input runs something the classifier cannot see.
func ruleShell(name string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		hasC, hasS := false, false
		i := 0
	opts:
		for ; i < len(args); i++ {
			w := args[i]
			v := w.val
			switch {
			case w.dynamic:
				return notLiteral(name)
			case v == "--":
				i++
				break opts
			case v == "--rcfile" || v == "--init-file":
				i++
			case strings.HasPrefix(v, "--"):
			case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
				letters := v[1:]
				if v[0] == '-' && strings.ContainsRune(letters, 'c') {
					hasC = true
				}
				if strings.ContainsRune(letters, 's') {
					hasS = true
				}
				if strings.ContainsAny(letters, "oO") {
					i++
				}
			default:
				break opts
			}
		}
		operands := args[min(i, len(args)):]
		switch {
		case hasC && len(operands) > 0:
			if operands[0].dynamic {
				return notLiteral(name)
			}
			a.script(operands[0].val, depth+1)
			return ReadOnly, ""
		case hasC:
			return cfgf("%s -c without a script", name)
		case hasS || len(operands) == 0:
			return cfgf("%s runs a script from standard input", name)
		default:
			return cfgf("%s runs the script file %s", name, operands[0].val)
		}
	}
}

func ruleEval(a *analyzer, args []word, depth int) (Class, string) {
	if anyDynamic(args) {
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return notLiteral("eval")
	}
	a.script(joinVals(args), depth+1)
	return ReadOnly, ""
}

func ruleAlias(a *analyzer, args []word, depth int) (Class, string) {
	for _, w := range args {
		if _, body, ok := strings.Cut(w.val, "="); ok {
			a.script(body, depth+1)
		}
	}
	return cfgf("alias changes what commands mean")
}

func ruleTrap(a *analyzer, args []word, depth int) (Class, string) {
	if len(args) > 0 && !strings.HasPrefix(args[0].val, "-") {
		a.script(args[0].val, depth+1)
	}
	return cfgf("trap sets a handler")
}

func ruleSSH(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "BbcDEeFIiJLlmOoPpQRSWw", nil, true)
	if len(p.operands) < 2 {
		return cfgf("ssh opens a remote shell")
	}
	remote := p.operands[1:]
	if remote[0].val == "--" {
		remote = remote[1:]
	}
	saved := a.onHost
	a.onHost = true
	a.script(joinVals(remote), depth+1)
	a.onHost = saved
	if c, r := crudeClass(joinRaw(p.operands[1:]), true); c == Destructive {
		return c, r
	}
	return cfgf("ssh runs commands on another machine")
}

func rulePower(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		if name == "shutdown" && (hasShort(args, "c") || hasLong(args, "cancel")) {
			return cfgf("shutdown -c cancels a pending shutdown")
		}
		return a.power(name + " takes the machine down")
	}
}

func ruleInit(a *analyzer, args []word, _ int) (Class, string) {
	if len(args) > 0 {
		switch args[0].val {
		case "0", "6", "1", "s", "S":
			return a.power("init " + args[0].val + " changes the runlevel")
		}
	}
	return cfgf("init changes the runlevel")
}

func ruleKill(a *analyzer, args []word, _ int) (Class, string) {
	i := 0
	if i < len(args) && strings.HasPrefix(args[i].val, "-") && args[i].val != "--" {
		switch args[i].val {
		case "-l", "-L", "--list", "--table":
			return ReadOnly, ""
		case "-s", "-n", "--signal":
			i += 2
		default:
			i++
		}
	}
	if i < len(args) && args[i].val == "--" {
		i++
	}
	for _, w := range args[min(i, len(args)):] {
		if w.val == "1" || w.val == "-1" {
			return a.power("kill of init or every process")
		}
	}
	return cfgf("kill stops processes")
}

// criticalDirs are system directories whose loss breaks the machine, beyond
// the top level (every /x counts).
var criticalDirs = set(
	"/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var/lib",
	"/etc/pve", "/etc/systemd", "/var/lib/vz", "/var/lib/pve-cluster",
	"/var/lib/mysql", "/var/lib/postgresql", "/var/lib/docker", "/var/lib/lxc",
	"/var/lib/lxcfs", "/etc/ssh",
)

// criticalPath reports whether removing, moving or recursively changing p
// would take out a system directory, a home or the working directory.
func criticalPath(p string) bool {
	switch p {
	case "", "-":
		return false
	case "*", ".", "..", "./", "../", ".*", "./*", "~", "~/", "~/*":
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	c := path.Clean(p)
	for {
		t := strings.TrimSuffix(strings.TrimSuffix(c, "/*"), "/.")
		if t == c {
			break
		}
		c = t
	}
	if c == "" || c == "/" || c == "/*" {
		return true
	}
	return strings.Count(c, "/") == 1 || criticalDirs[c]
}

// criticalFile reports whether p lies where deleting or moving anything is
// destroying a guest or the host: Proxmox's cluster configuration, guest
// images, the boot partition, device nodes.
func criticalFile(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	c := path.Clean(p)
	for _, dir := range []string{"/etc/pve/", "/var/lib/vz/", "/var/lib/pve-cluster/", "/boot/", "/dev/"} {
		if strings.HasPrefix(c+"/", dir) {
			return true
		}
	}
	return false
}

func ruleRm(_ *analyzer, args []word, _ int) (Class, string) {
	if hasShort(args, "rR") || hasLong(args, "recursive") {
		return Destructive, "rm -r deletes recursively"
	}
	if hasLong(args, "no-preserve-root") {
		return Destructive, "rm --no-preserve-root"
	}
	p := parseOpts(args, "", nil, false)
	if p.dynamic {
		return Destructive, "rm with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || (o.glob && criticalPath(path.Dir(o.val))) || criticalFile(o.val) {
			return Destructive, "rm of " + o.val
		}
	}
	return cfgf("rm deletes files")
}

func ruleMv(_ *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "St", []string{"suffix", "target-directory"}, false)
	if p.dynamic {
		return Destructive, "mv with arguments only known at run time"
	}
	for _, o := range p.operands {
		if criticalPath(o.val) || criticalFile(o.val) {
			return Destructive, "mv of " + o.val
		}
	}
	return cfgf("mv moves files")
}

func ruleRecursiveOwner(name string) rule {
	return func(_ *analyzer, args []word, _ int) (Class, string) {
		if hasShort(args, "R") || hasLong(args, "recursive") {
			p := parseOpts(args, "", []string{"reference", "from"}, false)
			for _, o := range p.operands {
				if criticalPath(o.val) || o.dynamic {
					return Destructive, fmt.Sprintf("%s -R on %s", name, o.val)
				}
			}
		}
		return cfgf("%s changes permissions", name)
	}
}

func ruleDD(_ *analyzer, args []word, _ int) (Class, string) {
	for _, w := range args {
		if strings.HasPrefix(w.val, "of=") || w.dynamic {
			return Destructive, "dd of= writes raw blocks"
		}
	}
	return cfgf("dd is not on the read-only list")
}

func ruleRsync(_ *analyzer, args []word, _ int) (Class, string) {
	if hasLong(args, "delete", "delete-before", "delete-during", "delete-delay", "delete-after", "delete-excluded", "remove-source-files") {
		return Destructive, "rsync --delete removes files"
	}
	if anyDynamic(args) {
		return Destructive, "rsync with arguments only known at run time"
	}
	return cfgf("rsync writes files")
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

func ruleOpaqueWrapper(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return cfgf("%s runs a command the classifier does not follow", name)
	}
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
