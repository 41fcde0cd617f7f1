package labsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// The simulated shell is mvdan.cc/sh's interpreter, the same parser the
// policy reasons about. Its handlers keep it inside the simulation: every
// program it would exec is a simulated one (programs.go), every file it
// opens, stats or lists is a simulated one (vfs.go), and its environment
// and working directory are the simulated host's. Nothing reaches the
// machine labsim runs on.

// errKilled tells the interpreter that a program ended because its session
// or its timeout did; the interpreter stops at once, as a killed shell would.
var errKilled = errors.New("killed")

// builtinPrefix marks a shell builtin that the simulator answers instead of
// the interpreter, because the interpreter's version would look at the real
// file system (command -v, type).
const builtinPrefix = "\x00"

// homeDir is where a session starts, on the node and in a container.
const homeDir = "/root"

// baseEnviron is the environment of a root login on a simulated host.
var baseEnviron = []string{
	"HOME=" + homeDir,
	"LANG=C.UTF-8",
	"LOGNAME=root",
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SHELL=/bin/bash",
	"TMPDIR=/tmp",
	"USER=root",
	// The interpreter reads the ids from the real process unless they are set.
	"UID=0", "EUID=0", "GID=0",
}

// shellRun is one shell invocation: its handlers close over the simulated
// place it runs in.
type shellRun struct {
	env   *shellEnv
	shell string    // "bash" or "sh"
	stdin io.Reader // used when the interpreter has no standard input of its own
	wrote atomic.Bool
}

// runScript runs src as the named shell ("bash" or "sh") would. opts are
// shell options as bash takes them (-e, -x, -o pipefail), params the
// positional parameters.
func runScript(ctx context.Context, env *shellEnv, shell, src string, p proc, opts, params []string) int {
	file, err := parseScript(shell, src)
	if err != nil {
		reportSyntax(p.err, shell, err)
		return 2
	}
	if msg := unsupported(file); msg != "" {
		fmt.Fprintf(p.err, "labsim: %s is not simulated\n", msg)
		return 2
	}
	sh := &shellRun{env: env, shell: shell, stdin: p.in}
	r, err := newRunner(sh, p, append(opts, append([]string{"--"}, params...)...))
	if err != nil {
		fmt.Fprintf(p.err, "%s: %v\n", shell, err)
		return 2
	}
	err = r.Run(ctx, file)
	sh.saveWrites()
	return exitCode(ctx, p.err, shell, err)
}

func parseScript(shell, src string) (*syntax.File, error) {
	lang := syntax.LangBash
	if shell == "sh" {
		lang = syntax.LangPOSIX
	}
	return syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
}

// reportSyntax words a parse error as the shell would print it.
func reportSyntax(w io.Writer, shell string, err error) {
	line, msg := uint(1), err.Error()
	var pe syntax.ParseError
	var le syntax.LangError
	switch {
	case errors.As(err, &pe):
		line, msg = pe.Pos.Line(), pe.Text
	case errors.As(err, &le):
		line = le.Pos.Line()
		msg = strings.TrimPrefix(msg, le.Pos.String()+": ")
	}
	if shell == "sh" {
		fmt.Fprintf(w, "sh: %d: Syntax error: %s\n", line, msg)
		return
	}
	fmt.Fprintf(w, "bash: -c: line %d: %s\n", line, msg)
}

// simulatedPID is what $$ and $PPID read: the interpreter would give the
// real process's.
const simulatedPID = "4242"

// unsupported names the first construct in file that the simulator will not
// run, or "". It also runs background jobs in the foreground, so nothing a
// session starts outlives it, and replaces $$ and $PPID.
func unsupported(file *syntax.File) string {
	var msg string
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Word:
			n.Parts = hidePIDs(n.Parts)
		case *syntax.DblQuoted:
			n.Parts = hidePIDs(n.Parts)
		case *syntax.ProcSubst:
			// The interpreter makes a real FIFO for these.
			msg = "process substitution"
		case *syntax.CoprocClause:
			msg = "coproc"
		case *syntax.Stmt:
			n.Background, n.Disown = false, false
		}
		return msg == ""
	})
	return msg
}

func hidePIDs(parts []syntax.WordPart) []syntax.WordPart {
	for i, part := range parts {
		if pe, ok := part.(*syntax.ParamExp); ok && pe.Param != nil && (pe.Param.Value == "$" || pe.Param.Value == "PPID") {
			parts[i] = &syntax.Lit{ValuePos: pe.Pos(), ValueEnd: pe.End(), Value: simulatedPID}
		}
	}
	return parts
}

func newRunner(sh *shellRun, p proc, params []string) (*interp.Runner, error) {
	// Only a real file is handed over as standard input: for any other
	// reader the interpreter starts a goroutine that drains it, and a
	// client may never close its input.
	var in io.Reader
	if f, ok := p.in.(*os.File); ok && f != nil {
		in = f
	}
	r, err := interp.New(
		interp.Env(expand.ListEnviron(p.environ...)),
		interp.StdIO(in, p.out, p.err),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return sh.exec }),
		interp.CallHandler(sh.call),
		interp.OpenHandler(sh.open),
		interp.StatHandler(sh.stat),
		interp.AccessHandler(sh.access),
		interp.ReadDirHandler2(sh.readDir),
		interp.Params(params...),
	)
	if err != nil {
		return nil, fmt.Errorf("start shell: %w", err)
	}
	// Set directly: the Dir option would stat the path on the real host.
	r.Dir = p.dir
	return r, nil
}

// exitCode turns what the interpreter returned into an exit status.
func exitCode(ctx context.Context, stderr io.Writer, shell string, err error) int {
	var st interp.ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.Is(err, errKilled) || ctx.Err() != nil:
		return exitKilled
	}
	fmt.Fprintf(stderr, "%s: %v\n", shell, err)
	return 1
}

// exec runs a program the script calls: always a simulated one.
func (sh *shellRun) exec(ctx context.Context, args []string) (err error) {
	hc := interp.HandlerCtx(ctx)
	defer func() {
		// Pipelines run in goroutines of their own, out of runGuarded's reach.
		if v := recover(); v != nil {
			sh.env.sim.log.Error("labsim bug: program panicked", "args", args, "panic", fmt.Sprint(v))
			fmt.Fprintf(hc.Stderr, "labsim: internal error running %s\n", args[0])
			err = interp.ExitStatus(255)
		}
	}()
	in := hc.Stdin
	if f, ok := in.(*os.File); in == nil || ok && f == nil {
		in = sh.stdin
	}
	p := proc{in: in, out: hc.Stdout, err: hc.Stderr, environ: exported(hc.Env), dir: hc.Dir}
	switch code := sh.env.run(ctx, sh.shell, args, p); code {
	case 0:
		return nil
	case exitKilled:
		return errKilled
	default:
		return interp.ExitStatus(uint8(code))
	}
}

// exported lists the variables a program inherits.
func exported(env expand.Environ) []string {
	var out []string
	env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.IsSet() {
			out = append(out, name+"="+vr.String())
		}
		return true
	})
	return out
}

// call rewrites the builtins whose interpreter versions would consult the
// real host, and gives sh the echo of dash.
func (sh *shellRun) call(_ context.Context, args []string) ([]string, error) {
	switch args[0] {
	case "command":
		if len(args) > 1 && (args[1] == "-v" || args[1] == "-V") {
			return append([]string{builtinPrefix + "command"}, args[1:]...), nil
		}
	case "type":
		return append([]string{builtinPrefix + "type"}, args[1:]...), nil
	case "pwd":
		// pwd -P resolves symlinks on the real host.
		return []string{"pwd"}, nil
	case "echo":
		if sh.shell == "sh" { // dash's echo always interprets escapes
			return append([]string{"echo", "-e"}, args[1:]...), nil
		}
	case "printf":
		// The interpreter's printf honours any width; the simulated one
		// refuses a width that would exhaust memory.
		if format := printfFormat(args); !saneFormat(format) {
			return append([]string{builtinPrefix + "printf"}, args[1:]...), nil
		}
	case "source", ".":
		// A name without a slash is looked up in PATH on the real host;
		// in the simulation it can only be in the working directory.
		if len(args) > 1 && !strings.Contains(args[1], "/") {
			return append([]string{args[0], "./" + args[1]}, args[2:]...), nil
		}
	}
	return args, nil
}

// printfFormat is the format printf's arguments carry.
func printfFormat(args []string) string {
	if len(args) > 1 {
		return args[1]
	}
	return ""
}

// saneFormat reports whether every conversion in a printf format has a
// width and precision the simulated printf accepts.
func saneFormat(format string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
			j++
		}
		if !sanePrintfSpec(format[i+1 : j]) {
			return false
		}
		i = j
	}
	return true
}

// quote renders s as one shell word that reads back unchanged.
func quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// wordLit is the value of a word made only of literal text and quotes, or
// false if it holds an expansion.
func wordLit(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch part := part.(type) {
		case *syntax.Lit:
			b.WriteString(part.Value)
		case *syntax.SglQuoted:
			if part.Dollar {
				return "", false
			}
			b.WriteString(part.Value)
		case *syntax.DblQuoted:
			for _, q := range part.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// calls lists the literal argument lists of raw's simple commands, in
// order; words with expansions read as "".
func calls(raw string) [][]string {
	file, err := parseScript("bash", raw)
	if err != nil {
		return nil
	}
	var out [][]string
	syntax.Walk(file, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			args := make([]string, len(ce.Args))
			for i, w := range ce.Args {
				args[i], _ = wordLit(w)
			}
			out = append(out, args)
		}
		return true
	})
	return out
}

// isControlCommand reports whether raw talks to labsim itself. Drop and
// hang faults spare those, so a fault can always be lifted over SSH.
func isControlCommand(raw string) bool {
	cs := calls(raw)
	return len(cs) > 0 && cs[0][0] == "labsim"
}

// commandVMID finds the container the first pct command in raw targets.
func commandVMID(raw string) int {
	for _, args := range calls(raw) {
		for i := 0; i+2 < len(args); i++ {
			if args[i] != "pct" {
				continue
			}
			if n, err := strconv.Atoi(args[i+2]); err == nil && n >= minVMID && n <= maxVMID {
				return n
			}
		}
	}
	return 0
}
