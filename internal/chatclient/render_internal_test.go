package chatclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var renderCases = []struct {
	name, html, want string
}{
	{"plain", "hello", "hello"},
	{"entities", "a &amp; b &lt;c&gt; &quot;d&quot; &#x2705;", `a & b <c> "d" ✅`},
	{"inline tags go", "<b>restart</b> <em>jellyfin</em> <font color=red>now</font>", "restart jellyfin now"},
	{"whitespace collapses", "a   b\n  c", "a b c"},
	{"br", "one<br>two<br/>three", "one\ntwo\nthree"},
	{"paragraphs", "<p>one</p><p>two</p>", "one\ntwo"},
	{"headings", "<h3>Plan</h3>restart", "Plan\nrestart"},
	{"inline code", "run <code>pct  start 131</code> now", "run `pct start 131` now"},
	{"pre keeps layout", "<p>Commands:</p><pre><code>pct exec 131 -- \\\n    systemctl restart jellyfin\n</code></pre>done",
		"Commands:\n  pct exec 131 -- \\\n      systemctl restart jellyfin\ndone"},
	{"pre entities", "<pre>a &lt; b &amp;&amp; c</pre>", "  a < b && c"},
	{"unordered list", "<ul><li>one</li><li>two <b>2</b></li></ul>", "• one\n• two 2"},
	{"ordered list with start", "<ol start=\"3\"><li>a</li><li>b</li></ol>", "3. a\n4. b"},
	{"nested list", "<ul><li>a<ul><li>b</li></ul></li></ul>", "• a\n  • b"},
	{"paragraph in item", "<ul><li><p>a</p></li><li></li><li>c</li></ul>", "• a\n•\n• c"},
	{"table", "<table><tr><th>name</th><th>vmid</th></tr><tr><td>jellyfin</td><td>131</td></tr></table>", "name | vmid\njellyfin | 131"},
	{"blockquote", "<blockquote><p>a</p><p>b</p></blockquote>after", "> a\n> b\nafter"},
	{"link with other text", `see <a href="http://127.0.0.1:8080/e/1">the log</a>`, "see the log (http://127.0.0.1:8080/e/1)"},
	{"bare link", `<a href="https://example.org">https://example.org</a>`, "https://example.org"},
	{"user pill", `<a href="https://matrix.to/#/@operator:localhost">operator</a>: done`, "operator: done"},
	{"reply fallback dropped", `<mx-reply><blockquote><a href="https://matrix.to/#/!r/$e">In reply to</a> plan</blockquote></mx-reply>go ahead`, "go ahead"},
	{"image alt", `<img src="mxc://x/y" alt=":ok:">`, ":ok:"},
	{"script dropped", "<script>alert(1)</script>ok", "ok"},
	{"hr", "a<hr>b", "a\n────────\nb"},
	{"unclosed tags", "<b>bold <i>both", "bold both"},
}

func TestRenderHTML(t *testing.T) {
	t.Parallel()
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, renderHTML(tc.html)); diff != "" {
				t.Errorf("renderHTML(%q) (-want +got):\n%s", tc.html, diff)
			}
		})
	}
}

func FuzzRenderHTML(f *testing.F) {
	for _, tc := range renderCases {
		f.Add(tc.html)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := renderHTML(s)
		for line := range strings.SplitSeq(got, "\n") {
			if strings.TrimRight(line, " \t") != line {
				t.Fatalf("renderHTML(%q) left trailing blanks on %q", s, line)
			}
		}
		if plainASCII(s) {
			if want := strings.Join(strings.Fields(s), " "); got != want {
				t.Fatalf("renderHTML(%q) = %q; text without markup should only lose extra whitespace, want %q", s, got, want)
			}
		}
	})
}

// plainASCII reports whether s is printable ASCII text with no markup.
func plainASCII(s string) bool {
	for _, r := range s {
		if r == '<' || r == '&' || (r < ' ' && r != ' ' && r != '\n' && r != '\t') || r > '~' {
			return false
		}
	}
	return true
}

var planCases = []struct {
	name, text string
	want       bool
}{
	{"card", "Plan: restart jellyfin on lxc:hubris/131 (media)\nRisk: reversible_low\nRuns: systemctl restart jellyfin\nReact ✅ to approve or ❌ to deny.", true},
	{"destructive card", "Destroy lxc:hubris/131\nRISK: DESTRUCTIVE\nType `destroy lxc:hubris/131 k7q2` to approve.", true},
	{"card with hyphen", "Restart jellyfin\nrisk: read-only\nApprove with 👍", true},
	{"one-line refusal", "A reaction doesn't approve a destructive plan; type the phrase.", false},
	{"status without approval hint", "jellyfin restarted\nrisk: reversible_low\nsucceeded in 3 s", false},
	{"chatter", "Hello! Say help to see what I can do.", false},
}

func TestLooksLikePlan(t *testing.T) {
	t.Parallel()
	for _, tc := range planCases {
		if got := looksLikePlan(tc.text); got != tc.want {
			t.Errorf("%s: looksLikePlan(%q) = %v, want %v", tc.name, tc.text, got, tc.want)
		}
	}
}
