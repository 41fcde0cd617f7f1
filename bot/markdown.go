package bot

import (
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/renderer/html"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/format/mdext"
)

// markdown renders the agent's Markdown for Element. Raw HTML in the text
// is escaped, never passed through (mdext.EscapeHTML), and without
// goldmark's unsafe mode links to javascript:, vbscript: or file: URLs
// lose their target: a model steered by a log line cannot put markup or a
// script link in the room.
var markdown = goldmark.New(format.Extensions,
	goldmark.WithRendererOptions(html.WithHardWraps()),
	goldmark.WithExtensions(mdext.EscapeHTML))

// renderMarkdown returns the Matrix HTML for text, or "" when the text has
// no formatting worth sending. The plain body stays the Markdown itself,
// which reads well on clients that show no HTML.
func renderMarkdown(text string) string {
	c := format.RenderMarkdownCustom(text, markdown)
	if c.Format != event.FormatHTML {
		return ""
	}
	return strings.TrimSpace(c.FormattedBody)
}
