package policy

import (
	"cmp"
	"strings"
)

// Programs that run other programs are never read-only: what they run is
// followed and classified in turn, and can only raise the class.

// addWrapperRules adds the rules of the wrapper commands.
func addWrapperRules(rules map[string]rule, modelsPaths map[string]bool) {
	rules["sudo"] = ruleSudo
	rules["sudoedit"] = ruleEditor("sudoedit")
	rules["doas"] = ruleDoas
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
	for _, n := range []string{"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "rbash", "posh", "yash", "fish", "csh", "tcsh"} {
		rules[n] = ruleShell(n)
	}
	rules["eval"] = ruleEval
	rules["alias"] = ruleAlias
	rules["trap"] = ruleTrap
	rules["source"] = func(a *analyzer, _ []word, _ int) (Class, string) {
		return a.opaqueClass("source runs a script file")
	}
	rules["."] = func(a *analyzer, _ []word, _ int) (Class, string) {
		return a.opaqueClass(". runs a script file")
	}
	// Programs that run a command given after options this classifier does
	// not model: code it cannot read, destructive if their words say so.
	for _, n := range []string{"nsenter", "unshare", "systemd-run", "setpriv", "prlimit", "taskset", "chrt",
		"numactl", "cgexec", "firejail", "strace", "ltrace", "script", "parallel", "at", "batch", "screen",
		"tmux", "sg", "newgrp", "lxc-execute", "expect", "dbus-launch", "faketime", "catchsegv", "valgrind",
		"systemd-nspawn", "machinectl", "unbuffer", "pkexec", "sshpass", "cpulimit", "nocache", "proxychains",
		"torsocks", "fakeroot", "setarch", "linux32", "linux64", "daemonize", "start-stop-daemon", "runcon"} {
		rules[n] = ruleOpaqueWrapper(n)
	}
}

var sudoEdit = ruleEditor("sudo -e")

// stdin stands for the words xargs reads from its input.
var stdin = word{val: "$XARGS_INPUT", raw: "$XARGS_INPUT", dynamic: true, expands: true}

// joinScript joins words that a shell will read again as a script, keeping
// the expansions of those known only at run time as written.
func joinScript(ws []word) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.val
		if !w.static() {
			parts[i] = w.raw
		}
	}
	return strings.Join(parts, " ")
}

// wrapper runs the command that follows its options.
func wrapper(name, shortVal string, longVal []string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		p := parseOpts(args, shortVal, longVal, true)
		if len(p.operands) > 0 {
			a.argv(p.operands, depth)
		}
		return cfgf("%s runs another program", name)
	}
}

// envAssignments skips NAME=value words at the front of argv, raising the
// class when one changes what programs run or load.
func (a *analyzer) envAssignments(who string, argv []word) []word {
	for len(argv) > 0 {
		n, _, ok := strings.Cut(argv[0].val, "=")
		if !ok || !isShellName(n) {
			break
		}
		if codeEnv[n] {
			a.opaque(who + " sets " + n + ", which changes what programs run or load")
		}
		argv = argv[1:]
	}
	return argv
}

// ruleCommand: command -v and -V only say what a name is; otherwise command
// runs it, skipping shell functions.
func ruleCommand(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "", nil, true)
	if !p.has("-v", "-V") && len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return cfgf("command runs another program")
}

func ruleSudo(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "CDghpRrTtUu", []string{"chdir", "close-from", "group", "host", "prompt", "role", "type", "command-timeout", "other-user", "user", "chroot"}, true)
	if p.has("-e", "--edit") {
		return sudoEdit(a, p.operands, depth)
	}
	if p.has("-R", "--chroot") {
		a.opaque("sudo --chroot runs programs from another root")
	}
	if p.has("-b", "--background") {
		a.notRO("sudo -b runs a command in the background")
	}
	cmd := a.envAssignments("sudo", p.operands)
	switch {
	case len(cmd) == 0:
		if p.has("-l", "--list", "-v", "--validate", "-k", "-K", "--reset-timestamp", "-V", "--version") {
			return cfgf("sudo checks or changes its credentials")
		}
		return a.opaqueClass("sudo without a command opens a shell")
	case p.has("-s", "--shell", "-i", "--login"):
		if anyDynamic(cmd) {
			a.script(joinScript(cmd), depth+1)
			if c, r := crudeClass(joinRaw(cmd), a.onHost); c == Destructive {
				return c, r
			}
			return a.opaqueClass("sudo -s with a command only known at run time")
		}
		a.script(joinVals(cmd), depth+1)
	default:
		a.argv(cmd, depth)
	}
	return cfgf("sudo runs another program as another user")
}

func ruleDoas(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "aCu", nil, true)
	switch {
	case p.has("-s"):
		return a.opaqueClass("doas -s opens a shell")
	case len(p.operands) == 0:
		return cfgf("doas without a command")
	}
	a.argv(p.operands, depth)
	return cfgf("doas runs another program as another user")
}

func ruleTimeout(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "sk", []string{"signal", "kill-after"}, true)
	if len(p.operands) < 2 {
		return cfgf("timeout without a command")
	}
	a.argv(p.operands[1:], depth)
	return cfgf("timeout runs another program")
}

func ruleIonice(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cnpPu", []string{"class", "classdata", "pid", "pgid", "uid"}, true)
	if p.has("-p", "-P", "-u", "--pid", "--pgid", "--uid") {
		return cfgf("ionice -p changes the priority of running processes")
	}
	if len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return cfgf("ionice runs another program")
}

// ruleChroot: the command runs from another root, where its name may be
// any program at all.
func ruleChroot(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "", []string{"userspec", "groups"}, true)
	if len(p.operands) < 2 {
		return a.opaqueClass("chroot without a command opens a shell")
	}
	a.argv(p.operands[1:], depth)
	return a.opaqueClass("chroot runs a program from another root")
}

func ruleTime(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "fo", []string{"format", "output"}, true)
	for _, o := range p.values("-o", "--output") {
		a.writeTo(o.word, "time -o")
	}
	if len(p.operands) > 0 {
		a.argv(p.operands, depth)
	}
	return cfgf("time runs another program")
}

func ruleWatch(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "nq", []string{"interval", "equexit"}, true)
	if len(p.operands) == 0 {
		return cfgf("watch without a command")
	}
	if p.has("-x", "--exec") {
		a.argv(p.operands, depth)
	} else if anyDynamic(p.operands) {
		a.script(joinScript(p.operands), depth+1)
		if c, r := crudeClass(joinRaw(p.operands), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass("watch with a command only known at run time")
	} else {
		a.script(joinVals(p.operands), depth+1)
	}
	return cfgf("watch runs a command again and again")
}

func ruleFlock(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "wEc", []string{"timeout", "conflict-exit-code", "command"}, true)
	if cmd, ok := p.value("-c", "--command"); ok {
		a.script(cmd, depth+1)
	} else if len(p.operands) > 1 {
		a.argv(p.operands[1:], depth)
	}
	if len(p.operands) > 0 {
		a.writeTo(p.operands[0], "flock")
	}
	return cfgf("flock creates a lock file and runs another program")
}

// ruleXargs: xargs appends the words it reads to the command (or puts them
// where -I's string is), so the command's arguments are only known at run
// time: echo reboot | xargs systemctl reboots.
func ruleXargs(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "adEILnPs", []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}, true)
	for _, o := range p.values("-a", "--arg-file") {
		a.reads(o.word, "xargs -a")
	}
	repl := ""
	if v, ok := p.value("-I"); ok {
		repl = v
	}
	// -i[R] and --replace[=R] take their string only attached.
	for _, w := range args[:len(args)-len(p.operands)] {
		if r, ok := strings.CutPrefix(w.val, "-i"); ok {
			repl = cmp.Or(r, "{}")
		}
		if r, ok := strings.CutPrefix(w.val, "--replace"); ok {
			repl = cmp.Or(strings.TrimPrefix(r, "="), "{}")
		}
	}
	cmd := p.operands
	if len(cmd) == 0 {
		cmd = []word{{val: "echo", raw: "echo"}}
	}
	inner := make([]word, 0, len(cmd)+1)
	for _, w := range cmd {
		if repl != "" && strings.Contains(w.val, repl) {
			w = stdin
		}
		inner = append(inner, w)
	}
	// With -I the input goes where the string is; judge it appended too,
	// in case the string is not where it seems (-ifoo).
	inner = append(inner, stdin)
	a.argv(inner, depth)
	return cfgf("xargs runs a command with arguments read from its input")
}

func ruleEnv(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "uCSa", []string{"unset", "chdir", "split-string", "argv0"}, true)
	if cmd, ok := p.value("-S", "--split-string"); ok {
		if anyDynamic(args) {
			a.script(cmd+" "+joinScript(p.operands), depth+1)
			return a.opaqueClass("env -S with a command only known at run time")
		}
		a.script(cmd+" "+joinVals(p.operands), depth+1)
		return cfgf("env -S splits a string into a command")
	}
	cmd := a.envAssignments("env", p.operands)
	if len(cmd) == 0 {
		a.secret("env without a command prints the environment")
		return cfgf("env sets or prints the environment")
	}
	a.argv(cmd, depth)
	return cfgf("env runs another program")
}

func ruleSu(a *analyzer, args []word, depth int) (Class, string) {
	p := parseOpts(args, "cgGswuC", []string{"command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"}, false)
	if sh, ok := p.value("-s", "--shell"); ok {
		if !shells[baseName(sh)] {
			return a.opaqueClass("su -s " + sh + " runs a program as the shell")
		}
	}
	c, why := cfgf("su runs a command as another user")
	ran := false
	for _, name := range []string{"-c", "--command", "--session-command", "-C"} {
		if cmd, ok := p.value(name); ok {
			a.script(cmd, depth+1)
			ran = true
		}
	}
	if p.has("-u", "--user") {
		for i, w := range args {
			if w.val == "--" && i+1 < len(args) {
				a.argv(args[i+1:], depth)
				return c, why
			}
		}
	}
	if len(p.operands) > 1 {
		// Words after the user go to the shell: a script file, or -c.
		return a.opaqueClass("su passes arguments to the user's shell")
	}
	if !ran {
		return a.opaqueClass("su without -c opens a shell")
	}
	return c, why
}

func baseName(p string) string {
	b, _ := commandBase(p)
	return b
}

var shells = set("sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "rbash", "posh", "yash")

// ruleShell follows sh -c SCRIPT into SCRIPT; a shell that reads a file or
// standard input runs something the classifier cannot see.
func ruleShell(name string) rule {
	return func(a *analyzer, args []word, depth int) (Class, string) {
		if !shells[name] {
			return a.opaqueClass(name + " is a shell the classifier does not read")
		}
		hasC, hasS := false, false
		i := 0
	opts:
		for ; i < len(args); i++ {
			w := args[i]
			v := w.val
			switch {
			case !w.static():
				if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
					return c, r
				}
				return a.opaqueClass(name + " with options only known at run time")
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
			if !operands[0].static() {
				if c, r := crudeClass(operands[0].raw, a.onHost); c == Destructive {
					return c, r
				}
				return a.opaqueClass(name + " -c with a script only known at run time")
			}
			a.script(operands[0].val, depth+1)
			return ReadOnly, ""
		case hasC:
			return cfgf("%s -c without a script", name)
		case hasS || len(operands) == 0:
			return a.opaqueClass(name + " runs a script from standard input")
		default:
			return a.opaqueClass(name + " runs the script file " + operands[0].val)
		}
	}
}

func ruleEval(a *analyzer, args []word, depth int) (Class, string) {
	if anyDynamic(args) {
		a.script(joinScript(args), depth+1)
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		return a.opaqueClass("eval of a script only known at run time")
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

func ruleOpaqueWrapper(name string) rule {
	return func(a *analyzer, args []word, _ int) (Class, string) {
		if c, r := crudeClass(joinRaw(args), a.onHost); c == Destructive {
			return c, r
		}
		if what, ok := mentionsSecret(joinVals(args)); ok {
			a.secret(name + " mentions " + what)
		}
		return a.opaqueClass(name + " runs a command the classifier does not follow")
	}
}
