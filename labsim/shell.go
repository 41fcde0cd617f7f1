package labsim

import (
	"fmt"
	"strconv"
	"strings"
)

// The simulated shell understands words, quotes and escapes, the list
// operators ; & && || and newlines, pipes, and redirections. It never expands
// variables, globs or command substitutions: what the client sent is what runs.

type tokKind int

const (
	tokWord     tokKind = iota
	tokOp               // ; & && || | newline and redirection operators
	tokIONumber         // the 2 in 2>&1
)

type token struct {
	kind tokKind
	val  string
}

// syntaxError is a script the simulated shell refuses; msg reads like bash.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// operators, longest first so that the scanner takes "&&" before "&".
var operators = []string{"&>>", "&&", "||", ";;", "&>", ">>", ">&", "<<", "<&", ">|", ";", "&", "|", "\n", ">", "<"}

// tokenize splits src into shell words and operators.
func tokenize(src string) ([]token, error) {
	var (
		toks   []token
		word   strings.Builder
		inWord bool // a word has started, even if it is still empty ('')
		quoted bool // part of the current word was quoted or escaped
	)
	flush := func() {
		if inWord {
			toks = append(toks, token{tokWord, word.String()})
		}
		word.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(src[i+1:], '\'')
			if j < 0 {
				return nil, &syntaxError{"unexpected EOF while looking for matching `''"}
			}
			word.WriteString(src[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case c == '"':
			inWord, quoted = true, true
			closed := false
			for i++; i < len(src); i++ {
				d := src[i]
				if d == '"' {
					closed = true
					break
				}
				if d == '\\' && i+1 < len(src) {
					switch n := src[i+1]; n {
					case '$', '`', '"', '\\':
						word.WriteByte(n)
						i++
						continue
					case '\n':
						i++
						continue
					}
				}
				word.WriteByte(d)
			}
			if !closed {
				return nil, &syntaxError{"unexpected EOF while looking for matching `\"'"}
			}
		case c == '\\':
			if i+1 == len(src) {
				word.WriteByte('\\')
				inWord = true
				continue
			}
			i++
			if src[i] == '\n' {
				continue // line continuation
			}
			word.WriteByte(src[i])
			inWord, quoted = true, true
		case c == ' ' || c == '\t' || c == '\r':
			flush()
		case c == '#' && !inWord:
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case strings.IndexByte(";&|<>\n", c) >= 0:
			if (c == '>' || c == '<') && inWord && !quoted && isDigits(word.String()) {
				toks = append(toks, token{tokIONumber, word.String()})
				word.Reset()
				inWord = false
			}
			flush()
			for _, op := range operators {
				if strings.HasPrefix(src[i:], op) {
					toks = append(toks, token{tokOp, op})
					i += len(op) - 1
					break
				}
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// quote renders s as one shell word that tokenize reads back unchanged.
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

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

// script is a parsed command line: and-or lists run one after another.
type script []andOr

// andOr is pipelines joined by && and ||; ops[i] sits between pipes[i] and pipes[i+1].
type andOr struct {
	pipes []pipeline
	ops   []string
}

type pipeline struct {
	neg  bool
	cmds []command
}

type command struct {
	args   []string // variable assignments before the command name are dropped
	redirs []redir
}

type redir struct {
	fd     int    // the descriptor redirected: 0, 1 or 2; -1 for &> (both 1 and 2)
	op     string // > >> < >&
	target string
}

func parse(src string) (script, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	return p.script()
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek() (token, bool) {
	if p.pos >= len(p.toks) {
		return token{}, false
	}
	return p.toks[p.pos], true
}

func (p *parser) isOp(vals ...string) bool {
	t, ok := p.peek()
	if !ok || t.kind != tokOp {
		return false
	}
	for _, v := range vals {
		if t.val == v {
			return true
		}
	}
	return false
}

func (p *parser) unexpected() error {
	t, ok := p.peek()
	if !ok {
		return &syntaxError{"syntax error: unexpected end of file"}
	}
	v := t.val
	if v == "\n" {
		v = "newline"
	}
	return &syntaxError{fmt.Sprintf("syntax error near unexpected token `%s'", v)}
}

func (p *parser) skipNewlines() {
	for p.isOp("\n") {
		p.pos++
	}
}

func (p *parser) script() (script, error) {
	var s script
	p.skipNewlines()
	for p.pos < len(p.toks) {
		ao, err := p.andOr()
		if err != nil {
			return nil, err
		}
		s = append(s, ao)
		if p.pos == len(p.toks) {
			break
		}
		if !p.isOp(";", "&", "\n") {
			return nil, p.unexpected()
		}
		p.pos++
		p.skipNewlines()
	}
	return s, nil
}

func (p *parser) andOr() (andOr, error) {
	var ao andOr
	for {
		pl, err := p.pipeline()
		if err != nil {
			return andOr{}, err
		}
		ao.pipes = append(ao.pipes, pl)
		if !p.isOp("&&", "||") {
			return ao, nil
		}
		ao.ops = append(ao.ops, p.toks[p.pos].val)
		p.pos++
		p.skipNewlines()
	}
}

func (p *parser) pipeline() (pipeline, error) {
	var pl pipeline
	if t, ok := p.peek(); ok && t.kind == tokWord && t.val == "!" {
		pl.neg = true
		p.pos++
	}
	for {
		c, err := p.command()
		if err != nil {
			return pipeline{}, err
		}
		pl.cmds = append(pl.cmds, c)
		if !p.isOp("|") {
			return pl, nil
		}
		p.pos++
		p.skipNewlines()
	}
}

func (p *parser) command() (command, error) {
	var c command
	assigned := false
	for {
		t, ok := p.peek()
		if !ok {
			break
		}
		if t.kind == tokWord {
			p.pos++
			if len(c.args) == 0 && isAssignment(t.val) {
				assigned = true
				continue
			}
			c.args = append(c.args, t.val)
			continue
		}
		fd := -2
		if t.kind == tokIONumber {
			n, err := strconv.Atoi(t.val)
			if err != nil || n > 9 {
				return command{}, &syntaxError{fmt.Sprintf("%s: Bad file descriptor", t.val)}
			}
			fd = n
			p.pos++
			t, ok = p.peek()
			if !ok || t.kind != tokOp {
				return command{}, p.unexpected()
			}
		}
		r, isRedir := redirFor(t.val, fd)
		if !isRedir {
			if fd != -2 {
				return command{}, p.unexpected()
			}
			break
		}
		p.pos++
		target, ok := p.peek()
		if !ok || target.kind != tokWord {
			return command{}, p.unexpected()
		}
		p.pos++
		r.target = target.val
		c.redirs = append(c.redirs, r)
	}
	if len(c.args) == 0 && len(c.redirs) == 0 && !assigned {
		return command{}, p.unexpected()
	}
	return c, nil
}

// redirFor maps a redirection operator to what it does; fd is -2 when no
// descriptor number was written.
func redirFor(op string, fd int) (redir, bool) {
	def := func(d int) int {
		if fd == -2 {
			return d
		}
		return fd
	}
	switch op {
	case ">", ">|":
		return redir{fd: def(1), op: ">"}, true
	case ">>":
		return redir{fd: def(1), op: ">>"}, true
	case "<":
		return redir{fd: def(0), op: "<"}, true
	case ">&":
		return redir{fd: def(1), op: ">&"}, true
	case "&>":
		return redir{fd: -1, op: ">"}, fd == -2
	case "&>>":
		return redir{fd: -1, op: ">>"}, fd == -2
	}
	return redir{}, false
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
