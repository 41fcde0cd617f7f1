package policy

import (
	"fmt"
	"reflect"
	"strings"
)

// diff returns "" when want and got are deeply equal, and a (-want +got)
// report otherwise.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	ws, gs := lines(want), lines(got)
	var b strings.Builder
	b.WriteString("(-want +got):\n")
	for i := 0; i < max(len(ws), len(gs)); i++ {
		var w, g string
		if i < len(ws) {
			w = ws[i]
		}
		if i < len(gs) {
			g = gs[i]
		}
		if w == g {
			fmt.Fprintf(&b, "  %s\n", w)
			continue
		}
		if i < len(ws) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
		if i < len(gs) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	return b.String()
}

func lines(v any) []string {
	switch v := v.(type) {
	case []string:
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = fmt.Sprintf("%q", s)
		}
		return out
	case []Affected:
		out := make([]string, len(v))
		for i, a := range v {
			out[i] = fmt.Sprintf("%+v", a)
		}
		return out
	}
	return []string{fmt.Sprintf("%#v", v)}
}

// Targets used across tests.
var (
	hostStrong = Target{Type: TargetHost, ID: "0190a1b2-0000-7000-8000-000000000001", Slug: "host:strong", Host: "strong"}
	lxc101     = Target{Type: TargetLXC, ID: "0190a1b2-0000-7000-8000-000000000101", Slug: "lxc:101", Host: "strong", VMID: 101}
	lxc131     = Target{Type: TargetLXC, ID: "0190a1b2-0000-7000-8000-000000000131", Slug: "lxc:131", Host: "hubris", VMID: 131}
	jellyfin   = Target{Type: TargetService, ID: "0190a1b2-0000-7000-8000-00000000f001", Slug: "service:jellyfin", Host: "strong", VMID: 101, Unit: "jellyfin.service"}
	postgres   = Target{Type: TargetService, ID: "0190a1b2-0000-7000-8000-00000000f002", Slug: "service:postgres", Host: "strong", VMID: 105, Unit: "postgresql"}
)

// injections are strings that must never pass an identifier grammar.
var injections = []string{
	"foo;rm", "a b", "$(id)", "`id`", "a\nb", "a'b", `a"b`, "a|b", "a&b",
	"a>b", "a<b", "(a)", "-rf", "--help", "a\\b", "a\x00b", "a\tb", "${IFS}",
	"a\rb", "a\u202eb", "~root", "*", "a?b",
}
