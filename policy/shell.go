package policy

import (
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
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

// The classifier reads scripts with mvdan.cc/sh's parser, in bash mode, so
// quoting, arithmetic, here-documents, process substitution and case
// statements are understood as bash understands them. What follows turns its
// words into the flat form the command rules read.

// parseScript parses src as a bash script, or as a POSIX sh script (the
// dialect of dash, which runs `sh -c` on Debian and Proxmox) with posix.
// On a syntax error it returns the statements parsed before it too: a shell
// that reads a script line by line runs those before it stops.
func parseScript(src string, posix bool) (*syntax.File, error) {
	pool := &bashParsers
	if posix {
		pool = &posixParsers
	}
	p := pool.Get().(*syntax.Parser)
	defer pool.Put(p)
	return p.Parse(strings.NewReader(src), "")
}

// Parsers keep buffers between uses; a parser can be reused once a parse
// is done.
var (
	bashParsers  = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}
	posixParsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangPOSIX)) }}
)

// parseError shortens a parser error to the sentence a plan card can show.
func parseError(err error) string {
	var text string
	switch e := err.(type) {
	case syntax.ParseError:
		text = e.Text
	case syntax.LangError:
		text = e.Feature + " is not supported"
	default:
		text = err.Error()
	}
	const maxLen = 80
	if len(text) > maxLen {
		text = text[:maxLen] + "…"
	}
	return text
}

// word is one shell word after quote removal. Its value is only the literal
// value of the word when static reports true; otherwise expansions are kept
// as written, so path checks still see a literal prefix such as /etc/pve/$X.
type word struct {
	val     string // value after quote removal; expansions kept as written
	raw     string // source text
	quoted  bool   // some part was quoted or escaped
	dynamic bool   // known only at run time: an expansion, a glob or braces
	expands bool   // contains a parameter, command, arithmetic or process expansion
	glob    bool   // contains an unquoted *, ?, [...] or an extended glob
	brace   bool   // bash brace expansion: {a,b} or {1..3}
}

// static reports whether the word's value is known before the script runs.
func (w word) static() bool { return !w.dynamic }

// wordOf converts a parsed word; src is the text it was parsed from.
func wordOf(w *syntax.Word, src string) word {
	var out word
	if w == nil || len(w.Parts) == 0 {
		// Only a script cut short by a syntax error leaves one.
		return out
	}
	var b strings.Builder
	open := false // an unquoted [ is waiting for its ]
	for _, part := range w.Parts {
		addPart(&out, &b, part, src, false, &open)
	}
	out.val = b.String()
	out.raw = nodeText(w, src)
	if hasBraces(w) {
		out.brace, out.dynamic = true, true
	}
	if out.glob {
		out.dynamic = true
	}
	return out
}

func addPart(out *word, b *strings.Builder, part syntax.WordPart, src string, inDouble bool, open *bool) {
	switch p := part.(type) {
	case *syntax.Lit:
		if inDouble {
			unescapeDouble(b, p.Value)
			return
		}
		v := p.Value
		for i := 0; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '\\' && i+1 < len(v):
				i++
				b.WriteByte(v[i])
				out.quoted = true
			case c == '*' || c == '?':
				out.glob = true
				b.WriteByte(c)
			case c == '[':
				*open = true
				b.WriteByte(c)
			case c == ']' && *open:
				out.glob = true
				b.WriteByte(c)
			default:
				b.WriteByte(c)
			}
		}
	case *syntax.SglQuoted:
		out.quoted = true
		if p.Dollar {
			b.WriteString(decodeANSIC(p.Value))
		} else {
			b.WriteString(p.Value)
		}
	case *syntax.DblQuoted:
		out.quoted = true
		for _, q := range p.Parts {
			addPart(out, b, q, src, true, open)
		}
	case *syntax.ExtGlob:
		out.glob, out.dynamic = true, true
		b.WriteString(nodeText(p, src))
	default:
		// Parameter, command, arithmetic and process expansions.
		out.dynamic, out.expands = true, true
		b.WriteString(nodeText(part, src))
	}
}

// unescapeDouble removes the backslashes that are escapes inside double
// quotes: before $, `, ", \ and newline.
func unescapeDouble(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
				b.WriteByte(v[i])
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
}

// hasBraces reports whether bash would brace-expand w.
func hasBraces(w *syntax.Word) bool {
	if !slices.ContainsFunc(w.Parts, func(p syntax.WordPart) bool {
		l, ok := p.(*syntax.Lit)
		return ok && strings.Contains(l.Value, "{")
	}) {
		return false
	}
	// SplitBraces rewrites the word it is given; give it a copy. It also
	// splits {a} and {}, which bash leaves alone.
	c := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(c) {
		return false
	}
	found := false
	syntax.Walk(c, func(n syntax.Node) bool {
		if b, ok := n.(*syntax.BraceExp); ok && (b.Sequence || len(b.Elems) > 1) {
			found = true
		}
		return !found
	})
	return found
}

// nodeText returns the source text of n.
func nodeText(n syntax.Node, src string) string {
	if w, ok := n.(*syntax.Word); ok && len(w.Parts) == 0 {
		return ""
	}
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
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
