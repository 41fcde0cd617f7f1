package hostgate

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/nomoshq/nomos/policy"
)

// MaxCommandLen bounds the command the gate reads. A pct_create's
// post_install script, quoted, fits well within it.
const MaxCommandLen = 512 << 10

// ErrRefused marks every refusal. The error's text is the one line the gate
// prints: "refused: " and why.
var ErrRefused = errors.New("refused")

func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// unquotedSpecial are the characters that a shell would expand when they
// stand outside quotes (globs, braces, tilde, history). The gate runs no
// shell, so it refuses them rather than hand a program a word a shell would
// have changed.
const unquotedSpecial = "*?[]{}~!"

// Parse reads command as bash would and returns its argv, refusing anything
// but one simple command whose words are literal text and quotes.
func Parse(command string) ([]string, error) {
	switch {
	case strings.TrimSpace(command) == "":
		return nil, refusef("no command: this key runs only the commands nomos sends, never an interactive shell")
	case len(command) > MaxCommandLen:
		return nil, refusef("the command is %d bytes, more than the %d the gate reads", len(command), MaxCommandLen)
	case strings.IndexByte(command, 0) >= 0:
		return nil, refusef("the command contains a NUL byte")
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return nil, refusef("the command does not parse as shell: %s", oneLine(err.Error()))
	}
	if len(file.Stmts) != 1 {
		return nil, refusef("not one simple command: lists of commands are refused")
	}
	st := file.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	switch {
	case st.Negated || st.Background || st.Coprocess || st.Disown:
		return nil, refusef("not one simple command: ! and background jobs are refused")
	case len(st.Redirs) > 0:
		return nil, refusef("not one simple command: redirections are refused")
	case !ok:
		return nil, refusef("not one simple command: pipes, lists, functions and compound commands are refused")
	case len(call.Assigns) > 0:
		return nil, refusef("not one simple command: variable assignments are refused")
	case len(call.Args) == 0:
		return nil, refusef("no command")
	}
	argv := make([]string, len(call.Args))
	for i, w := range call.Args {
		if argv[i], err = literal(w); err != nil {
			return nil, err
		}
	}
	return argv, nil
}

// literal returns a word's value after quote removal, or a refusal if
// anything in it would be expanded.
func literal(w *syntax.Word) (string, error) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if i := strings.IndexAny(p.Value, unquotedSpecial); i >= 0 {
				return "", refusef("an unquoted %q would be expanded by a shell", p.Value[i:i+1])
			}
			b.WriteString(unescape(p.Value, nil))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", refusef("$'...' quoting is refused")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", refusef(`$"..." quoting is refused`)
			}
			for _, in := range p.Parts {
				lit, ok := in.(*syntax.Lit)
				if !ok {
					return "", refusef("expansions inside double quotes are refused")
				}
				b.WriteString(unescape(lit.Value, func(c byte) bool { return strings.IndexByte("$`\"\\\n", c) >= 0 }))
			}
		default:
			return "", refusef("expansions and substitutions are refused")
		}
	}
	return b.String(), nil
}

// unescape removes the backslashes a shell removes: before any character
// outside quotes (escapes nil), before the characters escapes accepts inside
// double quotes. A backslash before a newline removes both.
func unescape(s string, escapes func(byte) bool) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) || (escapes != nil && !escapes(s[i+1])) {
			b.WriteByte(c)
			continue
		}
		i++
		if s[i] != '\n' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// Quote renders argv as one shell command line that Parse reads back as the
// same argv: plain words bare, every other word single-quoted.
func Quote(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		plain := w != ""
		for j := 0; j < len(w) && plain; j++ {
			c := w[j]
			plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%+=:,./_-", c) >= 0
		}
		// A first word with = would be an assignment, and a keyword
		// would start a compound command.
		if i == 0 && (strings.Contains(w, "=") || syntax.IsKeyword(w)) {
			plain = false
		}
		words[i] = w
		if !plain {
			words[i] = policy.ShellQuote(w)
		}
	}
	return strings.Join(words, " ")
}

// oneLine keeps a message to one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
