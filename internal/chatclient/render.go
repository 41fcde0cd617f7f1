package chatclient

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// renderHTML turns a Matrix formatted_body into terminal text. Tags go and
// entities are decoded; paragraphs, list items, table rows and <br> become
// line breaks; <pre> keeps its layout, indented; inline <code> is wrapped in
// backticks; a reply fallback (<mx-reply>) is dropped.
func renderHTML(s string) string {
	nodes, err := html.ParseFragment(strings.NewReader(s), &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div})
	if err != nil {
		return s
	}
	var r renderer
	for _, n := range nodes {
		r.node(n)
	}
	return tidy(r.b.String())
}

// renderer accumulates text; b always holds what has been written so far,
// so spacing decisions look at its tail.
type renderer struct {
	b   bytes.Buffer
	pre bool // inside <pre>: whitespace is kept
	// bulletEnd is where the last list bullet ended: a line holding only a
	// bullet counts as empty.
	bulletEnd int
}

// blockTags start and end on their own lines.
var blockTags = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.H1: true, atom.H2: true, atom.H3: true,
	atom.H4: true, atom.H5: true, atom.H6: true, atom.Ul: true, atom.Ol: true,
	atom.Table: true, atom.Thead: true, atom.Tbody: true, atom.Tfoot: true, atom.Tr: true,
	atom.Details: true, atom.Summary: true, atom.Caption: true,
}

func (r *renderer) node(n *html.Node) {
	if n.Type == html.TextNode {
		r.text(n.Data)
		return
	}
	if n.Type != html.ElementNode {
		r.children(n)
		return
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Head, atom.Title:
		return
	case atom.Br:
		r.b.WriteByte('\n')
		return
	case atom.Hr:
		r.newline()
		r.b.WriteString("────────\n")
		return
	case atom.Img:
		r.text(attr(n, "alt"))
		return
	case atom.Pre:
		r.preBlock(n)
		return
	case atom.Code, atom.Tt:
		if r.pre {
			r.children(n)
			return
		}
		var inner renderer
		inner.children(n)
		r.text("`" + strings.TrimSpace(inner.b.String()) + "`")
		return
	case atom.Blockquote:
		r.newline()
		var inner renderer
		inner.children(n)
		for line := range strings.SplitSeq(tidy(inner.b.String()), "\n") {
			r.b.WriteString("> " + line + "\n")
		}
		return
	case atom.Li:
		r.listItem(n)
		return
	case atom.Td, atom.Th:
		if hasElementBefore(n) {
			r.trimTrailingSpace()
			r.b.WriteString(" | ")
		}
		r.children(n)
		return
	case atom.A:
		r.link(n)
		return
	}
	if n.Data == "mx-reply" {
		return
	}
	if blockTags[n.DataAtom] {
		r.newline()
		r.children(n)
		r.newline()
		return
	}
	r.children(n)
}

// preBlock renders preformatted text indented by two spaces, as typed.
func (r *renderer) preBlock(n *html.Node) {
	r.newline()
	var inner renderer
	inner.pre = true
	inner.children(n)
	code := strings.Trim(inner.b.String(), "\n")
	for line := range strings.SplitSeq(code, "\n") {
		r.b.WriteString("  ")
		r.b.WriteString(strings.TrimRight(line, " \t"))
		r.b.WriteByte('\n')
	}
}

// listItem renders a list item on its own line, with a bullet or its
// number, indented by its depth.
func (r *renderer) listItem(n *html.Node) {
	r.newline()
	bullet := "• "
	if p := n.Parent; p != nil && p.DataAtom == atom.Ol {
		bullet = strconv.Itoa(listIndex(n)) + ". "
	}
	r.b.WriteString(strings.Repeat("  ", listDepth(n)-1) + bullet)
	r.bulletEnd = r.b.Len()
	r.children(n)
	r.trimTrailingSpace()
	if !bytes.HasSuffix(r.b.Bytes(), []byte("\n")) {
		r.b.WriteByte('\n')
	}
}

// link renders a link's text, and its address when the text is not the
// address; a pill to a user or room shows just its text.
func (r *renderer) link(n *html.Node) {
	before := r.b.Len()
	r.children(n)
	text := strings.TrimSpace(string(r.b.Bytes()[before:]))
	href := attr(n, "href")
	bare := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(href, "https://"), "http://"), "mailto:")
	if href != "" && !strings.HasPrefix(href, "https://matrix.to/") && text != href && text != bare {
		r.b.WriteString(" (" + href + ")")
	}
}

func (r *renderer) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		r.node(c)
	}
}

var spaceRun = regexp.MustCompile(`\s+`)

// text writes a text node, collapsing whitespace outside <pre> the way a
// browser would.
func (r *renderer) text(s string) {
	if r.pre {
		r.b.WriteString(s)
		return
	}
	s = spaceRun.ReplaceAllString(s, " ")
	if r.atLineStart() || bytes.HasSuffix(r.b.Bytes(), []byte(" ")) {
		s = strings.TrimLeft(s, " ")
	}
	r.b.WriteString(s)
}

func (r *renderer) atLineStart() bool {
	return r.b.Len() == 0 || r.b.Len() == r.bulletEnd || bytes.HasSuffix(r.b.Bytes(), []byte("\n"))
}

// newline ends the current line unless it is already ended.
func (r *renderer) newline() {
	if r.atLineStart() {
		return
	}
	r.trimTrailingSpace()
	r.b.WriteByte('\n')
}

func (r *renderer) trimTrailingSpace() {
	r.b.Truncate(len(bytes.TrimRight(r.b.Bytes(), " ")))
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// listIndex is the number of an <li> in its <ol>, honouring start.
func listIndex(li *html.Node) int {
	i := 1
	if s, err := strconv.Atoi(attr(li.Parent, "start")); err == nil {
		i = s
	}
	for p := li.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode && p.DataAtom == atom.Li {
			i++
		}
	}
	return i
}

// listDepth counts the lists an <li> is nested in.
func listDepth(li *html.Node) int {
	d := 0
	for p := li.Parent; p != nil; p = p.Parent {
		if p.DataAtom == atom.Ul || p.DataAtom == atom.Ol {
			d++
		}
	}
	return max(d, 1)
}

func hasElementBefore(n *html.Node) bool {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			return true
		}
	}
	return false
}

var blankRun = regexp.MustCompile(`\n{3,}`)

// tidy trims trailing blanks from every line, keeps at most one empty line
// in a row, and trims the text's ends.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	s = strings.Join(lines, "\n")
	s = blankRun.ReplaceAllString(s, "\n\n")
	return strings.Trim(s, "\n")
}
