package labsim

import (
	"errors"
	"strings"
	"testing"
)

func w(s string) token  { return token{tokWord, s} }
func op(s string) token { return token{tokOp, s} }

var tokenizeTests = []struct {
	in      string
	want    []token
	wantErr string
}{
	{in: "", want: nil},
	{in: "pct list", want: []token{w("pct"), w("list")}},
	{in: "  pct\tstatus   101  ", want: []token{w("pct"), w("status"), w("101")}},
	{in: `echo 'a b' "c d"`, want: []token{w("echo"), w("a b"), w("c d")}},
	{in: `echo '' ""`, want: []token{w("echo"), w(""), w("")}},
	{in: `echo a\ b`, want: []token{w("echo"), w("a b")}},
	{in: `echo "a \"q\" \$HOME \\ \n"`, want: []token{w("echo"), w(`a "q" $HOME \ \n`)}},
	{in: `echo 'it'\''s'`, want: []token{w("echo"), w("it's")}},
	{in: `echo $HOME *.txt ~`, want: []token{w("echo"), w("$HOME"), w("*.txt"), w("~")}},
	{in: "a;b", want: []token{w("a"), op(";"), w("b")}},
	{in: "a && b || c", want: []token{w("a"), op("&&"), w("b"), op("||"), w("c")}},
	{in: "a | b", want: []token{w("a"), op("|"), w("b")}},
	{in: "a\nb", want: []token{w("a"), op("\n"), w("b")}},
	{in: "a \\\nb", want: []token{w("a"), w("b")}},
	{in: "echo x > /etc/resolv.conf", want: []token{w("echo"), w("x"), op(">"), w("/etc/resolv.conf")}},
	{in: "echo x >>f", want: []token{w("echo"), w("x"), op(">>"), w("f")}},
	{in: "cmd 2>&1", want: []token{w("cmd"), {tokIONumber, "2"}, op(">&"), w("1")}},
	{in: "cmd 2>/dev/null", want: []token{w("cmd"), {tokIONumber, "2"}, op(">"), w("/dev/null")}},
	{in: "cmd a2>f", want: []token{w("cmd"), w("a2"), op(">"), w("f")}},
	{in: `cmd "2">f`, want: []token{w("cmd"), w("2"), op(">"), w("f")}},
	{in: "cmd &>/dev/null", want: []token{w("cmd"), op("&>"), w("/dev/null")}},
	{in: "echo hi # comment ; rm", want: []token{w("echo"), w("hi")}},
	{in: "echo a#b", want: []token{w("echo"), w("a#b")}},
	{in: `echo "a;b" 'c|d'`, want: []token{w("echo"), w("a;b"), w("c|d")}},
	{in: "sh -c 'echo nameserver 1.1.1.1 > /etc/resolv.conf'", want: []token{w("sh"), w("-c"), w("echo nameserver 1.1.1.1 > /etc/resolv.conf")}},
	{in: `echo trailing\`, want: []token{w("echo"), w(`trailing\`)}},
	{in: `echo "é ü"`, want: []token{w("echo"), w("é ü")}},
	{in: `echo 'open`, wantErr: "unexpected EOF while looking for matching `''"},
	{in: `echo "open`, wantErr: "unexpected EOF while looking for matching `\"'"},
}

func TestTokenize(t *testing.T) {
	t.Parallel()
	for _, tt := range tokenizeTests {
		got, err := tokenize(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("tokenize(%q): error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("tokenize(%q): %v", tt.in, err)
			continue
		}
		diff(t, "tokenize("+tt.in+")", tt.want, got)
	}
}

// render writes tokens back as shell text, quoting every word.
func render(toks []token) string {
	var b strings.Builder
	for _, tk := range toks {
		switch tk.kind {
		case tokWord:
			b.WriteString(quote(tk.val) + " ")
		case tokIONumber:
			b.WriteString(tk.val)
		case tokOp:
			b.WriteString(tk.val + " ")
		}
	}
	return b.String()
}

// FuzzTokenize checks that tokenize never panics and that its output,
// quoted back, reads the same.
func FuzzTokenize(f *testing.F) {
	for _, tt := range tokenizeTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		toks, err := tokenize(in)
		if err != nil {
			var se *syntaxError
			if !errors.As(err, &se) {
				t.Fatalf("tokenize(%q): error of type %T", in, err)
			}
			return
		}
		again, err := tokenize(render(toks))
		if err != nil {
			t.Fatalf("re-tokenize %q (from %q): %v", render(toks), in, err)
		}
		diff(t, "round trip of "+in, toks, again)
		parse(in) // must not panic
	})
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    script
		wantErr string
	}{
		{in: "a b", want: script{{pipes: []pipeline{{cmds: []command{{args: []string{"a", "b"}}}}}}}},
		{in: "a && ! b | c", want: script{{
			pipes: []pipeline{{cmds: []command{{args: []string{"a"}}}}, {neg: true, cmds: []command{{args: []string{"b"}}, {args: []string{"c"}}}}},
			ops:   []string{"&&"},
		}}},
		{in: "X=1 Y=2 env\n\n;", wantErr: "syntax error near unexpected token `;'"},
		{in: "X=1 Y=2 env; z", want: script{
			{pipes: []pipeline{{cmds: []command{{args: []string{"env"}}}}}},
			{pipes: []pipeline{{cmds: []command{{args: []string{"z"}}}}}},
		}},
		{in: "echo x > f 2>&1", want: script{{pipes: []pipeline{{cmds: []command{{
			args:   []string{"echo", "x"},
			redirs: []redir{{fd: 1, op: ">", target: "f"}, {fd: 2, op: ">&", target: "1"}},
		}}}}}}},
		{in: "a &&\n b", want: script{{
			pipes: []pipeline{{cmds: []command{{args: []string{"a"}}}}, {cmds: []command{{args: []string{"b"}}}}},
			ops:   []string{"&&"},
		}}},
		{in: "a |", wantErr: "syntax error: unexpected end of file"},
		{in: "a >", wantErr: "syntax error: unexpected end of file"},
		{in: "a > ;", wantErr: "syntax error near unexpected token `;'"},
		{in: "a ;; b", wantErr: "syntax error near unexpected token `;;'"},
		{in: "cat <<EOF", wantErr: "syntax error near unexpected token `<<'"},
		{in: "&& a", wantErr: "syntax error near unexpected token `&&'"},
	}
	for _, tt := range tests {
		got, err := parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("parse(%q): error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parse(%q): %v", tt.in, err)
			continue
		}
		diff(t, "parse("+tt.in+")", tt.want, got)
	}
}
