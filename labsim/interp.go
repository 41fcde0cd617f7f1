package labsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
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

type stdio struct {
	in  io.Reader // nil when there is no input
	out io.Writer
	err io.Writer
}

// maxInput bounds what a command reads from its standard input.
const maxInput = 4 << 20

// runScript runs src as the named shell ("bash" or "sh") would.
func runScript(ctx context.Context, env *shellEnv, shell, src string, std stdio) int {
	r := &runner{env: env, shell: shell}
	return r.script(ctx, src, std)
}

// runner interprets one shell invocation. shell is "" for a command that
// lxc-attach runs directly, without a shell.
type runner struct {
	env                       *shellEnv
	shell                     string
	errexit, pipefail, xtrace bool
	status                    int
	exited                    bool
}

func (r *runner) script(ctx context.Context, src string, std stdio) int {
	prog, err := parse(src)
	if err != nil {
		msg := err.Error()
		var se *syntaxError
		if errors.As(err, &se) {
			msg = se.msg
		}
		if r.shell == "sh" {
			fmt.Fprintf(std.err, "sh: 1: Syntax error: %s\n", msg)
		} else {
			fmt.Fprintf(std.err, "bash: -c: line 1: %s\n", msg)
		}
		return 2
	}
	for _, ao := range prog {
		st := r.andOr(ctx, ao, std)
		if st == exitKilled {
			return exitKilled
		}
		r.status = st
		if r.exited {
			break
		}
	}
	return r.status
}

func (r *runner) andOr(ctx context.Context, ao andOr, std stdio) int {
	st := r.pipeline(ctx, ao.pipes[0], std)
	last := 0
	for i, op := range ao.ops {
		if r.exited || st == exitKilled {
			return st
		}
		if (op == "&&") != (st == 0) {
			continue
		}
		st = r.pipeline(ctx, ao.pipes[i+1], std)
		last = i + 1
	}
	// set -e ignores failures on the left of && and ||, and negated ones.
	if st > 0 && r.errexit && last == len(ao.pipes)-1 && !ao.pipes[last].neg {
		r.exited = true
	}
	return st
}

func (r *runner) pipeline(ctx context.Context, p pipeline, std stdio) int {
	if ctx.Err() != nil {
		return exitKilled
	}
	st := 0
	in := std.in
	worst := 0
	for i, c := range p.cmds {
		s := std
		s.in = in
		var buf bytes.Buffer
		if i < len(p.cmds)-1 {
			s.out = &buf
		}
		st = r.simple(ctx, c, s)
		if st == exitKilled {
			return exitKilled
		}
		if st != 0 {
			worst = st
		}
		in = &buf
	}
	if r.pipefail {
		st = worst
	}
	if p.neg {
		if st == 0 {
			return 1
		}
		return 0
	}
	return st
}

// fileSink collects a command's redirected output; it reaches the
// simulated file system when the command ends.
type fileSink struct {
	path   string
	append bool
	buf    bytes.Buffer
}

func (r *runner) simple(ctx context.Context, c command, std stdio) int {
	if r.xtrace && len(c.args) > 0 {
		fmt.Fprintf(std.err, "+ %s\n", quoteArgs(c.args))
	}
	std, sinks, err := r.redirect(c.redirs, std)
	if err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", shellName(r.shell), err)
		return 1
	}
	st := 0
	if len(c.args) > 0 {
		st = r.exec(ctx, c.args, std)
	}
	if len(sinks) > 0 {
		s := r.env.sim
		s.mu.Lock()
		if files := s.filesLocked(r.env); files != nil {
			for _, k := range sinks {
				if k.append {
					files[k.path] += k.buf.String()
				} else {
					files[k.path] = k.buf.String()
				}
			}
			s.saveLocked()
		}
		s.mu.Unlock()
	}
	return st
}

// shellName names the shell in error messages; a command run without one
// reports as bash, as lxc-attach's callers usually are.
func shellName(shell string) string {
	if shell == "" {
		return "bash"
	}
	return shell
}

func (r *runner) redirect(rs []redir, std stdio) (stdio, []*fileSink, error) {
	var sinks []*fileSink
	for _, rd := range rs {
		switch rd.op {
		case "<":
			data, ok := r.env.sim.readFile(r.env, rd.target)
			if !ok {
				return std, nil, fmt.Errorf("%s: No such file or directory", rd.target)
			}
			if rd.fd == 0 {
				std.in = strings.NewReader(data)
			}
			continue
		case ">&":
			var w io.Writer
			switch rd.target {
			case "1":
				w = std.out
			case "2":
				w = std.err
			case "-":
				w = io.Discard
			default:
				return std, nil, fmt.Errorf("%s: Bad file descriptor", rd.target)
			}
			setFD(&std, rd.fd, w)
			continue
		}
		var w io.Writer
		switch rd.target {
		case "/dev/null":
			w = io.Discard
		case "/dev/stdout":
			w = std.out
		case "/dev/stderr":
			w = std.err
		default:
			p := cleanPath(rd.target)
			if readOnlyPath(p) {
				return std, nil, fmt.Errorf("%s: Read-only file system", rd.target)
			}
			k := &fileSink{path: p, append: rd.op == ">>"}
			sinks = append(sinks, k)
			w = &k.buf
		}
		if rd.fd == -1 {
			std.out, std.err = w, w
		} else {
			setFD(&std, rd.fd, w)
		}
	}
	return std, sinks, nil
}

func setFD(std *stdio, fd int, w io.Writer) {
	switch fd {
	case 1:
		std.out = w
	case 2:
		std.err = w
	}
}

func cleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/root/" + p
	}
	return path.Clean(p)
}

func readOnlyPath(p string) bool {
	return strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/sys/")
}

// unsupported are words that start shell syntax the simulator does not run.
var unsupported = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true,
	"for": true, "while": true, "until": true, "do": true, "done": true,
	"case": true, "esac": true, "function": true, "{": true, "}": true,
	"[[": true, "select": true,
}

var shells = map[string]string{
	"sh": "sh", "/bin/sh": "sh", "/usr/bin/sh": "sh", "dash": "sh", "/bin/dash": "sh",
	"bash": "bash", "/bin/bash": "bash", "/usr/bin/bash": "bash",
}

func (r *runner) exec(ctx context.Context, args []string, std stdio) int {
	if ctx.Err() != nil {
		return exitKilled
	}
	name := args[0]
	if sh, ok := shells[name]; ok {
		return r.subshell(ctx, sh, args, std)
	}
	switch name {
	case "exit":
		code := r.status
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				fmt.Fprintf(std.err, "%s: exit: %s: numeric argument required\n", shellName(r.shell), args[1])
				n = 2
			}
			code = n & 0xff
		}
		r.exited = true
		return code
	case "set":
		r.setOptions(args[1:])
		return 0
	case "sleep":
		return r.sleep(ctx, args, std)
	case "timeout":
		return r.timeout(ctx, args, std)
	case "env", "nohup", "sudo", "exec":
		rest := args[1:]
		for len(rest) > 0 && (isAssignment(rest[0]) || strings.HasPrefix(rest[0], "-")) {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return 0
		}
		st := r.exec(ctx, rest, std)
		if name == "exec" {
			r.exited = true
		}
		return st
	case "pct":
		if r.env.vmid == 0 && len(args) > 1 && args[1] == "exec" {
			return r.pctExec(ctx, args, std)
		}
	}
	if unsupported[name] {
		fmt.Fprintf(std.err, "labsim: %s: shell syntax not supported by the simulator (use ;, &&, ||, pipes and redirections)\n", name)
		r.exited = true
		return 2
	}
	b, ok := r.env.builtins()[path.Base(name)]
	if !ok {
		r.notFound(name, std)
		return 127
	}
	return r.call(ctx, b, args, std)
}

func (r *runner) notFound(name string, std stdio) {
	switch r.shell {
	case "":
		fmt.Fprintf(std.err, "lxc-attach: %d: ../src/lxc/attach.c: lxc_attach_run_command: 1841 No such file or directory - Failed to exec \"%s\"\n", r.env.vmid, name)
	case "sh":
		fmt.Fprintf(std.err, "sh: 1: %s: not found\n", name)
	default:
		fmt.Fprintf(std.err, "bash: %s: command not found\n", name)
	}
}

func (r *runner) setOptions(args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			continue
		}
		on := a[0] == '-'
		for _, ch := range a[1:] {
			switch ch {
			case 'e':
				r.errexit = on
			case 'x':
				r.xtrace = on
			case 'o':
				if i+1 < len(args) && args[i+1] == "pipefail" {
					r.pipefail = on
					i++
				}
			}
		}
	}
}

// subshell runs sh -c, bash -s, sh script.sh and friends.
func (r *runner) subshell(ctx context.Context, shell string, args []string, std stdio) int {
	nr := &runner{env: r.env, shell: shell}
	var (
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
				nr.pipefail = a == "-o"
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
				case 'e':
					nr.errexit = a[0] == '-'
				case 'x':
					nr.xtrace = a[0] == '-'
				case 'u', 'l', 'i', 'v':
				default:
					fmt.Fprintf(std.err, "%s: -%c: invalid option\n", shell, ch)
					return 2
				}
			}
		default:
			break loop
		}
	}
	var src string
	switch {
	case haveC:
		if i >= len(args) {
			fmt.Fprintf(std.err, "%s: -c: option requires an argument\n", shell)
			return 2
		}
		src = args[i]
	case !fromStdin && i < len(args):
		data, ok := r.env.sim.readFile(r.env, args[i])
		if !ok {
			fmt.Fprintf(std.err, "%s: %s: No such file or directory\n", shell, args[i])
			return 127
		}
		src = data
	default:
		if std.in != nil {
			data, _ := io.ReadAll(io.LimitReader(std.in, maxInput))
			src = string(data)
		}
	}
	return nr.script(ctx, src, std)
}

func (r *runner) sleep(ctx context.Context, args []string, std stdio) int {
	if len(args) < 2 {
		fmt.Fprint(std.err, "sleep: missing operand\nTry 'sleep --help' for more information.\n")
		return 1
	}
	var total time.Duration
	for _, a := range args[1:] {
		d, ok := parseDuration(a)
		if !ok {
			fmt.Fprintf(std.err, "sleep: invalid time interval '%s'\nTry 'sleep --help' for more information.\n", a)
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
func (r *runner) timeout(ctx context.Context, args []string, std stdio) int {
	rest := args[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		if (rest[0] == "-s" || rest[0] == "-k") && len(rest) > 1 {
			rest = rest[1:]
		}
		rest = rest[1:]
	}
	if len(rest) < 2 {
		fmt.Fprint(std.err, "timeout: missing operand\nTry 'timeout --help' for more information.\n")
		return 125
	}
	d, ok := parseDuration(rest[0])
	if !ok {
		fmt.Fprintf(std.err, "timeout: invalid time interval '%s'\nTry 'timeout --help' for more information.\n", rest[0])
		return 125
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	st := r.exec(tctx, rest[1:], std)
	if st == exitKilled && ctx.Err() == nil {
		return 124
	}
	return st
}

// pctExec runs a command inside a running container. It is handled here
// rather than as a builtin because the command may block and must not hold
// the state lock.
func (r *runner) pctExec(ctx context.Context, args []string, std stdio) int {
	rest := args[2:]
	if len(rest) == 0 {
		fmt.Fprint(std.err, "400 not enough arguments\npct exec <vmid> [<extra-args>]\n")
		return 255
	}
	vmid, err := strconv.Atoi(rest[0])
	if err != nil {
		fmt.Fprintf(std.err, "400 Parameter verification failed.\nvmid: type check ('integer') failed - got '%s'\npct exec <vmid> [<extra-args>]\n", rest[0])
		return 255
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	s := r.env.sim
	s.mu.Lock()
	ct := s.state.Hosts[r.env.host].Containers[vmid]
	running := ct != nil && ct.running()
	s.mu.Unlock()
	switch {
	case ct == nil:
		fmt.Fprint(std.err, configMissing(r.env.host, vmid))
		return 2
	case !running:
		fmt.Fprintf(std.err, "CT %d not running\n", vmid)
		return 255
	case len(rest) == 0:
		fmt.Fprint(std.err, "missing command\n")
		return 255
	}
	inner := &runner{env: r.env.inContainer(vmid)}
	return inner.exec(ctx, rest, std)
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

func (r *runner) call(ctx context.Context, b builtin, args []string, std stdio) int {
	s := r.env.sim
	c := &call{env: r.env, shell: r.shell, name: path.Base(args[0]), args: args[1:], now: s.clock()}
	if b.stdin != nil && b.stdin(c.args) && std.in != nil {
		data, _ := io.ReadAll(io.LimitReader(std.in, maxInput))
		c.stdin = string(data)
	}
	var code int
	if b.unlocked {
		code = b.run(c)
	} else {
		code = s.runLocked(b, c)
	}
	std.out.Write(c.out.Bytes())
	std.err.Write(c.err.Bytes())
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
		s.saveLocked()
	}
	return code
}

func (s *Sim) saveLocked() {
	if err := saveState(s.statePath, s.state); err != nil {
		s.log.Error("save state", "path", s.statePath, "error", err)
	}
}

// filesLocked is the file system commands in env see; nil if the container
// is gone.
func (s *Sim) filesLocked(env *shellEnv) map[string]string {
	hs := s.state.Hosts[env.host]
	if env.vmid == 0 {
		if hs.Files == nil {
			hs.Files = map[string]string{}
		}
		return hs.Files
	}
	if ct := hs.Containers[env.vmid]; ct != nil {
		return ct.Guest.Files
	}
	return nil
}

func (s *Sim) readFile(env *shellEnv, p string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readFileLocked(env, p)
}

func (s *Sim) readFileLocked(env *shellEnv, p string) (string, bool) {
	p = cleanPath(p)
	if files := s.filesLocked(env); files != nil {
		if data, ok := files[p]; ok {
			return data, true
		}
	}
	if env.vmid != 0 {
		return "", false
	}
	switch p {
	case "/etc/os-release":
		return hostOSRelease, true
	case "/etc/hostname":
		return env.host + "\n", true
	case "/etc/resolv.conf":
		return "search lan\nnameserver 1.1.1.1\n", true
	}
	if id, ok := strings.CutPrefix(p, "/etc/pve/lxc/"); ok {
		if vmid, err := strconv.Atoi(strings.TrimSuffix(id, ".conf")); err == nil && strings.HasSuffix(id, ".conf") {
			if ct := s.state.Hosts[env.host].Containers[vmid]; ct != nil {
				return pctConfig(ct), true
			}
		}
	}
	return "", false
}
