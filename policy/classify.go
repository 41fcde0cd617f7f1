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
// on the read-only list and no way to write, run another program or reveal a
// secret; destructive needs a command that may lose data or take the host
// down; anything in doubt is at least config_mutation.
//
// Host and container differ in two ways: shutting down, rebooting or killing
// every process is destructive on a host and config_mutation in a container,
// and so is running a program the classifier cannot read (one with no rule,
// an interpreter, a script file).
//
// Risk.Secrets lists what in the script may print a secret (a key file,
// /etc/shadow, the environment); such a script is never read_only.
func ClassifyCommand(command string, where TargetType) Risk {
	return classify(command, where, false)
}

// classify is ClassifyCommand; bashOnly skips the second, POSIX reading
// (for tests of contexts only bash evaluates).
func classify(command string, where TargetType, bashOnly bool) Risk {
	a := &analyzer{commands: &commands, onHost: where == TargetHost, cwds: []string{"/root", "/"}, bashOnly: bashOnly}
	a.script(command, 0)
	a.forkBombs()
	if a.b.class == ReadOnly && len(a.b.reasons) == 0 {
		a.b.raise(ReadOnly, "every command is on the read-only list")
	}
	return a.b.risk()
}

// maxDepth bounds nested shells (sh -c, eval, $(...)) the classifier follows.
const maxDepth = 8

// maxParses bounds the scripts parsed for one command, so nested shells that
// each need a second reading cannot multiply the work.
const maxParses = 64

const reasonTooDeep = "nests shells too deeply to follow"

type analyzer struct {
	commands *ruleTable
	onHost   bool
	bashOnly bool // never read a script as POSIX sh too
	b        riskBuilder
	// cwds are the directories a relative path may be resolved against: the
	// login directories and every directory the script changes into.
	cwds []string
	// cwdUnknown: the script changes into a directory only known at run
	// time, so a relative path may be anywhere.
	cwdUnknown bool
	// funcs is the stack of shell functions whose bodies are being walked;
	// calls records which commands each function's body runs.
	funcs  []string
	calls  map[string][]string
	parses int
	// assigned are variables the script sets itself; expanding them
	// reveals nothing the script did not write.
	assigned map[string]bool
}

// assign records that the script sets the variable name.
func (a *analyzer) assign(name string) {
	if a.assigned == nil {
		a.assigned = map[string]bool{}
	}
	a.assigned[name] = true
}

// safeVars are variables a login shell sets that hold no secret.
var safeVars = set(
	"HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "PATH", "HOSTNAME",
	"HOSTTYPE", "OSTYPE", "MACHTYPE", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"LC_MESSAGES", "TERM", "UID", "EUID", "GROUPS", "PPID", "BASHPID", "RANDOM",
	"SRANDOM", "SECONDS", "LINENO", "IFS", "PS1", "PS2", "PS3", "PS4", "BASH",
	"BASH_VERSION", "BASH_VERSINFO", "BASH_SOURCE", "BASH_LINENO", "FUNCNAME",
	"SHLVL", "COLUMNS", "LINES", "MAIL", "TMPDIR", "TZ", "EPOCHSECONDS",
	"EPOCHREALTIME", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "OPTARG",
	"OPTIND", "REPLY", "PIPESTATUS", "HISTCMD", "DIRSTACK", "COMP_WORDBREAKS",
)

// safeParam reports whether expanding the parameter name reveals nothing
// secret: a special or positional parameter, a login shell's own variable,
// or one the script set.
func (a *analyzer) safeParam(name string) bool {
	if name == "" || safeVars[name] || a.assigned[name] {
		return true
	}
	if len(name) == 1 && strings.ContainsRune("@*#?-$!0123456789_", rune(name[0])) {
		return true
	}
	return allBytes(name, isDigit)
}

func (a *analyzer) ro()               { a.b.raise(ReadOnly, "") }
func (a *analyzer) notRO(text string) { a.b.raise(ConfigMutation, text) }

func (a *analyzer) destroy(format string, args ...any) {
	a.b.raise(Destructive, fmt.Sprintf(format, args...))
}

// opaqueClass is the class of running code the classifier cannot read:
// destructive on a host, where only the typed phrase may approve it, and
// config_mutation inside a container.
func (a *analyzer) opaqueClass(why string) (Class, string) {
	if a.onHost {
		return Destructive, why
	}
	return ConfigMutation, why
}

func (a *analyzer) opaque(why string) { a.b.raise(a.opaqueClass(why)) }

// secret records that the script may print a secret; it is then never
// read_only.
func (a *analyzer) secret(what string) {
	a.b.secret(what)
	a.b.raise(ConfigMutation, "may reveal secrets: "+what)
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

// script classifies src, which runs depth shells deep. It reads src as bash;
// when src uses syntax that dash (the sh of Debian and Proxmox) reads
// differently, or bash cannot parse it, it reads it as POSIX sh too, so a
// command either shell would run is seen.
func (a *analyzer) script(src string, depth int) {
	if depth > maxDepth {
		a.uncertain(src, reasonTooDeep)
		return
	}
	a.ro()
	src = wordChars(src)
	bashOnly, err := a.parseAndWalk(src, depth, false)
	if err != nil {
		a.uncertain(src, parseError(err))
	}
	if err == nil && !bashOnly || a.bashOnly {
		return
	}
	if _, perr := a.parseAndWalk(src, depth, true); perr != nil && err == nil {
		a.uncertain(src, "as POSIX sh, "+parseError(perr))
	}
}

// wordChars rewrites bytes the parser mishandles as U+FFFD, which is a
// plain word character to it as they are to a shell: bytes that are not
// UTF-8 (they stop the parser), NUL (it drops them) and CR (it drops one
// before a newline). Validation refuses NUL and CR in commands; the
// classifier is total all the same.
func wordChars(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.ContainsAny(s, "\x00\r") {
		s = strings.NewReplacer("\x00", "\uFFFD", "\r", "\uFFFD").Replace(s)
	}
	return s
}

func (a *analyzer) parseAndWalk(src string, depth int, posix bool) (bashOnly bool, err error) {
	if a.parses >= maxParses {
		return false, fmt.Errorf("too many nested scripts to follow")
	}
	a.parses++
	defer func() {
		// The parser is not ours; if it ever fails, assume the worst rather
		// than take the bot down.
		if r := recover(); r != nil {
			err = fmt.Errorf("the shell parser failed")
		}
	}()
	f, err := parseScript(src, posix)
	w := &walker{a: a, src: src, depth: depth}
	if f != nil {
		w.stmts(f.Stmts)
	}
	return w.bashOnly, err
}

// called records that the current function body (if any) runs name.
func (a *analyzer) called(name string) {
	if len(a.funcs) == 0 {
		return
	}
	f := a.funcs[len(a.funcs)-1]
	if !slices.Contains(a.calls[f], name) {
		a.calls[f] = append(a.calls[f], name)
	}
}

// forkBombs finds shell functions that call themselves, directly or through
// one another: without a base case they multiply until the machine stalls.
func (a *analyzer) forkBombs() {
	for f := range a.calls {
		seen := map[string]bool{}
		stack := slices.Clone(a.calls[f])
		for len(stack) > 0 {
			g := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if g == f {
				a.destroy("defines a shell function that calls itself (a fork bomb)")
				return
			}
			if seen[g] {
				continue
			}
			seen[g] = true
			stack = append(stack, a.calls[g]...)
		}
	}
}

// reads classifies reading the file w; who names the reader for the reason.
func (a *analyzer) reads(w word, who string) {
	if what, ok := a.secretWord(w); ok {
		if who != "" {
			what = who + " " + what
		}
		a.secret(what)
	}
}

// writeTo classifies writing to the file w: destructive onto a device or a
// critical path, config_mutation elsewhere, nothing for /dev/null and kin.
func (a *analyzer) writeTo(t word, who string) {
	prefix := ""
	if who != "" {
		prefix = who + " "
	}
	if !t.static() {
		if p, why, ok := a.criticalWord(t); ok {
			a.destroy("%swrites to %s, %s", prefix, p, why)
			return
		}
		if strings.Contains(t.raw, "/dev/") {
			a.destroy("%swrites to a device named at run time (%s)", prefix, t.raw)
			return
		}
		a.notRO(prefix + "writes to a file named at run time")
		return
	}
	p := cleanPath(t.val)
	if safeOutput(p) {
		return
	}
	if a.cwdUnknown && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~") {
		a.destroy("%swrites to %s in a directory only known at run time", prefix, p)
		return
	}
	if _, why, ok := a.criticalWord(t); ok {
		if isDevicePath(p) {
			a.destroy("%swrites to device %s", prefix, p)
			return
		}
		a.destroy("%swrites to %s, %s", prefix, p, why)
		return
	}
	a.notRO(prefix + "writes to " + p)
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
	if !name.static() || name.val == "" {
		a.opaque("runs a command whose name is only known at run time")
		a.dangerous(ws)
		return ""
	}
	if slices.ContainsFunc(ws, func(w word) bool { return w.brace }) {
		a.notRO("uses brace expansion")
		a.dangerous(ws)
	}
	base, trusted := commandBase(name.val)
	a.called(base)
	args := ws[1:]
	var c Class
	var why string
	r, known := a.commands.rules[base]
	switch {
	case known:
		c, why = r(a, args, depth)
	case strings.HasPrefix(base, "mkfs"):
		c, why = Destructive, base+" formats a filesystem"
	case interpreters[base]:
		c, why = a.opaqueClass(base + " runs a program the classifier cannot read")
		if cc, r := crudeClass(joinRaw(args), a.onHost); cc == Destructive {
			c, why = cc, r
		}
	default:
		c, why = a.opaqueClass(base + " is not on the read-only list")
	}
	if !trusted {
		a.opaque("runs " + name.val + " from outside the system directories")
		if c == ReadOnly {
			c = ConfigMutation
		}
	}
	if c > ReadOnly && c < Destructive && !deviceTools[base] && !a.commands.modelsPaths[base] {
		c, why = a.pathArgs(base, args, known, c, why)
	}
	if !known || interpreters[base] {
		for _, w := range args {
			a.reads(w, "")
		}
		if what, ok := mentionsSecret(joinVals(args)); ok {
			a.secret(base + " mentions " + what)
		}
	}
	a.b.raise(c, why)
	return base
}

// pathArgs raises a command that is not read-only and does not model its
// own arguments: one that names a device is destructive, and so is one
// without a rule that names a critical path.
func (a *analyzer) pathArgs(base string, args []word, known bool, c Class, why string) (Class, string) {
	for _, w := range args {
		v := w.val
		if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(after, "/") {
			v = after
		}
		if isDevicePath(v) {
			return Destructive, fmt.Sprintf("%s writes to device %s", base, cleanPath(v))
		}
		if known || !looksLikePath(v) {
			continue
		}
		if p, crit, ok := a.criticalWord(word{val: v, dynamic: w.dynamic}); ok {
			return Destructive, fmt.Sprintf("%s may write to %s, %s", base, p, crit)
		}
	}
	return c, why
}

// dangerous is the safety net for a command the classifier cannot name or
// whose words it cannot know: destructive if its text mentions a
// destructive command, or pairs a recursive flag with a system directory,
// or names a device.
func (a *analyzer) dangerous(ws []word) {
	// Read the words as written and after quote removal: r''m is rm.
	for _, text := range []string{joinRaw(ws), joinVals(ws)} {
		if c, r := crudeClass(text, a.onHost); c == Destructive {
			a.b.raise(c, r)
			return
		}
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

// crudeClass is the safety net for text the parser could not follow: it
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
	"-delete", "truncate",
)

var hostPower = set("shutdown", "poweroff", "halt", "reboot", "kexec")

// interpreters run code given as arguments; only the safety net reads it.
var interpreters = set(
	"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php",
	"lua", "tclsh", "wish", "guile", "Rscript", "julia", "deno", "bun",
	"osascript", "pwsh", "gdb", "rlwrap",
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
