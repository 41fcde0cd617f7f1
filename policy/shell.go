package policy

import (
	"strings"
)

// ShellQuote returns s as exactly one POSIX shell word. It wraps s in single
// quotes and writes each embedded single quote as quote, backslash, quote,
// quote, which closes the quoted part, adds an escaped quote and reopens it.
// Every byte but NUL survives unchanged, newlines included; the empty string
// becomes a pair of quotes. Free-form shell is validated to contain no NUL
// before it gets here.
func ShellQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b.WriteString(`'\''`)
		} else {
			b.WriteByte(s[i])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// shellWord writes an identifier bare when every byte is plainly safe, and
// quoted otherwise. Validated identifiers are always safe but for systemd's
// \xHH escapes; quoting here is the second line of defence.
func shellWord(s string) string {
	if s != "" && allBytes(s, safeWordByte) {
		return s
	}
	return ShellQuote(s)
}

func safeWordByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("@%+=:,./_-", c) >= 0
}

// The tokenizer below reads enough POSIX sh (and the bash extensions people
// type) to find every simple command, its words, redirections and nested
// command substitutions. It is for classification only: where it is unsure
// it says so, and the classifier then assumes the worst.

// maxNest bounds nesting of $(...), `...` and ${...} inside one script.
const maxNest = 16

// word is one shell word after quote removal.
type word struct {
	val     string   // value after quote removal; expansions kept as written
	raw     string   // source text
	quoted  bool     // some part was quoted or escaped
	dynamic bool     // contains a parameter, arithmetic or command expansion
	glob    bool     // contains an unquoted *, ?, [ or {
	brace   bool     // looks like bash brace expansion: {a,b} or {1..3}
	ioNum   bool     // digits right before a redirection operator, as in 2>
	substs  []string // scripts of the $(...), `...`, <(...) and >(...) inside
}

// tok is an operator or a word.
type tok struct {
	op string // non-empty for operators, "\n" for a newline
	w  word
}

type heredoc struct {
	delim  string
	strip  bool // <<- strips leading tabs
	quoted bool // a quoted delimiter turns expansion off in the body
}

type lexer struct {
	src       string
	pos       int
	nest      int
	toks      []tok
	pending   []heredoc
	substs    []string // from here-document bodies
	heredocs  int
	uncertain []string
	inner     bool // lexing the inside of $( ... ): stop at the matching )
	depth     int  // open ( at this level
	stopped   bool
	sawCase   bool
}

// lex tokenizes src. nest is the substitution depth src sits at.
func lex(src string, nest int) *lexer {
	l := &lexer{src: src, nest: nest}
	if nest > maxNest {
		l.fail("nesting is too deep to follow")
		return l
	}
	l.run()
	return l
}

func (l *lexer) fail(why string) {
	for _, u := range l.uncertain {
		if u == why {
			return
		}
	}
	l.uncertain = append(l.uncertain, why)
}

func (l *lexer) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

// ops lists operators longest first, so the first match is the longest.
var ops = []string{
	";;&", "&>>", "<<<", "<<-",
	";;", ";&", "&&", "&>", "||", "|&", "<<", "<>", "<&", ">>", ">&", ">|",
	";", "&", "|", "<", ">", "(", ")",
}

func isRedirect(op string) bool {
	switch op {
	case "<", ">", ">>", ">|", "<>", "<&", ">&", "&>", "&>>", "<<", "<<-", "<<<":
		return true
	}
	return false
}

func (l *lexer) run() {
	for l.pos < len(l.src) && !l.stopped {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t':
			l.pos++
		case c == '\\' && l.peek(1) == '\n':
			l.pos += 2
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '\n':
			l.toks = append(l.toks, tok{op: "\n"})
			l.pos++
			l.readHeredocBodies()
		case (c == '<' || c == '>') && l.peek(1) == '(':
			l.readWordTok()
		case strings.IndexByte(";&|<>()", c) >= 0:
			l.readOp()
		default:
			l.readWordTok()
		}
	}
	if len(l.pending) > 0 {
		l.fail("here-document without its end line")
	}
	if l.inner && !l.stopped {
		l.fail("unterminated $(")
	}
	if l.sawCase && l.inner {
		// A case pattern's ) can close $( early; do not trust the split.
		l.fail("case statement inside a command substitution")
	}
}

func (l *lexer) readOp() {
	start := l.pos
	var op string
	for _, o := range ops {
		if strings.HasPrefix(l.src[l.pos:], o) {
			op = o
			break
		}
	}
	l.pos += len(op)
	switch op {
	case "(":
		l.depth++
	case ")":
		if l.depth == 0 {
			if l.inner {
				l.stopped = true
				l.pos = start // the caller consumes the )
				return
			}
			l.fail("unbalanced )")
		} else {
			l.depth--
		}
	}
	l.toks = append(l.toks, tok{op: op})
	if op == "<<" || op == "<<-" {
		for l.pos < len(l.src) && (l.src[l.pos] == ' ' || l.src[l.pos] == '\t') {
			l.pos++
		}
		if l.pos >= len(l.src) || strings.IndexByte("\n;&|<>()", l.src[l.pos]) >= 0 {
			l.fail("here-document without a delimiter")
			return
		}
		w := l.readWord()
		l.toks = append(l.toks, tok{w: w})
		l.heredocs++
		l.pending = append(l.pending, heredoc{delim: w.val, strip: op == "<<-", quoted: w.quoted})
	}
}

func (l *lexer) readWordTok() {
	w := l.readWord()
	if !w.quoted && w.val != "" && allBytes(w.val, isDigit) && (l.peek(0) == '<' || l.peek(0) == '>') && l.peek(1) != '(' {
		w.ioNum = true
	}
	if !w.quoted && (w.val == "case" || w.val == "esac") {
		l.sawCase = true
	}
	l.toks = append(l.toks, tok{w: w})
}

// readHeredocBodies consumes the bodies of the here-documents opened on the
// line just ended. A body with an unquoted delimiter is expanded by the
// shell, so its command substitutions run and are collected.
func (l *lexer) readHeredocBodies() {
	for _, h := range l.pending {
		var body strings.Builder
		found := false
		for l.pos < len(l.src) {
			eol := strings.IndexByte(l.src[l.pos:], '\n')
			var line string
			if eol < 0 {
				line = l.src[l.pos:]
				l.pos = len(l.src)
			} else {
				line = l.src[l.pos : l.pos+eol]
				l.pos += eol + 1
			}
			cmp := line
			if h.strip {
				cmp = strings.TrimLeft(line, "\t")
			}
			if cmp == h.delim {
				found = true
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		if !found {
			l.fail("here-document without its end line")
		}
		if !h.quoted {
			l.collect(body.String())
		}
	}
	l.pending = nil
}

// collect scans text the way the shell expands a here-document body or the
// inside of ${...} (where " is not special here; matchBrace already marks
// quotes there as uncertain), adding the command substitutions it finds.
func (l *lexer) collect(text string) {
	sub := &lexer{src: text, nest: l.nest + 1}
	if sub.nest > maxNest {
		l.fail("nesting is too deep to follow")
		return
	}
	var w word
	var val strings.Builder
	sub.readDouble(&w, &val, true)
	l.substs = append(l.substs, w.substs...)
	l.uncertain = append(l.uncertain, sub.uncertain...)
}

// readWord reads one word at l.pos, which is not a blank or operator.
func (l *lexer) readWord() word {
	start := l.pos
	var w word
	var val strings.Builder
loop:
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch c {
		case ' ', '\t', '\n', ';', '&', '|', '(', ')':
			break loop
		case '<', '>':
			if l.peek(1) != '(' {
				break loop
			}
			// Process substitution: <(cmd) or >(cmd).
			from := l.pos
			inner, ok := l.matchParen(l.pos + 1)
			if !ok {
				break loop
			}
			w.substs = append(w.substs, inner)
			w.dynamic = true
			val.WriteString(l.src[from:l.pos])
		case '\\':
			switch {
			case l.pos+1 >= len(l.src):
				val.WriteByte('\\')
				l.pos++
			case l.src[l.pos+1] == '\n':
				l.pos += 2
			default:
				val.WriteByte(l.src[l.pos+1])
				w.quoted = true
				l.pos += 2
			}
		case '\'':
			end := strings.IndexByte(l.src[l.pos+1:], '\'')
			if end < 0 {
				l.fail("unterminated single quote")
				val.WriteString(l.src[l.pos+1:])
				l.pos = len(l.src)
				break loop
			}
			val.WriteString(l.src[l.pos+1 : l.pos+1+end])
			w.quoted = true
			l.pos += end + 2
		case '"':
			l.pos++
			w.quoted = true
			l.readDouble(&w, &val, false)
		case '`':
			l.readBacktick(&w, &val)
		case '$':
			l.readDollar(&w, &val, false)
		case '*', '?', '[', '{':
			w.glob = true
			val.WriteByte(c)
			l.pos++
		default:
			val.WriteByte(c)
			l.pos++
		}
	}
	w.val = val.String()
	w.raw = l.src[start:l.pos]
	if w.glob && strings.Contains(w.raw, "{") && strings.Contains(w.raw, "}") &&
		(strings.Contains(w.raw, ",") || strings.Contains(w.raw, "..")) {
		w.brace = true
	}
	return w
}

// readDouble reads the inside of a double-quoted string up to and including
// its closing quote, or, for a here-document body (where " is literal), to
// the end of the text.
func (l *lexer) readDouble(w *word, val *strings.Builder, heredocBody bool) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch c {
		case '"':
			if !heredocBody {
				l.pos++
				return
			}
			val.WriteByte(c)
			l.pos++
		case '\\':
			next := l.peek(1)
			switch {
			case next == '\n':
				l.pos += 2
			case next == '$' || next == '`' || next == '\\' || (next == '"' && !heredocBody):
				val.WriteByte(next)
				l.pos += 2
			default:
				val.WriteByte('\\')
				l.pos++
			}
		case '`':
			l.readBacktick(w, val)
		case '$':
			l.readDollar(w, val, true)
		default:
			val.WriteByte(c)
			l.pos++
		}
	}
	if !heredocBody {
		l.fail("unterminated double quote")
	}
}

// readBacktick reads `...`, undoing the backslash escapes the old syntax
// needs, and records its script.
func (l *lexer) readBacktick(w *word, val *strings.Builder) {
	start := l.pos
	l.pos++
	var inner strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == '`' {
			l.pos++
			w.substs = append(w.substs, inner.String())
			w.dynamic = true
			val.WriteString(l.src[start:l.pos])
			return
		}
		if c == '\\' && l.pos+1 < len(l.src) && strings.IndexByte("$`\\", l.src[l.pos+1]) >= 0 {
			inner.WriteByte(l.src[l.pos+1])
			l.pos += 2
			continue
		}
		inner.WriteByte(c)
		l.pos++
	}
	l.fail("unterminated backquote")
	w.substs = append(w.substs, inner.String())
	w.dynamic = true
}

// readDollar reads an expansion starting at '$'.
func (l *lexer) readDollar(w *word, val *strings.Builder, inDouble bool) {
	start := l.pos
	next := l.peek(1)
	switch {
	case next == '(':
		// $(cmd), and $((arith)) too: arithmetic is classified as if it were
		// a command, which can only err upward.
		inner, ok := l.matchParen(l.pos + 1)
		w.dynamic = true
		if ok {
			w.substs = append(w.substs, inner)
		}
	case next == '{':
		inner, ok := l.matchBrace(l.pos + 1)
		w.dynamic = true
		if ok {
			l.collectInto(w, inner)
		}
	case next == '\'' && !inDouble:
		// $'...': bash's ANSI-C quoting. Its escapes can spell anything, so
		// decode them: $'\x72m' is rm.
		l.pos += 2
		body := l.pos
		for l.pos < len(l.src) && l.src[l.pos] != '\'' {
			if l.src[l.pos] == '\\' {
				l.pos++
			}
			l.pos++
		}
		end := min(l.pos, len(l.src))
		if l.pos >= len(l.src) {
			l.fail("unterminated $'")
			l.pos = len(l.src)
		} else {
			l.pos++
		}
		val.WriteString(decodeANSIC(l.src[body:end]))
		w.quoted = true
		return
	case next == '"' && !inDouble:
		l.pos++
		val.WriteByte('$')
		l.pos++
		w.quoted = true
		l.readDouble(w, val, false)
		return
	case next == '_' || isAlnum(next) && !isDigit(next):
		l.pos++
		for l.pos < len(l.src) && (isAlnum(l.src[l.pos]) || l.src[l.pos] == '_') {
			l.pos++
		}
		w.dynamic = true
	case isDigit(next) || (next != 0 && strings.IndexByte("@*#?-$!", next) >= 0):
		l.pos += 2
		w.dynamic = true
	default:
		val.WriteByte('$')
		l.pos++
		return
	}
	val.WriteString(l.src[start:l.pos])
}

// collectInto scans the inside of ${...} for command substitutions.
func (l *lexer) collectInto(w *word, text string) {
	before := len(l.substs)
	l.collect(text)
	w.substs = append(w.substs, l.substs[before:]...)
	l.substs = l.substs[:before]
}

// matchParen reads from the ( at open to its matching ), lexing the inside
// as shell so quotes, comments and nested substitutions are honoured. It
// returns the inside and moves l.pos past the ).
func (l *lexer) matchParen(open int) (string, bool) {
	sub := &lexer{src: l.src, pos: open + 1, nest: l.nest + 1, inner: true}
	if sub.nest > maxNest {
		l.fail("nesting is too deep to follow")
		l.pos = len(l.src)
		return "", false
	}
	sub.run()
	l.uncertain = append(l.uncertain, sub.uncertain...)
	if !sub.stopped {
		l.pos = len(l.src)
		return l.src[open+1:], true
	}
	l.pos = sub.pos + 1
	return l.src[open+1 : sub.pos], true
}

// matchBrace reads from the { at open to its matching }, skipping quotes and
// nested substitutions. Quotes inside ${...} follow rules that differ between
// shells, so they make the result uncertain.
func (l *lexer) matchBrace(open int) (string, bool) {
	depth := 0
	i := open
	for i < len(l.src) {
		switch l.src[i] {
		case '\\':
			i += 2
			continue
		case '\'', '"':
			l.fail("quotes inside ${...}")
		case '$':
			if i+1 < len(l.src) && l.src[i+1] == '(' {
				save := l.pos
				l.pos = i
				if _, ok := l.matchParen(i + 1); !ok {
					return "", false
				}
				i = l.pos
				l.pos = save
				continue
			}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				l.pos = i + 1
				return l.src[open+1 : i], true
			}
		}
		i++
	}
	l.fail("unterminated ${")
	l.pos = len(l.src)
	return l.src[open+1:], true
}

// decodeANSIC decodes the escapes of a bash $'...' string.
func decodeANSIC(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			var v rune
			for j < len(s) && j <= i+digits && isHex(s[j]) {
				v = v*16 + rune(hexVal(s[j]))
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			if e == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(v)
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			var v byte
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				v = v*8 + s[j] - '0'
				j++
			}
			b.WriteByte(v)
			i = j - 1
		default:
			// \\, \', \", \? and unknown escapes: the character itself
			// (bash keeps the backslash for unknown ones; dropping it can
			// only make a command name more recognisable).
			b.WriteByte(e)
		}
	}
	return b.String()
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
