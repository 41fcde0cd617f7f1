package mcpserver

import (
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// SanitizeText makes fetched text safe to hand a model as data: valid
// UTF-8, no control characters but newlines and tabs, none of the
// invisible characters that can hide instructions from a human reader
// (zero-width, bidirectional overrides, Unicode tags), trailing spaces
// trimmed and runs of blank lines folded to one.
func SanitizeText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if keepRune(r) {
			b.WriteRune(r)
		}
	}
	lines := strings.Split(b.String(), "\n")
	out := lines[:0]
	blank := 0
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}

func keepRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return true
	case unicode.IsControl(r):
		return false
	case r >= 0x200B && r <= 0x200F, // zero-width spaces and marks
		r >= 0x202A && r <= 0x202E,   // bidirectional embeddings and overrides
		r >= 0x2060 && r <= 0x2069,   // word joiner, invisible operators, isolates
		r == 0xFEFF,                  // byte order mark
		r >= 0xE0000 && r <= 0xE007F, // tag characters
		r >= 0xFFF9 && r <= 0xFFFB:   // interlinear annotations
		return false
	}
	return true
}

// Elements whose content is never text a reader sees.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Math: true, atom.Iframe: true, atom.Object: true, atom.Embed: true, atom.Canvas: true,
	atom.Head: true, atom.Select: true, atom.Button: true, atom.Input: true, atom.Textarea: true,
}

// Elements that start a new line.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true, atom.Header: true,
	atom.Footer: true, atom.Nav: true, atom.Aside: true, atom.Ul: true, atom.Ol: true, atom.Dl: true,
	atom.Dt: true, atom.Dd: true, atom.Table: true, atom.Tr: true, atom.Blockquote: true, atom.Figure: true,
	atom.Figcaption: true, atom.Details: true, atom.Summary: true, atom.Form: true, atom.Fieldset: true, atom.Address: true,
}

// HTMLToText turns an HTML document into readable plain text: headings as
// "#" lines, list items as "- ", preformatted text kept as is, links as
// "text (url)" resolved against base, and scripts, styles, forms and
// elements hidden from readers (hidden, aria-hidden, display:none)
// dropped, since hidden text is where injected instructions hide. The
// result is passed through SanitizeText.
func HTMLToText(doc string, base *url.URL) string {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		return SanitizeText(doc)
	}
	w := &textWriter{}
	if t := findTitle(root); t != "" {
		w.text("# " + t)
		w.breakLine(2)
	}
	w.walk(root, base)
	return SanitizeText(w.b.String())
}

func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}

// textWriter accumulates text with collapsed whitespace outside <pre>.
type textWriter struct {
	b        strings.Builder
	newlines int  // trailing newlines already written
	space    bool // a space is pending before the next word
	pre      int  // depth of <pre>
}

func (w *textWriter) text(s string) {
	if w.pre > 0 {
		if s != "" {
			w.b.WriteString(s)
			w.newlines = 0
			if strings.HasSuffix(s, "\n") {
				w.newlines = 1
			}
		}
		return
	}
	if s != "" && unicode.IsSpace(rune(s[0])) {
		w.space = true
	}
	fields := strings.Fields(s)
	for i, f := range fields {
		if (i > 0 || w.space) && w.newlines == 0 && w.b.Len() > 0 {
			w.b.WriteByte(' ')
		}
		w.b.WriteString(f)
		w.newlines, w.space = 0, false
	}
	if len(fields) > 0 && unicode.IsSpace(rune(s[len(s)-1])) {
		w.space = true
	}
}

// breakLine ends the current line, leaving at least n newlines.
func (w *textWriter) breakLine(n int) {
	if w.b.Len() == 0 {
		return
	}
	for w.newlines < n {
		w.b.WriteByte('\n')
		w.newlines++
	}
	w.space = false
}

func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		switch strings.ToLower(a.Key) {
		case "hidden":
			return true
		case "aria-hidden":
			if strings.EqualFold(strings.TrimSpace(a.Val), "true") {
				return true
			}
		case "style":
			v := strings.ToLower(strings.ReplaceAll(a.Val, " ", ""))
			if strings.Contains(v, "display:none") || strings.Contains(v, "visibility:hidden") || strings.Contains(v, "font-size:0") {
				return true
			}
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

func (w *textWriter) walk(n *html.Node, base *url.URL) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.DocumentNode:
		w.children(n, base)
		return
	case html.ElementNode:
	default:
		return
	}
	if skipped[n.DataAtom] || hidden(n) {
		return
	}
	switch a := n.DataAtom; {
	case a == atom.Br:
		w.breakLine(1)
	case a == atom.Hr:
		w.breakLine(1)
		w.text("---")
		w.breakLine(1)
	case isHeading(a):
		w.breakLine(2)
		w.text(strings.Repeat("#", headingLevel(a)) + " ")
		w.children(n, base)
		w.breakLine(2)
	case a == atom.Li:
		w.breakLine(1)
		w.text("- ")
		w.children(n, base)
		w.breakLine(1)
	case a == atom.Pre:
		w.breakLine(2)
		w.pre++
		w.children(n, base)
		w.pre--
		w.breakLine(2)
	case a == atom.Td || a == atom.Th:
		if n.PrevSibling != nil {
			w.text(" | ")
		}
		w.children(n, base)
	case a == atom.A:
		before := w.b.Len()
		w.children(n, base)
		label := strings.TrimSpace(w.b.String()[before:])
		if href := linkTarget(attr(n, "href"), base); href != "" && label != "" && label != href {
			w.text(" (" + href + ")")
		}
	case a == atom.Img:
		if alt := strings.TrimSpace(attr(n, "alt")); alt != "" {
			w.text(" [image: " + alt + "] ")
		}
	case blocks[a]:
		w.breakLine(1)
		w.children(n, base)
		w.breakLine(1)
	default:
		w.children(n, base)
	}
}

func (w *textWriter) children(n *html.Node, base *url.URL) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, base)
	}
}

func isHeading(a atom.Atom) bool { return headingLevel(a) > 0 }

func headingLevel(a atom.Atom) int {
	switch a {
	case atom.H1:
		return 1
	case atom.H2:
		return 2
	case atom.H3:
		return 3
	case atom.H4:
		return 4
	case atom.H5:
		return 5
	case atom.H6:
		return 6
	}
	return 0
}

// linkTarget resolves an href to an absolute http(s) URL worth showing;
// fragments, javascript: and mailto: links are dropped.
func linkTarget(href string, base *url.URL) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	u.User = nil
	return u.String()
}
