package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// walker walks one parsed script.
type walker struct {
	a     *analyzer
	src   string
	depth int
	// bashOnly is set by syntax dash reads differently: $'...' (whose \'
	// does not end the string in bash), ((...)) (two subshells in dash) and
	// extended globs such as !(...) (a negated subshell in dash).
	bashOnly bool
}

func (w *walker) stmts(ss []*syntax.Stmt) {
	for _, s := range ss {
		w.stmt(s)
	}
}

func (w *walker) stmt(s *syntax.Stmt) {
	if s == nil {
		return
	}
	if s.Background || s.Coprocess || s.Disown {
		w.a.notRO("runs a command in the background")
	}
	for _, r := range s.Redirs {
		w.redirect(r)
	}
	if s.Cmd != nil {
		w.command(s.Cmd)
	}
}

func (w *walker) command(cmd syntax.Command) {
	a := w.a
	switch c := cmd.(type) {
	case *syntax.CallExpr:
		w.call(c)
	case *syntax.BinaryCmd:
		w.stmt(c.X)
		w.stmt(c.Y)
	case *syntax.Block:
		w.stmts(c.Stmts)
	case *syntax.Subshell:
		w.stmts(c.Stmts)
	case *syntax.IfClause:
		a.notRO("uses shell control flow")
		for ic := c; ic != nil; ic = ic.Else {
			w.stmts(ic.Cond)
			w.stmts(ic.Then)
		}
	case *syntax.WhileClause:
		a.notRO("uses shell control flow")
		w.stmts(c.Cond)
		w.stmts(c.Do)
	case *syntax.ForClause:
		a.notRO("uses shell control flow")
		w.forClause(c)
	case *syntax.CaseClause:
		a.notRO("uses shell control flow")
		w.expansions(c.Word)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				w.expansions(p)
			}
			w.stmts(it.Stmts)
		}
	case *syntax.FuncDecl:
		a.notRO("defines a shell function")
		w.funcDecl(c)
	case *syntax.ArithmCmd:
		a.notRO("evaluates arithmetic")
		w.bashOnly = true
		w.arith(c.X)
	case *syntax.TestClause:
		a.notRO("uses [[ ]], which evaluates arithmetic and array subscripts")
		w.evaluated(c.X)
	case *syntax.DeclClause:
		w.decl(c)
	case *syntax.LetClause:
		a.notRO("let evaluates arithmetic")
		for _, x := range c.Exprs {
			w.arith(x)
		}
	case *syntax.TimeClause:
		a.notRO("time runs another program")
		w.stmt(c.Stmt)
	case *syntax.CoprocClause:
		a.notRO("starts a coprocess")
		if c.Name != nil {
			w.expansions(c.Name)
		}
		w.stmt(c.Stmt)
	default:
		a.uncertain(nodeText(cmd, w.src), "a shell construct the classifier does not know")
	}
}

func (w *walker) forClause(c *syntax.ForClause) {
	switch l := c.Loop.(type) {
	case *syntax.WordIter:
		if l.Name != nil {
			w.a.assign(l.Name.Value)
		}
		for _, x := range l.Items {
			w.expansions(x)
		}
	case *syntax.CStyleLoop:
		w.arith(l.Init)
		w.arith(l.Cond)
		w.arith(l.Post)
	}
	w.stmts(c.Do)
}

// funcDecl walks a function's body as called from where it is defined, and
// records the function so calls to it are followed.
func (w *walker) funcDecl(c *syntax.FuncDecl) {
	a := w.a
	name := ""
	if c.Name != nil {
		name = c.Name.Value
	}
	a.funcs = append(a.funcs, name)
	if a.calls == nil {
		a.calls = map[string][]string{}
	}
	if _, ok := a.calls[name]; !ok {
		a.calls[name] = nil
	}
	w.stmt(c.Body)
	a.funcs = a.funcs[:len(a.funcs)-1]
}

// call classifies a simple command.
func (w *walker) call(c *syntax.CallExpr) {
	for _, as := range c.Assigns {
		w.assign(as)
	}
	if len(c.Args) == 0 {
		return
	}
	words := make([]word, len(c.Args))
	for i, x := range c.Args {
		w.expansions(x)
		words[i] = wordOf(x, w.src)
	}
	w.a.argv(words, w.depth)
}

// codeEnv are variables that make programs load or run other code, or that
// change which program a name runs.
var codeEnv = set(
	"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV",
	"SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "GCONV_PATH",
	"PYTHONPATH", "PYTHONSTARTUP", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT",
	"NODE_OPTIONS", "PAGER", "EDITOR", "VISUAL", "LESSOPEN", "LESSCLOSE",
	"MANPAGER", "SYSTEMD_PAGER", "SYSTEMD_EDITOR", "GIT_SSH_COMMAND",
	"SSH_ASKPASS", "SUDO_ASKPASS", "APT_CONFIG", "TAR_OPTIONS", "CURL_HOME",
	"WGETRC", "BROWSER", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL",
)

// assign classifies NAME=value, for the shell or for one command.
func (w *walker) assign(as *syntax.Assign) {
	a := w.a
	name := ""
	if as.Name != nil {
		name = as.Name.Value
	}
	a.notRO("assigns a shell variable")
	a.assign(name)
	if codeEnv[name] {
		a.opaque("sets " + name + ", which changes what programs run or load")
	}
	if as.Index != nil {
		w.arith(as.Index)
	}
	if as.Value != nil {
		w.expansions(as.Value)
		if v := wordOf(as.Value, w.src); v.static() {
			// An assigned string may be evaluated later: in arithmetic, as a
			// subscript, or through ${x@P}.
			w.hidden(v.val, "assigns a string bash may evaluate")
		}
	}
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			if e.Index != nil {
				w.arith(e.Index)
			}
			if e.Value != nil {
				w.expansions(e.Value)
			}
		}
	}
}

// decl classifies declare, export, local, readonly and typeset.
func (w *walker) decl(c *syntax.DeclClause) {
	a := w.a
	variant := c.Variant.Value
	a.notRO(variant + " declares shell variables")
	names, printing := 0, false
	for _, as := range c.Args {
		if as.Naked && as.Name == nil && as.Value != nil {
			w.expansions(as.Value)
			v := wordOf(as.Value, w.src)
			if v.static() && len(v.val) > 1 && (v.val[0] == '-' || v.val[0] == '+') {
				if strings.ContainsRune(v.val, 'p') {
					printing = true
				}
				continue
			}
			names++
			if !v.static() {
				continue
			}
			w.hidden(v.val, variant+" evaluates its arguments")
			n, _, _ := strings.Cut(v.val, "=")
			a.assign(n)
			if codeEnv[n] {
				a.opaque("sets " + n + ", which changes what programs run or load")
			}
			continue
		}
		names++
		w.assign(as)
	}
	if printing || names == 0 {
		a.secret(variant + " prints variables")
	}
}

// redirect classifies one redirection.
func (w *walker) redirect(r *syntax.Redirect) {
	a := w.a
	if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
		a.notRO("assigns a file descriptor to a variable")
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		a.notRO("uses a here-document")
		if r.Hdoc != nil {
			w.expansions(r.Hdoc)
		}
		return
	}
	if r.Word == nil {
		a.notRO("has a redirection without a target")
		return
	}
	w.expansions(r.Word)
	t := wordOf(r.Word, w.src)
	switch r.Op {
	case syntax.WordHdoc:
		return
	case syntax.RdrIn:
		a.reads(t, "")
		return
	case syntax.DplIn:
		return
	case syntax.DplOut:
		if t.static() && (t.val == "-" || t.val != "" && allBytes(t.val, isDigit)) {
			return
		}
	case syntax.RdrInOut:
		a.reads(t, "")
	}
	a.writeTo(t, "")
}

// expansions classifies what running the shell's expansions on n does:
// command and process substitutions run scripts, arithmetic and subscripts
// are evaluated, ${x:=y} assigns.
func (w *walker) expansions(n syntax.Node) {
	if n == nil {
		return
	}
	a := w.a
	syntax.Walk(n, func(node syntax.Node) bool {
		switch x := node.(type) {
		case *syntax.CmdSubst:
			a.notRO("runs a command substitution")
			w.nested(x.Stmts, x)
			return false
		case *syntax.ProcSubst:
			a.notRO("runs a process substitution")
			w.nested(x.Stmts, x)
			return false
		case *syntax.ArithmExp:
			a.notRO("evaluates arithmetic")
			w.arith(x.X)
			return false
		case *syntax.ParamExp:
			w.param(x)
			return false
		case *syntax.ExtGlob:
			w.bashOnly = true
		case *syntax.SglQuoted:
			if x.Dollar {
				w.bashOnly = true
			}
		}
		return true
	})
}

func (w *walker) nested(stmts []*syntax.Stmt, n syntax.Node) {
	if w.depth+1 > maxDepth {
		w.a.uncertain(nodeText(n, w.src), reasonTooDeep)
		return
	}
	sub := &walker{a: w.a, src: w.src, depth: w.depth + 1}
	sub.stmts(stmts)
	w.bashOnly = w.bashOnly || sub.bashOnly
}

func (w *walker) param(p *syntax.ParamExp) {
	a := w.a
	if p.Excl {
		a.notRO("expands a variable indirectly")
		if p.Names == 0 {
			a.secret("expands a variable named at run time")
		}
	}
	if p.Param != nil && !p.Length && !p.Excl && !a.safeParam(p.Param.Value) {
		// The environment may carry tokens and passwords (proxy
		// credentials in /etc/environment, a container's secrets).
		a.secret("expands $" + p.Param.Value)
	}
	if p.Index != nil {
		a.notRO("evaluates an array subscript")
		w.arith(p.Index)
	}
	if p.Slice != nil {
		a.notRO("evaluates arithmetic")
		w.arith(p.Slice.Offset)
		w.arith(p.Slice.Length)
	}
	if p.Repl != nil {
		w.expansions(p.Repl.Orig)
		w.expansions(p.Repl.With)
	}
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.AssignUnset, syntax.AssignUnsetOrNull:
			a.notRO("assigns a shell variable")
		case syntax.OtherParamOps:
			a.notRO("transforms a variable, which can expand a prompt string")
		}
		w.expansions(p.Exp.Word)
	}
	if p.NestedParam != nil {
		w.expansions(p.NestedParam)
	}
}

// arith classifies an arithmetic expression: bash expands its words and
// evaluates subscripts, so quoted text inside may run commands too.
func (w *walker) arith(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	w.evaluated(x)
}

// evaluated walks a node whose words bash evaluates again: arithmetic, [[ ]]
// operands and subscripts.
func (w *walker) evaluated(n syntax.Node) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(node syntax.Node) bool {
		if x, ok := node.(*syntax.Word); ok {
			w.expansions(x)
			if v := wordOf(x, w.src); v.static() {
				w.hidden(v.val, "evaluates a string as arithmetic or a subscript")
			}
			return false
		}
		return true
	})
}

// hidden classifies text that bash may expand again at run time, such as
// the subscript in test -v 'a[$(reboot)]': read as a here-document body, its
// command substitutions are found and classified.
func (w *walker) hidden(text, why string) {
	if !strings.ContainsAny(text, "$`") {
		return
	}
	a := w.a
	a.notRO(why)
	if w.depth+1 > maxDepth {
		a.uncertain(text, reasonTooDeep)
		return
	}
	text = wordChars(text)
	doc, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Document(strings.NewReader(text))
	if err != nil {
		a.uncertain(text, parseError(err))
		return
	}
	sub := &walker{a: a, src: text, depth: w.depth + 1}
	sub.expansions(doc)
}

// hiddenArgs applies hidden to every static word, for builtins that
// evaluate their arguments (test -v, printf -v, read, unset).
func (a *analyzer) hiddenArgs(args []word, depth int, why string) {
	w := &walker{a: a, depth: depth}
	for _, x := range args {
		if x.static() {
			w.hidden(x.val, why)
		}
	}
}
