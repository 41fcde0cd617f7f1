package web

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/store"
)

// TestSlowClientIsDroppedNotWaitedFor: a client that stops reading is cut
// off once its buffer is full; publishing never blocks and the others
// keep every event.
func TestSlowClientIsDroppedNotWaitedFor(t *testing.T) {
	h := newHub(4, 3)
	slow, fast := h.subscribe(), h.subscribe()
	for i := range 10 {
		h.publish(liveEvent{Kind: "execution", State: string(rune('a' + i))})
		<-fast
	}
	n := 0
	for range slow {
		n++
	}
	if n != 4 {
		t.Errorf("the slow client got %d events before it was dropped, want its buffer of 4", n)
	}
	if clients, dropped := h.stats(); clients != 1 || dropped != 1 {
		t.Errorf("hub has %d clients and dropped %d, want 1 and 1", clients, dropped)
	}
	h.subscribe()
	h.subscribe()
	if c := h.subscribe(); c != nil {
		t.Error("a fourth client was let in past the limit of 3")
	}
	h.unsubscribe(fast)
	h.unsubscribe(fast) // twice is harmless
	h.closeAll()
	if clients, _ := h.stats(); clients != 0 {
		t.Errorf("%d clients left after closeAll", clients)
	}
}

// TestTilesEscape: the grid tiles are written without the template
// engine, so every value in them must come out escaped.
func TestTilesEscape(t *testing.T) {
	r := &fleetRow{Children: []*fleetRow{{
		FleetNode: store.FleetNode{Slug: `lxc:1"><script>x</script>`, Name: `<img src=x onerror=alert(1)>`},
		Worst:     `healthy" onmouseover="alert(1)`, Label: `<b>101</b>`,
	}}}
	got := string(r.Tiles())
	want := `<a class="tile b-unknown" href="/e/lxc:1&#34;&gt;&lt;script&gt;x&lt;/script&gt;" title="&lt;img src=x onerror=alert(1)&gt;: unknown">&lt;b&gt;101&lt;/b&gt;</a>`
	if got != want {
		t.Errorf("tiles:\n got %s\nwant %s", got, want)
	}
}

var snippetCases = []struct {
	in   string
	want []snippetPart
}{
	{"", nil},
	{"plain", []snippetPart{{Text: "plain"}}},
	{"restart «postgres» in a «quiet» hour", []snippetPart{{Text: "restart "}, {Text: "postgres", Match: true},
		{Text: " in a "}, {Text: "quiet", Match: true}, {Text: " hour"}}},
	{"«<img src=x onerror=alert(1)>»", []snippetPart{{Text: "<img src=x onerror=alert(1)>", Match: true}}},
	{"unclosed «mark", []snippetPart{{Text: "unclosed "}, {Text: "mark", Match: true}}},
	{"stray » close", []snippetPart{{Text: "stray » close"}}},
	{"«password=hunter2»", []snippetPart{{Text: "password=[REDACTED]", Match: true}}},
}

// TestSnippet: ts_headline's markers become matched runs the template
// escapes; nothing else in the text becomes markup, and secrets are
// redacted.
func TestSnippet(t *testing.T) {
	for _, c := range snippetCases {
		if diff := cmp.Diff(c.want, snippet(c.in)); diff != "" {
			t.Errorf("snippet(%q) (-want +got):\n%s", c.in, diff)
		}
	}
}

func FuzzSnippet(f *testing.F) {
	for _, c := range snippetCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b strings.Builder
		for _, p := range snippet(s) {
			if p.Match && strings.Contains(p.Text, "»") {
				t.Errorf("a match runs past its closing marker: %q", p.Text)
			}
			b.WriteString(p.Text)
		}
		if b.Len() > len(s)+len("[REDACTED]")*len(s) {
			t.Errorf("snippet grew %q to %q", s, b.String())
		}
	})
}

// The templates are parsed when a page is first shown, so this test, not
// the start of the bot, is what stops one that does not parse.
func TestPagesParse(t *testing.T) {
	t.Parallel()
	pages, err := pages()
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		if pages[name] == nil || pages[name].Lookup("layout") == nil {
			t.Errorf("page %s: no template with the layout", name)
		}
	}
	if len(pages) != len(files)-1 {
		t.Errorf("%d pages from %d template files, want one for each but the layout", len(pages), len(files))
	}
}
