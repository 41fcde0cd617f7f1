package labsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// shellEnv is where commands run: on a node, or inside one of its containers.
type shellEnv struct {
	sim     *Sim
	host    string
	vmid    int // 0 on the node itself
	faults  faultSet
	session *activeSession
}

func (e *shellEnv) inContainer(vmid int) *shellEnv {
	c := *e
	c.vmid = vmid
	return &c
}

// proc is what a program inherits from whoever starts it.
type proc struct {
	in      io.Reader // nil when there is no input
	out     io.Writer
	err     io.Writer
	environ []string // NAME=value
	dir     string   // working directory
}

// loginProc is what a command an SSH client sends starts with.
func loginProc(in io.Reader, out, err io.Writer) proc {
	return proc{in: in, out: out, err: err, environ: slices.Clone(baseEnviron), dir: homeDir}
}

// maxInput bounds what a command reads from its standard input.
const maxInput = 4 << 20

var shells = map[string]string{
	"sh": "sh", "/bin/sh": "sh", "/usr/bin/sh": "sh", "dash": "sh", "/bin/dash": "sh",
	"bash": "bash", "/bin/bash": "bash", "/usr/bin/bash": "bash",
}

// run starts one program as shell would; shell is "" for a command that
// lxc-attach runs directly, without a shell. It returns the exit status, or
// exitKilled if ctx ended first.
func (e *shellEnv) run(ctx context.Context, shell string, args []string, p proc) int {
	if ctx.Err() != nil {
		return exitKilled
	}
	name := strings.TrimPrefix(args[0], builtinPrefix)
	if sh, ok := shells[name]; ok {
		return e.subshell(ctx, sh, args, p)
	}
	switch path.Base(name) {
	case "sleep":
		return sleepCmd(ctx, args, p)
	case "timeout":
		return e.timeout(ctx, shell, args, p)
	case "env", "nohup", "sudo", "exec":
		return e.wrapper(ctx, shell, args, p)
	case "pct":
		if e.vmid == 0 && len(args) > 1 && args[1] == "exec" {
			return e.pctExec(ctx, args, p)
		}
	}
	b, ok := e.builtins()[path.Base(name)]
	if !ok {
		e.notFound(shell, name, p)
		return 127
	}
	return e.call(ctx, shell, b, append([]string{name}, args[1:]...), p)
}

func (e *shellEnv) notFound(shell, name string, p proc) {
	switch shell {
	case "":
		fmt.Fprintf(p.err, "lxc-attach: %d: ../src/lxc/attach.c: lxc_attach_run_command: 1841 No such file or directory - Failed to exec \"%s\"\n", e.vmid, name)
	case "sh":
		fmt.Fprintf(p.err, "sh: 1: %s: not found\n", name)
	default:
		fmt.Fprintf(p.err, "bash: %s: command not found\n", name)
	}
}

// shellName names the shell in error messages; a command run without one
// reports as bash, as lxc-attach's callers usually are.
func shellName(shell string) string {
	if shell == "" {
		return "bash"
	}
	return shell
}

// wrapper runs env, nohup, sudo and exec: each runs the rest of its
// arguments as a program, env with the variables it was given.
func (e *shellEnv) wrapper(ctx context.Context, shell string, args []string, p proc) int {
	rest := args[1:]
	p.environ = slices.Clone(p.environ)
	for len(rest) > 0 && (isAssignment(rest[0]) || strings.HasPrefix(rest[0], "-")) {
		if isAssignment(rest[0]) {
			p.environ = append(p.environ, rest[0])
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		if path.Base(args[0]) == "env" {
			for _, kv := range p.environ {
				fmt.Fprintln(p.out, kv)
			}
		}
		return 0
	}
	return e.run(ctx, shell, rest, p)
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// subshell runs sh -c, bash -s, sh script.sh and friends through the same
// interpreter as the session's own command.
func (e *shellEnv) subshell(ctx context.Context, shell string, args []string, p proc) int {
	var (
		opts             []string
		haveC, fromStdin bool
		i                = 1
	)
loop:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break loop
		case a == "-o" || a == "+o":
			if i+1 < len(args) && args[i+1] == "pipefail" {
				opts = append(opts, a, "pipefail")
			}
			i++
		case strings.HasPrefix(a, "--"): // --login, --norc, --noprofile
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			for _, ch := range a[1:] {
				switch ch {
				case 'c':
					haveC = true
				case 's':
					fromStdin = true
				case 'e', 'x', 'u':
					opts = append(opts, string(a[0])+string(ch))
				case 'l', 'i', 'v':
				default:
					fmt.Fprintf(p.err, "%s: -%c: invalid option\n", shell, ch)
					return 2
				}
			}
		default:
			break loop
		}
	}
	src, params, code := e.scriptSource(shell, args[i:], haveC, fromStdin, p)
	if code != 0 {
		return code
	}
	return runScript(ctx, e, shell, src, p, opts, params)
}

// scriptSource finds what a shell runs: the -c string, a script file, or
// standard input; and the positional parameters that follow it.
func (e *shellEnv) scriptSource(shell string, rest []string, haveC, fromStdin bool, p proc) (src string, params []string, code int) {
	switch {
	case haveC:
		if len(rest) == 0 {
			fmt.Fprintf(p.err, "%s: -c: option requires an argument\n", shell)
			return "", nil, 2
		}
		if len(rest) > 2 {
			params = rest[2:] // rest[1] is $0
		}
		return rest[0], params, 0
	case !fromStdin && len(rest) > 0:
		data, ok := e.sim.readFile(e, absPath(p.dir, rest[0]))
		if !ok {
			fmt.Fprintf(p.err, "%s: %s: No such file or directory\n", shell, rest[0])
			return "", nil, 127
		}
		return data, rest[1:], 0
	}
	if p.in != nil {
		data, _ := io.ReadAll(io.LimitReader(p.in, maxInput))
		src = string(data)
	}
	return src, rest, 0
}

func sleepCmd(ctx context.Context, args []string, p proc) int {
	if len(args) < 2 {
		fmt.Fprint(p.err, "sleep: missing operand\nTry 'sleep --help' for more information.\n")
		return 1
	}
	var total time.Duration
	for _, a := range args[1:] {
		d, ok := parseDuration(a)
		if !ok {
			fmt.Fprintf(p.err, "sleep: invalid time interval '%s'\nTry 'sleep --help' for more information.\n", a)
			return 1
		}
		total += d
	}
	if !wait(ctx, total) {
		return exitKilled
	}
	return 0
}

// wait sleeps for d unless ctx ends first, and reports whether it slept.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// parseDuration reads coreutils durations: 5, 0.5, 2m, 1h, 1d.
func parseDuration(s string) (time.Duration, bool) {
	unit := time.Second
	switch {
	case strings.HasSuffix(s, "s"):
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		s, unit = s[:len(s)-1], time.Minute
	case strings.HasSuffix(s, "h"):
		s, unit = s[:len(s)-1], time.Hour
	case strings.HasSuffix(s, "d"):
		s, unit = s[:len(s)-1], 24*time.Hour
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e7 {
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}

// timeout runs a command with a deadline and exits 124 when it passes, as
// coreutils timeout does.
func (e *shellEnv) timeout(ctx context.Context, shell string, args []string, p proc) int {
	rest := args[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		if (rest[0] == "-s" || rest[0] == "-k") && len(rest) > 1 {
			rest = rest[1:]
		}
		rest = rest[1:]
	}
	if len(rest) < 2 {
		fmt.Fprint(p.err, "timeout: missing operand\nTry 'timeout --help' for more information.\n")
		return 125
	}
	d, ok := parseDuration(rest[0])
	if !ok {
		fmt.Fprintf(p.err, "timeout: invalid time interval '%s'\nTry 'timeout --help' for more information.\n", rest[0])
		return 125
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	st := e.run(tctx, shell, rest[1:], p)
	if st == exitKilled && ctx.Err() == nil {
		return 124
	}
	return st
}

// pctExec runs a command inside a running container, as lxc-attach does:
// directly, without a shell, in a clean environment. It is not a builtin
// because the command may block and must not hold the state lock.
func (e *shellEnv) pctExec(ctx context.Context, args []string, p proc) int {
	rest := args[2:]
	if len(rest) == 0 {
		fmt.Fprint(p.err, "400 not enough arguments\npct exec <vmid> [<extra-args>]\n")
		return 255
	}
	vmid, err := strconv.Atoi(rest[0])
	if err != nil {
		fmt.Fprintf(p.err, "400 Parameter verification failed.\nvmid: type check ('integer') failed - got '%s'\npct exec <vmid> [<extra-args>]\n", rest[0])
		return 255
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	s := e.sim
	s.mu.Lock()
	ct := s.state.Hosts[e.host].Containers[vmid]
	running := ct != nil && ct.running()
	s.mu.Unlock()
	switch {
	case ct == nil:
		fmt.Fprint(p.err, configMissing(e.host, vmid))
		return 2
	case !running:
		// pve-container src/PVE/CLI/pct.pm exec
		fmt.Fprintf(p.err, "container '%d' not running!\n", vmid)
		return 255
	case len(rest) == 0:
		fmt.Fprint(p.err, "missing command\n")
		return 255
	}
	inner := loginProc(p.in, p.out, p.err)
	return e.inContainer(vmid).run(ctx, "", rest, inner)
}

func configMissing(host string, vmid int) string {
	return fmt.Sprintf("Configuration file 'nodes/%s/lxc/%d.conf' does not exist\n", host, vmid)
}

// builtin is a simulated program. run executes under the state lock unless
// unlocked is set; its output is buffered and written after the lock is
// released, so a slow client never stalls other sessions.
type builtin struct {
	run func(c *call) int
	// stdin reports whether the program reads standard input given these
	// arguments; only then is input read, since a client may never close it.
	stdin    func(args []string) bool
	unlocked bool
}

// call is one run of a builtin.
type call struct {
	env   *shellEnv
	shell string
	name  string
	args  []string
	dir   string
	stdin string
	out   bytes.Buffer
	err   bytes.Buffer
	now   time.Time

	// Set under the state lock.
	st *simState
	hs *hostState
	ct *ctState // nil on the node

	dirty bool          // state changed and must be saved
	sleep time.Duration // wait this long after the lock is released
	block bool          // then wait until the session ends
}

func (c *call) outf(format string, a ...any) { fmt.Fprintf(&c.out, format, a...) }
func (c *call) errf(format string, a ...any) { fmt.Fprintf(&c.err, format, a...) }

// abs resolves a path operand against the working directory.
func (c *call) abs(p string) string { return absPath(c.dir, p) }

func (e *shellEnv) call(ctx context.Context, shell string, b builtin, args []string, p proc) int {
	s := e.sim
	c := &call{env: e, shell: shell, name: path.Base(args[0]), args: args[1:], dir: p.dir, now: s.clock()}
	if b.stdin != nil && b.stdin(c.args) && p.in != nil {
		data, _ := io.ReadAll(io.LimitReader(p.in, maxInput))
		c.stdin = string(data)
	}
	var code int
	if b.unlocked {
		code = b.run(c)
	} else {
		code = s.runLocked(b, c)
	}
	// The session's streams: a failed write is a client gone, which the
	// session's context reports.
	_, _ = p.out.Write(c.out.Bytes())
	_, _ = p.err.Write(c.err.Bytes())
	if c.sleep > 0 && !wait(ctx, c.sleep) {
		return exitKilled
	}
	if c.block {
		<-ctx.Done()
		return exitKilled
	}
	return code
}

func (s *Sim) runLocked(b builtin, c *call) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.st = s.state
	c.dirty = s.state.settle(c.now)
	c.hs = s.state.Hosts[c.env.host]
	if c.env.vmid != 0 {
		c.ct = c.hs.Containers[c.env.vmid]
		if c.ct == nil || !c.ct.running() {
			c.errf("CT %d not running\n", c.env.vmid)
			return 255
		}
	}
	code := b.run(c)
	if c.dirty {
		s.saveSoonLocked()
	}
	return code
}

// saveSoonLocked writes the state after a command changed it, on a
// goroutine of its own, so that commands on other containers do not wait
// for the write. The write waits saveDelay first, or until Close begins,
// and takes every change made meanwhile: a burst of commands is written
// once rather than once each, since encoding the whole fleet costs more
// than a command. Close waits for the last write.
func (s *Sim) saveSoonLocked() {
	if s.saving {
		s.resave = true
		return
	}
	s.saving = true
	s.saves.Add(1)
	go func() {
		defer s.saves.Done()
		for {
			select {
			case <-time.After(saveDelay):
			case <-s.closing:
			}
			s.mu.Lock()
			s.resave = false
			data, err := json.Marshal(s.state)
			s.mu.Unlock()
			if err == nil {
				err = writeFileAtomic(s.statePath, append(data, '\n'), 0o600)
			}
			if err != nil {
				s.log.Error("save state", "path", s.statePath, "err", err)
			}
			s.mu.Lock()
			if !s.resave {
				s.saving = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
	}()
}

// saveDelay is how long a change to the state waits to be written with
// the changes after it.
const saveDelay = 100 * time.Millisecond

func (s *Sim) saveLocked() {
	if err := saveState(s.statePath, s.state); err != nil {
		s.log.Error("save state", "path", s.statePath, "err", err)
	}
}

// binDir is where a builtin would live on disk, for command -v and which.
func binDir(name string) string {
	switch name {
	case "pct", "qm", "pvesh", "pveam", "pvesm", "ha-manager", "pveversion", "apt-get", "apt", "dpkg", "getent", "ss", "ping", "shutdown":
		return "/usr/sbin/"
	case "labsim":
		return "/usr/local/bin/"
	}
	return "/usr/bin/"
}

// isShellBuiltin reports whether name is built into the shell c runs in.
func (c *call) isShellBuiltin(name string) bool {
	if c.shell == "" {
		return false
	}
	return interp.IsBuiltin(name) || name == "command" || name == "type"
}

// knows reports whether name would run, as command -v and which find it.
func (c *call) knows(name string) bool {
	_, program := c.env.builtins()[name]
	_, shell := shells[name]
	return program || shell || name == "sleep" || name == "timeout" || c.isShellBuiltin(name)
}

func commandCmd(c *call) int {
	if len(c.args) < 2 || (c.args[0] != "-v" && c.args[0] != "-V") {
		c.errf("labsim: command: only command -v is simulated\n")
		return 2
	}
	code := 0
	for _, name := range c.args[1:] {
		if !c.knows(name) {
			code = 1
			continue
		}
		if c.isShellBuiltin(name) {
			c.outf("%s\n", name)
		} else {
			c.outf("%s%s\n", binDir(name), name)
		}
	}
	return code
}

func whichCmd(c *call) int {
	code := 0
	for _, name := range operands(c.args) {
		if !c.knows(name) {
			code = 1
			continue
		}
		c.outf("%s%s\n", binDir(name), name)
	}
	return code
}
