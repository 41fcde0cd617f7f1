package policy

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

var quoteTests = []struct {
	in, want string
}{
	{"", "''"},
	{"a", "'a'"},
	{"df -h", "'df -h'"},
	{"it's", `'it'\''s'`},
	{"'", `''\'''`},
	{"''", `''\'''\'''`},
	{"$(rm -rf /)", "'$(rm -rf /)'"},
	{"`id`", "'`id`'"},
	{"a\nb", "'a\nb'"},
	{`back\slash`, `'back\slash'`},
	{`"double"`, `'"double"'`},
	{"; reboot", "'; reboot'"},
	{"tab\there", "'tab\there'"},
	{"ünïcødé ✅", "'ünïcødé ✅'"},
	{"${HOME} $PATH", "'${HOME} $PATH'"},
	{"a\\'b", `'a\'\''b'`},
	{"!bang", "'!bang'"},
	{"x=1 y", "'x=1 y'"},
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, tt := range quoteTests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestShellQuoteRealShell checks every quoted string against /bin/sh:
// printf %s <quoted> must print the original bytes.
func TestShellQuoteRealShell(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh on PATH: %v", err)
	}
	for _, tt := range quoteTests {
		out, err := exec.Command(sh, "-c", "printf %s "+ShellQuote(tt.in)).Output()
		if err != nil {
			t.Fatalf("sh -c printf %q: %v", tt.in, err)
		}
		if string(out) != tt.in {
			t.Errorf("sh printed %q for %q", out, tt.in)
		}
	}
}

// TestShellQuoteOneWord checks the tokenizer reads every quoted string back
// as one literal word.
func TestShellQuoteOneWord(t *testing.T) {
	t.Parallel()
	for _, tt := range quoteTests {
		checkOneWord(t, tt.in)
	}
}

func checkOneWord(t *testing.T, s string) {
	t.Helper()
	// The classifier reads NUL and bytes that are not UTF-8 as U+FFFD (all
	// plain word characters), as here.
	words, err := oneCommand(wordChars("echo " + ShellQuote(s)))
	if err != nil {
		t.Fatalf("echo ShellQuote(%q): %v", s, err)
	}
	if len(words) != 2 {
		t.Fatalf("echo ShellQuote(%q) = %d words; want 2", s, len(words))
	}
	w := words[1]
	if w.val != wordChars(s) || !w.static() || w.glob {
		t.Fatalf("ShellQuote(%q) reads back as %+v; want the literal input", s, w)
	}
}

// oneCommand parses src as bash and returns its words when it is exactly
// one simple command with no assignment, redirection or expansion.
func oneCommand(src string) ([]word, error) {
	f, err := parseScript(src, false)
	if err != nil {
		return nil, err
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("%d statements", len(f.Stmts))
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || st.Negated || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, fmt.Errorf("not one plain simple command")
	}
	var out []word
	for _, x := range call.Args {
		w := wordOf(x, src)
		if w.expands {
			return nil, fmt.Errorf("word %s has an expansion", w.raw)
		}
		out = append(out, w)
	}
	return out, nil
}

func FuzzShellQuote(f *testing.F) {
	for _, tt := range quoteTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := ShellQuote(s)
		if !strings.HasPrefix(q, "'") || !strings.HasSuffix(q, "'") {
			t.Fatalf("ShellQuote(%q) = %q is not single-quoted", s, q)
		}
		checkOneWord(t, s)
	})
}

func TestShellWord(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"jellyfin.service", "jellyfin.service"},
		{"getty@tty1.service", "getty@tty1.service"},
		{`mnt-data\x2dvol.mount`, `'mnt-data\x2dvol.mount'`},
		{"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"},
		{"a b", "'a b'"},
		{"", "''"},
	}
	for _, tt := range tests {
		if got := shellWord(tt.in); got != tt.want {
			t.Errorf("shellWord(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWordOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want []word // only val and the flags are compared
	}{
		{"ls -la /tmp", []word{{val: "ls"}, {val: "-la"}, {val: "/tmp"}}},
		{`echo 'a b' "c d" e\ f`, []word{{val: "echo"}, {val: "a b", quoted: true}, {val: "c d", quoted: true}, {val: "e f", quoted: true}}},
		{`\rm -rf /x`, []word{{val: "rm", quoted: true}, {val: "-rf"}, {val: "/x"}}},
		{"$'\\x72m' x", []word{{val: "rm", quoted: true}, {val: "x"}}},
		{`echo "a\$b\q"`, []word{{val: "echo"}, {val: `a$b\q`, quoted: true}}},
		{"a\\\nb", []word{{val: "ab"}}},
		{"echo $HOME ${X:-y} $(id) $((1+2)) <(ls)", []word{{val: "echo"},
			{val: "$HOME", dynamic: true, expands: true}, {val: "${X:-y}", dynamic: true, expands: true},
			{val: "$(id)", dynamic: true, expands: true}, {val: "$((1+2))", dynamic: true, expands: true},
			{val: "<(ls)", dynamic: true, expands: true}}},
		{"ls *.log a? x[ab] [ '*'", []word{{val: "ls"}, {val: "*.log", dynamic: true, glob: true},
			{val: "a?", dynamic: true, glob: true}, {val: "x[ab]", dynamic: true, glob: true}, {val: "["}, {val: "*", quoted: true}}},
		{"echo {a,b} {1..3} {a} @(x|y)", []word{{val: "echo"}, {val: "{a,b}", dynamic: true, brace: true},
			{val: "{1..3}", dynamic: true, brace: true}, {val: "{a}"}, {val: "@(x|y)", dynamic: true, glob: true}}},
		{"cat ~/x", []word{{val: "cat"}, {val: "~/x"}}},
	}
	for _, tt := range tests {
		f, err := parseScript(tt.src, false)
		if err != nil {
			t.Errorf("parse %q: %v", tt.src, err)
			continue
		}
		call := f.Stmts[0].Cmd.(*syntax.CallExpr)
		var got []word
		for _, x := range call.Args {
			w := wordOf(x, tt.src)
			w.raw = ""
			got = append(got, w)
		}
		if d := diff(tt.want, got); d != "" {
			t.Errorf("words of %q %s", tt.src, d)
		}
	}
}
