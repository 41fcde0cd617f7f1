package policy

import (
	"os/exec"
	"strings"
	"testing"
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
	l := lex(ShellQuote(s), 0)
	if len(l.uncertain) > 0 || len(l.toks) != 1 || l.toks[0].op != "" {
		t.Fatalf("lex(ShellQuote(%q)) = %+v, uncertain %v; want one word", s, l.toks, l.uncertain)
	}
	w := l.toks[0].w
	if w.val != s || w.dynamic || w.glob || len(w.substs) > 0 {
		t.Fatalf("lex(ShellQuote(%q)) word = %+v; want the literal input", s, w)
	}
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

func TestLexer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src       string
		want      []string // words as val, operators as [op]
		substs    []string
		uncertain bool
	}{
		{src: "ls -la /tmp", want: []string{"ls", "-la", "/tmp"}},
		{src: "a;b&&c||d|e&", want: []string{"a", "[;]", "b", "[&&]", "c", "[||]", "d", "[|]", "e", "[&]"}},
		{src: "echo 'a b' \"c d\" e\\ f", want: []string{"echo", "a b", "c d", "e f"}},
		{src: "df 2>/dev/null", want: []string{"df", "2", "[>]", "/dev/null"}},
		{src: "echo $(id -u) `whoami`", want: []string{"echo", "$(id -u)", "`whoami`"}, substs: []string{"id -u", "whoami"}},
		{src: `echo "$(cat "/x y")"`, want: []string{"echo", `$(cat "/x y")`}, substs: []string{`cat "/x y"`}},
		{src: "echo $(echo $(id))", want: []string{"echo", "$(echo $(id))"}, substs: []string{"echo $(id)"}},
		{src: "ls # rm -rf /\ndf", want: []string{"ls", "[\n]", "df"}},
		{src: "cat <<EOF\nrm -rf /\nEOF\nls", want: []string{"cat", "[<<]", "EOF", "[\n]", "ls"}},
		{src: "cat <<EOF\n$(id)\nEOF", want: []string{"cat", "[<<]", "EOF", "[\n]"}, substs: []string{"id"}},
		{src: "cat <<'EOF'\n$(id)\nEOF", want: []string{"cat", "[<<]", "EOF", "[\n]"}},
		{src: "diff <(ls a) <(ls b)", want: []string{"diff", "<(ls a)", "<(ls b)"}, substs: []string{"ls a", "ls b"}},
		{src: "echo ${X:-$(id)}", want: []string{"echo", "${X:-$(id)}"}, substs: []string{"id"}},
		{src: "echo 'open", want: []string{"echo", "open"}, uncertain: true},
		{src: "echo $(ls", want: []string{"echo", "$(ls"}, substs: []string{"ls"}, uncertain: true},
		{src: "ls )", want: []string{"ls", "[)]"}, uncertain: true},
		{src: ":(){ :|:& };:", want: []string{":", "[(]", "[)]", "{", ":", "[|]", ":", "[&]", "}", "[;]", ":"}},
		{src: "a\\\nb", want: []string{"ab"}},
	}
	for _, tt := range tests {
		l := lex(tt.src, 0)
		var got, substs []string
		for _, tk := range l.toks {
			if tk.op != "" {
				got = append(got, "["+tk.op+"]")
				continue
			}
			got = append(got, tk.w.val)
			substs = append(substs, tk.w.substs...)
		}
		substs = append(substs, l.substs...)
		if d := diff(tt.want, got); d != "" {
			t.Errorf("lex(%q) tokens %s", tt.src, d)
		}
		if d := diff(tt.substs, substs); d != "" {
			t.Errorf("lex(%q) substitutions %s", tt.src, d)
		}
		if (len(l.uncertain) > 0) != tt.uncertain {
			t.Errorf("lex(%q) uncertain = %v, want %v", tt.src, l.uncertain, tt.uncertain)
		}
	}
}
