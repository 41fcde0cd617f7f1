package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// rule classifies one command from its arguments. It returns the command's
// own contribution; commands it runs in turn (sudo's, sh -c's) are
// classified through the analyzer and raise the class themselves.
//
// The rules live in commands_*.go by domain: files, systemd, packages,
// network, proxmox, and wrappers (programs that run other programs).
type rule func(a *analyzer, args []word, depth int) (Class, string)

// ruleTable is every command's rule, by name, and the commands whose
// rules decide about every path they are given (modelsPaths), which the
// generic device and critical-path check skips.
type ruleTable struct {
	rules       map[string]rule
	modelsPaths map[string]bool
}

// commands is the rule table, built once and only read after. The
// analyzer carries it, since the rules themselves run the analyzer.
var commands = buildRules()

// buildRules builds the rule table from its domain files.
func buildRules() ruleTable {
	t := ruleTable{rules: map[string]rule{}, modelsPaths: map[string]bool{}}
	for _, add := range []func(map[string]rule, map[string]bool){
		addShellRules, addFileRules, addNetworkRules, addPackageRules, addProxmoxRules, addSystemdRules, addWrapperRules,
	} {
		add(t.rules, t.modelsPaths)
	}
	return t
}

// roAny are read-only whatever their arguments: no option makes them write
// a file, change state, run another program or print a file's content.
var roAny = []string{
	"ls", "df", "du", "free", "uptime", "uname", "whoami", "id", "groups",
	"pgrep", "pidof", "wc", "tr", "stat", "readlink", "realpath", "basename",
	"dirname", "which", "whereis", "netstat", "ping", "ping6", "host",
	"nslookup", "traceroute", "tracepath", "lsblk", "findmnt", "lsof", "vmstat",
	"iostat", "mpstat", "nproc", "lscpu", "lsmem", "lspci", "lsusb", "lsmod",
	"lsns", "w", "pwd", "echo", "true", "false",
	"sleep", ":", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum",
	"sha512sum", "b2sum", "cksum", "lsattr", "getfacl", "pveversion", "seq",
	"expr", "locale", "tty", "lvs", "vgs", "pvs", "lvdisplay", "vgdisplay",
	"pvdisplay", "exit", "return", "type", "dpkg-query", "arch", "hostid",
	"logname", "getconf", "ipcs", "lsipc", "wait", "jobs", "shift", "times",
	"help", "dirs", "caller",
}

// addShellRules adds the everyday read-only commands and the shell's
// builtins.
func addShellRules(rules map[string]rule, modelsPaths map[string]bool) {
	for _, n := range roAny {
		rules[n] = func(*analyzer, []word, int) (Class, string) { return ReadOnly, "" }
	}
	deny := func(name, shortDeny string, longDeny ...string) {
		rules[name] = func(_ *analyzer, args []word, _ int) (Class, string) {
			return denyOpts(name, args, shortDeny, longDeny...)
		}
	}
	rules["file"] = ruleFile
	deny("dmesg", "cCDEn", "clear", "read-clear", "console-off", "console-on", "console-level")
	deny("sensors", "s", "set")
	deny("blkid", "cg", "cache-file", "garbage-collect")
	deny("dig", "fk")

	rules["uniq"] = ruleUniq
	rules["hostname"] = ruleHostname
	rules["date"] = ruleDate
	rules["top"] = ruleTop
	rules["ps"] = rulePs
	rules["getent"] = ruleGetent
	rules["printenv"] = func(a *analyzer, _ []word, _ int) (Class, string) {
		a.secret("printenv prints the environment")
		return ReadOnly, ""
	}
	rules["test"] = ruleTest("test")
	rules["["] = ruleTest("[")
	rules["printf"] = rulePrintf
	rules["set"] = ruleSet
	for _, n := range []string{"declare", "typeset", "export", "readonly", "local"} {
		rules[n] = ruleDeclare(n)
	}
	rules["read"] = ruleEvaluating("read", "read assigns shell variables")
	rules["unset"] = ruleEvaluating("unset", "unset removes shell variables")
	rules["let"] = ruleEvaluating("let", "let evaluates arithmetic")
	rules["getopts"] = fixed(ConfigMutation, "getopts assigns shell variables")
	for _, n := range []string{"shopt", "ulimit", "umask", "unalias", "hash", "history", "disown", "complete", "bind", "suspend", "logout"} {
		rules[n] = fixed(ConfigMutation, n+" changes the shell's state")
	}
	// Builtins that run code or load it: enable -f loads a shared object,
	// fc re-runs history, mapfile -C and compgen -C/-F call back into code.
	for _, n := range []string{"enable", "fc", "mapfile", "readarray", "compgen"} {
		rules[n] = func(a *analyzer, _ []word, _ int) (Class, string) {
			return a.opaqueClass(n + " can run code the classifier cannot read")
		}
	}
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

// sub returns a word holding part of w's value, such as an option's value.
func sub(w word, val string) word {
	return word{val: val, raw: w.raw, quoted: w.quoted, dynamic: w.dynamic, expands: w.expands, glob: w.glob}
}

type opt struct {
	name   string // "-x" or "--name"
	val    string
	hasVal bool
	word   word // the word holding the value, when hasVal
}

type parsed struct {
	opts     []opt
	operands []word
	dynamic  bool
	bad      bool // an option that needs a value has none
	// unknown lists options a spec does not name; with them the split
	// between values and operands is a guess.
	unknown []string
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

// values returns every value given to one of names.
func (p parsed) values(names ...string) []opt {
	var out []opt
	for _, o := range p.opts {
		if slices.Contains(names, o.name) && o.hasVal {
			out = append(out, o)
		}
	}
	return out
}

// parseOpts reads getopt-style options. shortVal lists short options that
// take a value, longVal long ones. With stop, the first operand ends option
// parsing (for commands that run another command).
func parseOpts(args []word, shortVal string, longVal []string, stop bool) parsed {
	s := spec{values: make(map[string]bool, len(shortVal)+len(longVal))}
	for i := 0; i < len(shortVal); i++ {
		s.values["-"+shortVal[i:i+1]] = true
	}
	for _, n := range longVal {
		s.values["--"+n] = true
	}
	// The caller judges options by name; what the table does not know is
	// only a flag here, never an error.
	return s.parse(args, stop)
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

// spec is a command's option table, for commands whose read-only use is an
// allowlist: anything it does not name is an unknown option.
type spec struct {
	flags  map[string]bool // options without a value: "-a", "--all"
	values map[string]bool // options with a value: "-n", "--lines"
	// optional long options take a value only as --name=value.
	optional map[string]bool
	// digits accepts -NUM, as in head -5 or nice -10.
	digits bool
}

func newSpec(flags, values string) spec {
	return spec{flags: set(strings.Fields(flags)...), values: set(strings.Fields(values)...)}
}

// parse reads args against the table; with stop, the first operand ends
// the options.
func (s spec) parse(args []word, stop bool) parsed {
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
			name, val, has := strings.Cut(v, "=")
			o := opt{name: name, val: val, hasVal: has, word: sub(w, val)}
			switch {
			case s.values[name] && !has:
				if i+1 >= len(args) {
					p.bad = true
					break
				}
				i++
				o.val, o.hasVal, o.word = args[i].val, true, args[i]
				p.dynamic = p.dynamic || args[i].dynamic
			case s.values[name], s.optional[name], s.flags[name] && !has:
			default:
				p.unknown = append(p.unknown, name)
			}
			p.opts = append(p.opts, o)
		case len(v) > 1 && v[0] == '-':
			if s.digits && allBytes(v[1:], isDigit) {
				p.opts = append(p.opts, opt{name: "-NUM", val: v[1:], hasVal: true})
				continue
			}
			for j := 1; j < len(v); j++ {
				name := "-" + v[j:j+1]
				o := opt{name: name}
				if s.values[name] {
					switch {
					case j+1 < len(v):
						o.val, o.hasVal, o.word = v[j+1:], true, sub(w, v[j+1:])
					case i+1 < len(args):
						i++
						o.val, o.hasVal, o.word = args[i].val, true, args[i]
						p.dynamic = p.dynamic || args[i].dynamic
					default:
						p.bad = true
					}
					p.opts = append(p.opts, o)
					break
				}
				if !s.flags[name] {
					p.unknown = append(p.unknown, name)
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

func ruleUniq(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "fsw", []string{"skip-fields", "skip-chars", "check-chars", "group", "all-repeated"}, false)
	if len(p.operands) > 0 {
		a.reads(p.operands[0], "uniq")
	}
	if len(p.operands) > 1 {
		a.writeTo(p.operands[1], "uniq")
		return cfgf("uniq with two operands writes the second")
	}
	if p.dynamic {
		return notLiteral("uniq")
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

func ruleDate(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "dfr", []string{"date", "file", "reference"}, false)
	if p.dynamic {
		return notLiteral("date")
	}
	if hasShort(args, "s") || hasLong(args, "set") {
		return cfgf("date --set changes the clock")
	}
	for _, o := range p.values("-f", "--file") {
		a.reads(o.word, "date -f")
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

// rulePs: ps is read-only unless it prints process environments, which BSD
// syntax asks for with an e among option letters given without a dash
// (ps e, ps auxe, ps eww).
func rulePs(a *analyzer, args []word, _ int) (Class, string) {
	valueNext := false
	for _, w := range args {
		if !w.static() {
			a.secret("ps with arguments only known at run time may print process environments")
			return notLiteral("ps")
		}
		v := w.val
		if valueNext {
			valueNext = false
			continue
		}
		switch {
		case strings.HasPrefix(v, "--"):
			n, _, has := strings.Cut(v, "=")
			switch n {
			case "--format", "--sort", "--pid", "--ppid", "--user", "--group", "--cols", "--columns", "--rows", "--lines", "--width", "--tty", "--sid", "--Group", "--User", "--quick-pid":
				valueNext = !has
			}
		case strings.HasPrefix(v, "-"):
			// UNIX options; -o/-O/-p/-u and kin take a value, attached or
			// as the next word when last in a cluster (ps -eo pid,time).
			if len(v) > 1 && strings.ContainsRune("oOpuUgGtsCqk", rune(v[len(v)-1])) {
				valueNext = true
			}
		default:
			if strings.ContainsRune(v, 'e') {
				a.secret("ps " + v + " prints process environments")
			}
			// BSD o, O, p, t, U take a value when last in the cluster.
			if strings.ContainsRune("oOptU", rune(v[len(v)-1])) {
				valueNext = true
			}
		}
	}
	return ReadOnly, ""
}

// ruleGetent: the shadow and gshadow databases hold password hashes.
func ruleGetent(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "s", []string{"service"}, false)
	if p.dynamic {
		a.secret("getent with a database only known at run time")
		return notLiteral("getent")
	}
	if len(p.operands) > 0 {
		switch db := p.operands[0].val; db {
		case "shadow", "gshadow":
			a.secret("getent " + db)
		}
	}
	return ReadOnly, ""
}

// ruleTest judges test and [ as bash does: -v and -R name a variable, and
// bash evaluates a subscript in that name, so test -v 'a[$(reboot)]' runs
// reboot. Those forms, and any word with a subscript, are not read-only.
func ruleTest(name string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		evaluates := false
		for _, w := range args {
			if w.val == "-v" || w.val == "-R" {
				evaluates = true
			}
			if i := strings.IndexByte(w.val, '['); i >= 0 && strings.IndexByte(w.val[i:], ']') > 0 {
				evaluates = true
			}
		}
		if !evaluates {
			return ReadOnly, ""
		}
		a.hiddenArgs(args, depth, name+" evaluates a variable name and its subscript")
		return cfgf("%s -v evaluates a variable name and its subscript", name)
	}
}

// rulePrintf: bash's printf -v assigns to a name whose subscript bash
// evaluates; without -v printf only prints.
func rulePrintf(a *analyzer, args []word, depth int) (Class, string) {
	for _, w := range args {
		if w.val == "--" {
			break
		}
		if !w.static() {
			// It may be -v.
			a.hiddenArgs(args, depth, "printf may evaluate a variable name and its subscript")
			return cfgf("printf with an option only known at run time")
		}
		if !strings.HasPrefix(w.val, "-") {
			break
		}
		if strings.HasPrefix(w.val, "-v") {
			for _, x := range args {
				n, _, _ := strings.Cut(strings.TrimPrefix(x.val, "-v"), "[")
				a.assign(n)
			}
			a.hiddenArgs(args, depth, "printf -v evaluates a variable name and its subscript")
			return cfgf("printf -v assigns a shell variable")
		}
	}
	return ReadOnly, ""
}

// ruleSet: set changes shell options; without arguments it prints every
// variable.
func ruleSet(a *analyzer, args []word, _ int) (Class, string) {
	if len(args) == 0 {
		a.secret("set prints every variable")
	}
	return cfgf("set changes shell options or arguments")
}

// ruleDeclare handles declare and kin run as commands (builtin declare,
// command export); bash parses them as declarations otherwise.
func ruleDeclare(name string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		names, printing := 0, false
		for _, w := range args {
			if w.static() && len(w.val) > 1 && (w.val[0] == '-' || w.val[0] == '+') {
				printing = printing || strings.ContainsRune(w.val, 'p')
				continue
			}
			names++
			if n, _, _ := strings.Cut(w.val, "="); codeEnv[n] {
				a.opaque("sets " + n + ", which changes what programs run or load")
			}
		}
		if printing || names == 0 {
			a.secret(name + " prints variables")
		}
		a.hiddenArgs(args, depth, name+" evaluates its arguments")
		return cfgf("%s declares shell variables", name)
	}
}

// ruleEvaluating is for builtins that assign or unset variables by name,
// evaluating any subscript in the name.
func ruleEvaluating(name, why string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		for _, w := range args {
			if w.static() && !strings.HasPrefix(w.val, "-") {
				n, _, _ := strings.Cut(w.val, "[")
				a.assign(n)
			}
		}
		a.hiddenArgs(args, depth, name+" evaluates variable names and their subscripts")
		return ConfigMutation, why
	}
}

// ruleFile: file -C writes a magic file. file -f NAMES reads the file names
// to test from NAMES and, for each line that names no file, prints the
// line in its error, so file -f /etc/shadow prints the password hashes;
// file -m reads a magic file and prints the lines it cannot parse.
func ruleFile(a *analyzer, args []word, _ int) (Class, string) {
	p := parseOpts(args, "fmFeP", []string{"files-from", "magic-file", "separator", "exclude", "parameter", "exclude-quiet"}, false)
	for _, o := range p.opts {
		switch {
		case o.name == "-f" || len(o.name) > 3 && strings.HasPrefix("--files-from", o.name):
			a.secret("file -f prints every line of " + cmp.Or(o.val, "the file it is given") + " that names no file")
		case o.name == "-m" || len(o.name) > 3 && strings.HasPrefix("--magic-file", o.name):
			a.secret("file -m prints the lines of " + cmp.Or(o.val, "the file it is given") + " it cannot parse")
		}
	}
	return denyOpts("file", args, "C", "compile")
}
