package bot

import (
	"strings"
	"testing"
)

// TestRenderMarkdownCarriesNoMarkup: whatever the model writes, the HTML
// has only what Markdown itself makes: no raw tags, no script links.
func TestRenderMarkdownCarriesNoMarkup(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"**bold** and `code`", "<strong>bold</strong> and <code>code</code>"},
		{"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{"<div onclick=x>\nblock\n</div>", "&lt;div onclick=x&gt;"},
		{"[x](javascript:alert(1))", `<a href="">x</a>`},
		{"<javascript:alert(1)>", `<a href="">`},
		{"![i](data:text/html;base64,PHNjcmlwdD4=)", ""},
		{"[ok](https://example.org)", `<a href="https://example.org">ok</a>`},
	} {
		got := renderMarkdown(tt.in)
		if !strings.Contains(got, tt.want) {
			t.Errorf("renderMarkdown(%q) = %q, want it to contain %q", tt.in, got, tt.want)
		}
		for _, bad := range []string{"<script", "<div", `href="javascript`, `src="data`, "onclick=x>"} {
			if strings.Contains(got, bad) {
				t.Errorf("renderMarkdown(%q) = %q carries %q", tt.in, got, bad)
			}
		}
	}
	if got := renderMarkdown("plain words"); got != "" {
		t.Errorf("plain text rendered as %q, want no HTML", got)
	}
}
