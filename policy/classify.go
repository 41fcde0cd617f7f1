package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// ClassifyCommand classifies a shell script that runs on a Proxmox host
// (where is TargetHost) or inside a container (any other value). The rules
// are in the package documentation; in short, read_only needs every command
// on the read-only list and no way to write, destructive needs a command that
// may lose data or take the host down, and anything in doubt is at least
// config_mutation.
//
// Host and container differ in one way: shutting down, rebooting or killing
// every process is destructive on a host and config_mutation in a container.
func ClassifyCommand(command string, where TargetType) Risk {
	a := &analyzer{onHost: where == TargetHost}
	a.script(command, 0)
	if a.b.class == ReadOnly && len(a.b.reasons) == 0 {
		a.b.raise(ReadOnly, "every command is on the read-only list")
	}
	return a.b.risk()
}

// maxDepth bounds nested shells (sh -c, eval, $(...)) the classifier follows.
const maxDepth = 8

const reasonTooDeep = "nests shells too deeply to follow"

type analyzer struct {
	onHost bool
	b      riskBuilder
}

func (a *analyzer) ro()               { a.b.raise(ReadOnly, "") }
func (a *analyzer) notRO(text string) { a.b.raise(ConfigMutation, text) }

func (a *analyzer) destroy(format string, args ...any) {
	a.b.raise(Destructive, fmt.Sprintf(format, args...))
}

// uncertain records that part of a script could not be followed: it is at
// least config_mutation, and destructive if its text mentions a destructive
// command.
func (a *analyzer) uncertain(text, why string) {
	a.notRO("could not follow the script: " + why)
	if c, r := crudeClass(text, a.onHost); c == Destructive {
		a.b.raise(Destructive, r)
	}
}

func (a *analyzer) script(src string, depth int) {
	if depth > maxDepth {
		a.uncertain(src, reasonTooDeep)
		return
	}
	a.ro()
	l := lex(src, 0)
	for _, why := range l.uncertain {
		a.uncertain(src, why)
	}
	if l.heredocs > 0 {
		a.notRO("uses a here-document")
	}
	for _, s := range l.substs {
		a.notRO("runs a command substitution")
		a.script(s, depth+1)
	}
	cmds, funcs := split(l.toks)
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = a.command(c, depth)
	}
	for _, f := range funcs {
		a.notRO("defines a shell function")
		end := bodyEnd(l.toks, f.at)
		for i, c := range cmds {
			if c.first > f.at && c.last <= end && names[i] != "" && names[i] == f.name {
				a.destroy("defines a shell function that calls itself (a fork bomb)")
			}
		}
	}
}

type redir struct {
	op     string
	target word
	ok     bool
}

type simpleCmd struct {
	words       []word
	redirs      []redir
	first, last int // token indexes
	bg          bool
}

type funcDef struct {
	name string
	at   int // token index where the body may start after
}

// split cuts tokens into simple commands at control operators, attaches
// redirections to their command and finds function definitions.
func split(toks []tok) ([]simpleCmd, []funcDef) {
	var cmds []simpleCmd
	var funcs []funcDef
	cur := simpleCmd{first: -1}
	flush := func(bg bool) {
		if len(cur.words) > 0 || len(cur.redirs) > 0 {
			cur.bg = bg
			cmds = append(cmds, cur)
		}
		cur = simpleCmd{first: -1}
	}
	mark := func(i int) {
		if cur.first < 0 {
			cur.first = i
		}
		cur.last = i
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.op == "" {
			if len(cur.words) == 0 && len(cur.redirs) == 0 && !t.w.quoted && t.w.val == "function" && i+1 < len(toks) && toks[i+1].op == "" {
				funcs = append(funcs, funcDef{name: toks[i+1].w.val, at: i + 1})
				i++
				if i+2 < len(toks) && toks[i+1].op == "(" && toks[i+2].op == ")" {
					i += 2
					funcs[len(funcs)-1].at = i
				}
				continue
			}
			mark(i)
			cur.words = append(cur.words, t.w)
			continue
		}
		if isRedirect(t.op) {
			mark(i)
			if n := len(cur.words); n > 0 && cur.words[n-1].ioNum {
				cur.words = cur.words[:n-1]
			}
			r := redir{op: t.op}
			if i+1 < len(toks) && toks[i+1].op == "" {
				r.target, r.ok = toks[i+1].w, true
				i++
				mark(i)
			}
			cur.redirs = append(cur.redirs, r)
			continue
		}
		switch t.op {
		case "(":
			if len(cur.words) == 1 && len(cur.redirs) == 0 && i+1 < len(toks) && toks[i+1].op == ")" {
				funcs = append(funcs, funcDef{name: cur.words[0].val, at: i + 1})
				cur = simpleCmd{first: -1}
				i++
				continue
			}
			flush(false)
		case "&":
			flush(true)
		default:
			flush(false)
		}
	}
	flush(false)
	return cmds, funcs
}

// bodyEnd returns the token index where a function body that starts after
// index at ends; when the body is not a { } or ( ) group it assumes the rest
// of the script, which errs upward.
func bodyEnd(toks []tok, at int) int {
	j := at + 1
	for j < len(toks) && toks[j].op == "\n" {
		j++
	}
	if j >= len(toks) {
		return len(toks) - 1
	}
	open, close := "", ""
	switch {
	case toks[j].op == "" && !toks[j].w.quoted && toks[j].w.val == "{":
		open, close = "{", "}"
	case toks[j].op == "(":
		open, close = "(", ")"
	default:
		return len(toks) - 1
	}
	depth := 0
	for k := j; k < len(toks); k++ {
		v := toks[k].op
		if v == "" && !toks[k].w.quoted {
			v = toks[k].w.val
		}
		switch v {
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return len(toks) - 1
}

var transparentWords = map[string]bool{"!": true, "{": true, "}": true}

var controlWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true,
	"while": true, "until": true, "for": true, "do": true, "done": true,
	"case": true, "esac": true, "select": true, "in": true, "coproc": true,
}

// command classifies one simple command and returns the base name of the
// program it runs, or "" if none or unknown.
func (a *analyzer) command(c simpleCmd, depth int) string {
	for _, w := range c.words {
		a.substs(w, depth)
	}
	for _, r := range c.redirs {
		a.substs(r.target, depth)
		a.redirect(r)
	}
	if c.bg {
		a.notRO("runs a command in the background")
	}
	ws := c.words
	i := 0
	for ; i < len(ws); i++ {
		w := ws[i]
		if isAssignment(w) {
			a.notRO("assigns a shell variable")
			continue
		}
		if !w.quoted && transparentWords[w.val] {
			continue
		}
		if !w.quoted && controlWords[w.val] {
			a.notRO("uses shell control flow")
			continue
		}
		break
	}
	if i == len(ws) {
		return ""
	}
	return a.argv(ws[i:], depth)
}

func (a *analyzer) substs(w word, depth int) {
	for _, s := range w.substs {
		a.notRO("runs a command substitution")
		a.script(s, depth+1)
	}
}

// isAssignment reports whether w is NAME=value (or NAME[i]=, NAME+=) with an
// unquoted name.
func isAssignment(w word) bool {
	r := w.raw
	if r == "" || !(isAlnum(r[0]) && !isDigit(r[0]) || r[0] == '_') {
		return false
	}
	i := 1
	for i < len(r) && (isAlnum(r[i]) || r[i] == '_') {
		i++
	}
	if i < len(r) && r[i] == '[' {
		end := strings.IndexByte(r[i:], ']')
		if end < 0 {
			return false
		}
		i += end + 1
	}
	if i < len(r) && r[i] == '+' {
		i++
	}
	return i < len(r) && r[i] == '='
}

// redirect classifies one redirection.
func (a *analyzer) redirect(r redir) {
	switch r.op {
	case "<", "<<<":
		return
	case "<<", "<<-":
		return // counted once per script
	case "<&", ">&":
		if r.ok && !r.target.dynamic && (r.target.val == "-" || allBytes(r.target.val, isDigit) && r.target.val != "") {
			return
		}
		if r.op == "<&" {
			return
		}
	}
	if !r.ok {
		a.notRO("has a redirection without a target")
		return
	}
	t := r.target
	if t.dynamic || t.glob {
		if strings.Contains(t.raw, "/dev/") {
			a.destroy("writes to a device named at run time (%s)", t.raw)
		}
		a.notRO("writes to a file named at run time")
		return
	}
	p := cleanPath(t.val)
	switch {
	case safeOutput(p):
	case isDevicePath(p):
		a.destroy("writes to device %s", p)
	case (p == "/proc/sysrq-trigger" || path.Base(p) == "sysrq-trigger") && a.onHost:
		a.destroy("writes to /proc/sysrq-trigger, which can reboot or crash the host")
	default:
		a.notRO("writes to " + p)
	}
}

func cleanPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return p
}

func safeOutput(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero":
		return true
	}
	rest, ok := strings.CutPrefix(p, "/dev/fd/")
	return ok && rest != "" && allBytes(rest, isDigit)
}

// isDevicePath reports whether p names something under /dev that may be a
// disk: everything there except a short list of harmless character devices.
func isDevicePath(p string) bool {
	p = cleanPath(p)
	rest, ok := strings.CutPrefix(p, "/dev/")
	if !ok || rest == "" {
		return false
	}
	switch rest {
	case "null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr",
		"tty", "console", "kmsg", "ptmx", "log":
		return false
	}
	for _, dir := range []string{"fd/", "pts/", "shm/", "mqueue/", "tcp/", "udp/", "net/"} {
		if strings.HasPrefix(rest, dir) {
			return false
		}
	}
	return true
}

// trustedDirs are where a read-only command may be named by path; anything
// else might be a script that shares the name.
var trustedDirs = map[string]bool{
	"/bin": true, "/usr/bin": true, "/sbin": true, "/usr/sbin": true,
	"/usr/local/bin": true, "/usr/local/sbin": true,
}

func commandBase(name string) (base string, trusted bool) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return name, true
	}
	return name[i+1:], trustedDirs[path.Clean(name[:max(i, 1)])]
}

// argv classifies a command given its words, name first, and returns its
// base name.
func (a *analyzer) argv(ws []word, depth int) string {
	if len(ws) == 0 {
		return ""
	}
	name := ws[0]
	if name.dynamic || (name.glob && name.val != "[" && name.val != "[[") || name.val == "" {
		a.notRO("runs a command whose name is only known at run time")
		a.dangerous(ws)
		return ""
	}
	if slices.ContainsFunc(ws, func(w word) bool { return w.brace }) {
		a.notRO("uses brace expansion")
		a.dangerous(ws)
	}
	base, trusted := commandBase(name.val)
	args := ws[1:]
	var c Class
	var why string
	switch r, ok := rules[base]; {
	case ok:
		c, why = r(a, args, depth)
	case strings.HasPrefix(base, "mkfs"):
		c, why = Destructive, base+" formats a filesystem"
	case interpreters[base]:
		c, why = ConfigMutation, base+" runs a program the classifier cannot read"
		if cc, r := crudeClass(joinRaw(args), a.onHost); cc == Destructive {
			c, why = cc, r
		}
	default:
		c, why = ConfigMutation, base+" is not on the read-only list"
	}
	if c == ReadOnly && !trusted {
		c, why = ConfigMutation, "runs "+name.val+" from outside the system directories"
	}
	if c > ReadOnly && c < Destructive && !deviceTools[base] {
		for _, w := range args {
			if v := strings.TrimPrefix(w.val, "of="); isDevicePath(v) {
				c, why = Destructive, fmt.Sprintf("%s writes to device %s", base, cleanPath(v))
				break
			}
		}
	}
	a.b.raise(c, why)
	return base
}

// dangerous is the safety net for a command the classifier cannot name or
// whose words it cannot know: destructive if its text mentions a
// destructive command, or pairs a recursive flag with a system directory,
// or names a device.
func (a *analyzer) dangerous(ws []word) {
	if c, r := crudeClass(joinRaw(ws), a.onHost); c == Destructive {
		a.b.raise(c, r)
		return
	}
	recursive, critical := false, false
	for _, w := range ws {
		switch v := w.val; {
		case v == "--recursive" || v == "--no-preserve-root" ||
			(len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsAny(v[1:], "rR")):
			recursive = true
		case criticalPath(v):
			critical = true
		}
	}
	if recursive && critical {
		a.destroy("a command known only at run time with a recursive flag on a system directory")
	}
}

func joinRaw(ws []word) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.raw
	}
	return strings.Join(parts, " ")
}

func joinVals(ws []word) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.val
	}
	return strings.Join(parts, " ")
}

func anyDynamic(ws []word) bool {
	return slices.ContainsFunc(ws, func(w word) bool { return w.dynamic })
}

// crudeClass is the safety net for text the tokenizer could not follow: it
// looks for the names of destructive commands among the words.
func crudeClass(text string, onHost bool) (Class, string) {
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return r >= 0x80 || !(isAlnum(byte(r)) || strings.ContainsRune("_.:=/+-", r))
	})
	recursive := false
	for _, f := range fields {
		if f == "--recursive" || f == "--no-preserve-root" ||
			(len(f) > 1 && f[0] == '-' && f[1] != '-' && strings.ContainsAny(f[1:], "rR")) {
			recursive = true
		}
	}
	for _, f := range fields {
		b := f
		if i := strings.LastIndexByte(f, '/'); i >= 0 && i < len(f)-1 {
			b = f[i+1:]
		}
		switch {
		case crudeDestructive[b] || strings.HasPrefix(b, "mkfs"):
			return Destructive, "mentions " + b
		case b == "rm" && recursive:
			return Destructive, "mentions rm with a recursive flag"
		case strings.HasPrefix(f, "of="):
			return Destructive, "mentions " + f
		case isDevicePath(f):
			return Destructive, "mentions device " + f
		case onHost && hostPower[b]:
			return Destructive, "mentions " + b
		}
	}
	for _, s := range []string{"(){", "() {", "( ) {", "( ){"} {
		if strings.Contains(text, s) {
			return Destructive, "defines a shell function"
		}
	}
	return ConfigMutation, ""
}

var crudeDestructive = set(
	"destroy", "rollback", "delsnapshot", "wipefs", "blkdiscard", "shred",
	"lvremove", "vgremove", "pvremove", "lvreduce", "killall5", "qmrestore",
	"sgdisk", "sfdisk", "fdisk", "gdisk", "cfdisk", "parted", "mke2fs",
	"mkswap", "mkdosfs", "mkntfs", "pvcreate", "prune", "luksFormat",
)

var hostPower = set("shutdown", "poweroff", "halt", "reboot", "kexec")

// interpreters run code given as arguments; only the safety net reads it.
var interpreters = set(
	"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php",
	"lua", "awk", "gawk", "mawk", "nawk", "tclsh", "sed",
)

// deviceTools take device paths as arguments without writing to them as
// raw data; the generic device rule does not apply to them.
var deviceTools = set(
	"mount", "umount", "eject", "losetup", "partprobe", "udevadm", "swapon",
	"swapoff", "tune2fs", "e2label", "fsck", "e2fsck", "xfs_info", "resize2fs",
	"growpart", "blockdev", "hdparm", "cryptsetup", "mdadm", "smartctl", "nvme",
	"zpool",
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
