package hostgate

import (
	"errors"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nomoshq/nomos/policy"
)

// Rules are what the host's rules file can change about the allowlist.
type Rules struct {
	// HostShell allows sh -c SCRIPT on the host itself, which is what the
	// run action sends. Off by default: with it on, the key is root on the
	// host again for whoever can get a run plan approved.
	HostShell bool
	// PrivilegedContainers allows pct create of a privileged container
	// (--unprivileged 0, or no --unprivileged at all, which Proxmox takes
	// as privileged), what pct_create's privileged parameter sends. Off
	// by default: root in a privileged container is close to root on the
	// host, and pct exec reaches it.
	PrivilegedContainers bool
	// HostUnits are the units on the node itself that systemctl may
	// change, each with the verbs it may use. Without an entry, systemctl
	// on the node may only ask (is-active, status); a .target is never
	// allowed. Commands in a container, through pct exec, are not
	// affected.
	HostUnits []HostUnit
}

// Check parses command and checks its argv against the allowlist. It
// returns the argv to run, or an error wrapping ErrRefused.
func Check(command string, r Rules) ([]string, error) {
	argv, err := Parse(command)
	if err != nil {
		return nil, err
	}
	if err := Allowed(argv, r); err != nil {
		return nil, err
	}
	return argv, nil
}

// Allowed reports whether argv is one of the command forms Nomos sends to
// a host, returning an error wrapping ErrRefused that says why not.
func Allowed(argv []string, r Rules) error {
	if len(argv) == 0 {
		return refusef("no command")
	}
	name, args := argv[0], argv[1:]
	switch name {
	case "pct":
		return allowPct(args, r)
	case "qm":
		return allowQm(args)
	case "pvesh":
		return allowPvesh(args)
	case "pveam":
		return allowForm("pveam", args, form{args: []value{exact("list"), storage}})
	case "pvesm":
		if len(args) > 0 && args[0] == "list" {
			// A storage's backups, and nothing else on it: of one guest
			// (a preview's read) or of all (the inventory's).
			switch len(args) {
			case 4:
				return allowForm("pvesm", args, form{args: []value{exact("list"), storage}, opts: map[string]value{"--content": exact("backup")}})
			case 6:
				return allowForm("pvesm", args, form{args: []value{exact("list"), storage}, opts: map[string]value{"--content": exact("backup"), "--vmid": vmid}})
			}
			return refusef("pvesm list: want pvesm list STORAGE --content backup [--vmid VMID]")
		}
		return allowForm("pvesm", args, form{args: []value{exact("status")}, opts: map[string]value{"--content": exact("vztmpl")}})
	case "ping":
		return allowForm("ping", args, form{args: []value{exact("-c"), exact("3"), exact("-W"), exact("2"), host}})
	case "curl":
		return allowForm("curl", args, form{args: []value{
			exact("-sS"), exact("-o"), exact("/dev/null"), exact("-w"), exact("%{http_code}"), exact("--max-time"), exact("10"), healthURL,
		}})
	case "systemctl":
		return allowHostSystemctl(args, r)
	case "journalctl":
		return allowJournal("journalctl", args)
	case "shutdown":
		// node_reboot's: a reboot in a minute, nothing else (no halt, no
		// power-off, no wall message).
		return allowForm("shutdown", args, form{args: []value{exact("-r"), exact("+1")}})
	case "apt-get", "apt":
		// apt_upgrade on the node: the same update and listing as in a
		// container.
		return allowForm(name, args, guestForms[name])
	case "env":
		return allowNodeUpgrade(args)
	case "sh":
		if !r.HostShell {
			return refusef("a shell on the host itself (sh -c, which the run action sends) is off; set host_shell: true in %s to allow it", DefaultRulesFile)
		}
		return allowShell("sh", args)
	}
	if f, ok := probeForms[name]; ok {
		return allowForm(name, args, f)
	}
	return refusef("%s is not a command nomos sends to a host", q(name))
}

// value checks one argument or option value.
type value func(string) error

// form is a command's shape: fixed positional arguments, then options
// given as "--name value", each at most once.
type form struct {
	args []value
	opts map[string]value
}

func allowForm(name string, args []string, f form) error {
	for i, check := range f.args {
		if i == len(args) {
			return refusef("%s: want %d arguments, got %d", name, len(f.args), len(args))
		}
		if err := check(args[i]); err != nil {
			return refusef("%s: argument %d: %v", name, i+1, err)
		}
	}
	args = args[len(f.args):]
	seen := map[string]bool{}
	for len(args) > 0 {
		opt := args[0]
		check, ok := f.opts[opt]
		switch {
		case !ok:
			return refusef("%s: %s is not an argument or option nomos sends", name, q(opt))
		case seen[opt]:
			return refusef("%s: option %s given twice", name, opt)
		case len(args) < 2:
			return refusef("%s: option %s needs a value", name, opt)
		}
		if err := check(args[1]); err != nil {
			return refusef("%s: option %s: %v", name, opt, err)
		}
		seen[opt] = true
		args = args[2:]
	}
	return nil
}

// pctForms are the pct subcommands Nomos sends, with the options it may
// use. None takes --skiplock, and create takes no option that reaches the
// host's files or devices (mount points, hook scripts, device passthrough,
// raw lxc keys, keys or passwords). Of the features it takes nesting alone
// (keyctl, fuse, mknod and mount reach further into the host), of tags
// only Nomos's own, and a description only as one line of plain text.
var pctForms = map[string]form{
	"list":         {},
	"status":       {args: []value{vmid}, opts: map[string]value{"--verbose": boolean}},
	"start":        {args: []value{vmid}},
	"stop":         {args: []value{vmid}},
	"shutdown":     {args: []value{vmid}, opts: map[string]value{"--timeout": seconds, "--forceStop": boolean}},
	"reboot":       {args: []value{vmid}, opts: map[string]value{"--timeout": seconds}},
	"config":       {args: []value{vmid}, opts: map[string]value{"--current": boolean}},
	"listsnapshot": {args: []value{vmid}},
	"snapshot":     {args: []value{vmid, snapshot}},
	"rollback":     {args: []value{vmid, snapshot}, opts: map[string]value{"--start": boolean}},
	"delsnapshot":  {args: []value{vmid, snapshot}},
	"destroy":      {args: []value{vmid}, opts: map[string]value{"--purge": boolean}},
	"create": {args: []value{vmid, template}, opts: map[string]value{
		"--hostname":     wrap(policy.ValidateHostname),
		"--cores":        number(1, 128),
		"--memory":       number(16, 1<<20),
		"--rootfs":       rootfs,
		"--net0":         net0,
		"--unprivileged": boolean,
		"--features":     exact("nesting=1"),
		"--onboot":       boolean,
		"--tags":         exact(policy.CreateTag),
		"--description":  description,
		"--nameserver":   ipv4,
	}},
}

func allowPct(args []string, r Rules) error {
	if len(args) == 0 {
		return refusef("pct without a subcommand")
	}
	sub, rest := args[0], args[1:]
	if sub == "exec" {
		return allowPctExec(rest)
	}
	f, ok := pctForms[sub]
	if !ok {
		return refusef("pct %s is not a pct subcommand nomos sends", q(sub))
	}
	if err := allowForm("pct "+sub, rest, f); err != nil {
		return err
	}
	if sub == "create" && !r.PrivilegedContainers && !slices.Contains(optionPairs(rest[len(f.args):]), "--unprivileged 1") {
		return refusef("a privileged container (pct create without --unprivileged 1, which pct_create's privileged sends) is off; set privileged_containers: true in %s to allow it", DefaultRulesFile)
	}
	return nil
}

// qmForms are the qm subcommands Nomos sends to a VM, each in the one
// shape the catalogue renders it: no --skiplock, no --forceStop (a VM
// that ignores a shutdown fails the step; stopping it is its own,
// destructive action), and none of set, importdisk, disk, monitor,
// terminal, vncproxy or sendkey, which reach the VM's config, disks or
// console.
var qmForms = map[string]form{
	"list":         {},
	"status":       {args: []value{vmid}},
	"config":       {args: []value{vmid}, opts: map[string]value{"--current": exact("1")}},
	"listsnapshot": {args: []value{vmid}},
	"start":        {args: []value{vmid}},
	"shutdown":     {args: []value{vmid}, opts: map[string]value{"--timeout": number(1, policy.MaxShutdownTimeout)}},
	"reboot":       {args: []value{vmid}},
	"stop":         {args: []value{vmid}},
	"snapshot":     {args: []value{vmid, snapshot}, opts: map[string]value{"--vmstate": exact("1")}},
	"rollback":     {args: []value{vmid, snapshot}},
	"delsnapshot":  {args: []value{vmid, snapshot}},
	"destroy":      {args: []value{vmid, exact("--purge"), exact("1")}},
}

func allowQm(args []string) error {
	if len(args) == 0 {
		return refusef("qm without a subcommand")
	}
	sub, rest := args[0], args[1:]
	if sub == "guest" {
		return allowQmGuest(rest)
	}
	f, ok := qmForms[sub]
	if !ok {
		return refusef("qm %s is not a qm subcommand nomos sends", q(sub))
	}
	return allowForm("qm "+sub, rest, f)
}

// allowQmGuest accepts the guest agent's ping, the health probe, and
// qm guest exec VMID -- sh -c SCRIPT, what pct_exec renders for a VM.
func allowQmGuest(args []string) error {
	if len(args) == 3 && args[0] == "cmd" && args[2] == "ping" {
		if err := vmid(args[1]); err != nil {
			return refusef("qm guest cmd: %v", err)
		}
		return nil
	}
	if len(args) < 4 || args[0] != "exec" || args[2] != "--" {
		return refusef("qm guest: want qm guest cmd VMID ping or qm guest exec VMID -- sh -c SCRIPT")
	}
	if err := vmid(args[1]); err != nil {
		return refusef("qm guest exec: %v", err)
	}
	if args[3] != "sh" {
		return refusef("qm guest exec: %s is not a command nomos runs in a VM", q(args[3]))
	}
	return allowShell("qm guest exec: sh", args[4:])
}

// optionPairs joins checked "--name value" pairs into single strings.
func optionPairs(opts []string) []string {
	var out []string
	for i := 0; i+1 < len(opts); i += 2 {
		out = append(out, opts[i]+" "+opts[i+1])
	}
	return out
}

// allowPctExec accepts pct exec VMID -- COMMAND for the commands the actions
// and probes run inside a container.
func allowPctExec(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return refusef("pct exec: want pct exec VMID -- COMMAND")
	}
	if err := vmid(args[0]); err != nil {
		return refusef("pct exec: %v", err)
	}
	guest := args[2:]
	name, rest := guest[0], guest[1:]
	switch name {
	case "sh":
		return allowShell("pct exec: sh", rest)
	case "env":
		return allowEnv(rest)
	case "journalctl":
		return allowJournal("pct exec: journalctl", rest)
	}
	if name == "apt-get" && slices.Equal(rest, []string{"-s", "upgrade"}) {
		// The upgrade preview: a simulation, which changes nothing.
		return nil
	}
	f, ok := guestForms[name]
	if !ok {
		f, ok = probeForms[name]
	}
	if !ok {
		return refusef("pct exec: %s is not a command nomos runs in a container", q(name))
	}
	return allowForm("pct exec: "+name, rest, f)
}

// allowShell accepts sh -c SCRIPT and sh -e -c SCRIPT. Whoever approved the
// plan approved the script.
func allowShell(name string, args []string) error {
	if slices.Equal(args[:min(2, len(args))], []string{"-e", "-c"}) {
		args = args[1:]
	}
	if len(args) != 2 || args[0] != "-c" {
		return refusef("%s: want sh -c SCRIPT", name)
	}
	return nil
}

// probeForms run on the host or, through pct exec, in a container: the
// probes and, in a container only, the systemctl actions on a service (on
// the host, see allowHostSystemctl).
var probeForms = map[string]form{
	"systemctl": {args: []value{oneOf("start", "stop", "restart", "reload", "enable", "disable", "is-active"), wrap(policy.ValidateUnit)}},
	"ss":        {args: []value{exact("-ltn")}},
	"df":        {args: []value{exact("-P"), path}},
	"getent":    {args: []value{exact("hosts"), host}},
}

// guestForms run inside a container: apt_upgrade, pct_create's packages
// and its network check. apt_upgrade's apt-get update and apt list run on
// a node too; cat never does.
var guestForms = map[string]form{
	"apt-get": {args: []value{exact("-q"), exact("-o"), exact("Acquire::Retries=3"), exact("update")}},
	"apt":     {args: []value{exact("list"), exact("--upgradable")}},
	"cat":     {args: []value{exact("/etc/resolv.conf")}},
}

// allowJournal accepts tail_log's two reads, on the node or in a
// container: journalctl -u UNIT -n N --no-pager for a unit, and
// journalctl -n N --no-pager for the whole journal. N is 1 to
// policy.MaxLogLines; nothing follows (-f), picks fields or reads files.
func allowJournal(name string, args []string) error {
	lines := number(1, policy.MaxLogLines)
	if len(args) > 0 && args[0] == "-u" {
		return allowForm(name, args, form{args: []value{exact("-u"), wrap(policy.ValidateUnit), exact("-n"), lines, exact("--no-pager")}})
	}
	return allowForm(name, args, form{args: []value{exact("-n"), lines, exact("--no-pager")}})
}

// nodeUpgrade is apt_upgrade's upgrade on a node: dist-upgrade, as a
// Proxmox node must be upgraded.
var nodeUpgrade = []string{"DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "-o", "Acquire::Retries=3",
	"-o", "Dpkg::Options::=--force-confold", "dist-upgrade"}

// allowNodeUpgrade accepts env on the node for nodeUpgrade only: no
// install, no remove, no other variable.
func allowNodeUpgrade(args []string) error {
	if !slices.Equal(args, nodeUpgrade) {
		return refusef("env: on the node only env %s", strings.Join(nodeUpgrade, " "))
	}
	return nil
}

// allowEnv accepts the two apt-get forms that run through env.
func allowEnv(args []string) error {
	prefix := []string{"DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "-o", "Acquire::Retries=3"}
	if len(args) < len(prefix) || !slices.Equal(args[:len(prefix)], prefix) {
		return refusef("pct exec: env: only env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 install|upgrade")
	}
	rest := args[len(prefix):]
	if slices.Equal(rest, []string{"-o", "Dpkg::Options::=--force-confold", "upgrade"}) {
		return nil
	}
	if len(rest) < 2 || rest[0] != "install" {
		return refusef("pct exec: env apt-get: want install PACKAGE… or -o Dpkg::Options::=--force-confold upgrade")
	}
	for _, p := range rest[1:] {
		if policy.ValidatePackage(p) != nil {
			return refusef("pct exec: env apt-get install: not accepted by policy: %s", q(p))
		}
	}
	return nil
}

func allowPvesh(args []string) error {
	if len(args) < 2 || args[0] != "get" {
		return refusef("pvesh: only pvesh get PATH of a read-only path")
	}
	p := args[1]
	if node, ok := strings.CutPrefix(p, "/nodes/"); ok && strings.HasSuffix(node, "/replication") {
		// A destroy's preview and the inventory read the node's
		// replication jobs, in this one form only.
		if policy.ValidateHostname(strings.TrimSuffix(node, "/replication")) != nil || !slices.Equal(args[2:], []string{"--output-format", "json"}) {
			return refusef("pvesh get: want pvesh get /nodes/NODE/replication --output-format json, got %s", q(strings.Join(args, " ")))
		}
		return nil
	}
	if !readablePath(p) {
		return refusef("pvesh get: %s is not a path nomos reads", q(p))
	}
	opts := map[string]value{"--output-format": oneOf("json", "json-pretty", "text", "yaml")}
	if p == "/cluster/resources" {
		opts["--type"] = oneOf("vm", "storage", "node", "sdn")
	}
	return allowForm("pvesh get "+p, args[2:], form{opts: opts})
}

// readablePath reports whether p is one of the API paths Nomos reads:
// inventory, the next free vmid, versions, the backup jobs (a preview's),
// a container's state and the addresses of its interfaces.
func readablePath(p string) bool {
	switch p {
	case "/cluster/nextid", "/cluster/resources", "/cluster/status", "/nodes", "/version", "/cluster/backup":
		return true
	}
	parts := strings.Split(p, "/")
	if len(parts) < 4 || parts[0] != "" || parts[1] != "nodes" || policy.ValidateHostname(parts[2]) != nil {
		return false
	}
	switch rest := parts[3:]; len(rest) {
	case 1:
		return rest[0] == "status" || rest[0] == "lxc" || rest[0] == "qemu" || rest[0] == "storage"
	case 3:
		return rest[0] == "lxc" && vmid(rest[1]) == nil && (rest[2] == "config" || rest[2] == "snapshot" || rest[2] == "interfaces")
	case 4:
		return rest[0] == "lxc" && vmid(rest[1]) == nil && rest[2] == "status" && rest[3] == "current"
	}
	return false
}

// Values.

func exact(want string) value {
	return func(s string) error {
		if s != want {
			return errors.New("want " + want + ", got " + q(s))
		}
		return nil
	}
}

func oneOf(want ...string) value {
	return func(s string) error {
		if !slices.Contains(want, s) {
			return errors.New("want one of " + strings.Join(want, ", ") + ", got " + q(s))
		}
		return nil
	}
}

// wrap makes a policy validator a value whose error quotes safely.
func wrap(validate func(string) error) value {
	return func(s string) error {
		if validate(s) != nil {
			return errors.New("not accepted by policy: " + q(s))
		}
		return nil
	}
}

// decimal parses digits without sign or leading zeros.
func decimal(s string) (int, bool) {
	if s == "" || len(s) > 9 || (s[0] == '0' && s != "0") {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func number(lo, hi int) value {
	return func(s string) error {
		if n, ok := decimal(s); !ok || n < lo || n > hi {
			return errors.New("want a number from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi) + ", got " + q(s))
		}
		return nil
	}
}

func vmid(s string) error {
	n, ok := decimal(s)
	if !ok || policy.ValidateVMID(n) != nil {
		return errors.New("want a container id, got " + q(s))
	}
	return nil
}

var (
	boolean  = oneOf("0", "1")
	seconds  = number(0, 86400)
	snapshot = wrap(policy.ValidateSnapshotName)
	template = wrap(policy.ValidateTemplate)
	// description is pct_create's one line of who asked and why.
	description = wrap(policy.ValidateDescription)
	storage     = wrap(policy.ValidateStorage)
)

func ipv4(s string) error {
	if _, err := policy.ParseIPv4(s); err != nil {
		return errors.New("want an IPv4 address, got " + q(s))
	}
	return nil
}

// rootfs accepts STORAGE:GB, a new volume of that size.
func rootfs(s string) error {
	st, size, ok := strings.Cut(s, ":")
	if !ok || policy.ValidateStorage(st) != nil || number(1, 65536)(size) != nil {
		return errors.New("want STORAGE:GB, got " + q(s))
	}
	return nil
}

// net0 accepts name=eth0,bridge=BRIDGE,ip=dhcp|CIDR[,gw=IPV4].
func net0(s string) error {
	bad := errors.New("want name=eth0,bridge=BRIDGE,ip=dhcp|CIDR[,gw=IPV4], got " + q(s))
	fields := strings.Split(s, ",")
	if len(fields) < 3 || len(fields) > 4 {
		return bad
	}
	keys := []string{"name", "bridge", "ip", "gw"}
	for i, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		if k != keys[i] {
			return bad
		}
		var err error
		switch k {
		case "name":
			err = exact("eth0")(v)
		case "bridge":
			err = policy.ValidateBridge(v)
		case "ip":
			if v != "dhcp" {
				_, err = policy.ParseCIDR(v)
			}
		case "gw":
			err = ipv4(v)
		}
		if err != nil {
			return bad
		}
	}
	return nil
}

var (
	pathRE    = regexp.MustCompile(`^/[A-Za-z0-9._/-]*$`)
	dnsNameRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
	// URL paths and queries: RFC 3986 characters without $ and ', as the
	// actuator's http probe builds them.
	urlPathRE  = regexp.MustCompile(`^/[A-Za-z0-9._~!&()*+,;=:@%/-]*$`)
	urlQueryRE = regexp.MustCompile(`^[A-Za-z0-9._~!&()*+,;=:@%/?-]*$`)
)

func path(s string) error {
	if !pathRE.MatchString(s) {
		return errors.New("want an absolute path of letters, digits, '.', '_', '-' and '/', got " + q(s))
	}
	return nil
}

// host accepts a DNS name or an IP address.
func host(s string) error {
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	if len(s) > 253 || !dnsNameRE.MatchString(s) {
		return errors.New("want a host name or address, got " + q(s))
	}
	return nil
}

// healthURL accepts the URLs the actuator's http probe fetches: http or
// https, no credentials, no fragment, a plain host and a plain path.
func healthURL(raw string) error {
	bad := errors.New("want an http or https URL, got " + q(raw))
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"'\$<>^{|}`+"`", c) >= 0 {
			return bad
		}
	}
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return bad
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Scheme != "http" && u.Scheme != "https", u.User != nil, u.Opaque != "", host(u.Hostname()) != nil:
		return bad
	case u.EscapedPath() != "" && !urlPathRE.MatchString(u.EscapedPath()), !urlQueryRE.MatchString(u.RawQuery), u.Fragment != "", strings.Contains(raw, "#"):
		return bad
	}
	if p := u.Port(); p != "" && number(1, 65535)(p) != nil {
		return bad
	}
	return nil
}

// q quotes untrusted text for a one-line message, capped.
func q(s string) string {
	const limit = 60
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
