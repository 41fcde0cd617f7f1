package bot

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// destroyPlan turns the card's plan into the destruction of CT 131.
func destroyPlan(v *CardView) {
	x := &v.Planned.Execution
	x.Action, x.TargetSlug, x.RiskClass, x.Steps = "pct_destroy", "lxc:hubris/131", "destructive", []string{"pct destroy 131"}
	v.Planned.Risk = policy.Risk{Class: policy.Destructive, Reasons: []string{"destroys lxc:hubris/131 and its disks"}}
	v.Planned.Phrase = "destroy lxc:hubris/131 k7q2"
}

// TestApprovalHintNamesOnlyWhatWorks: the hint on a card waiting for a
// decision names only what approves this plan in this room. A reversible
// plan: no phrase; ✅ only where reactions count, and in an encrypted room
// (verified sessions only; Element sends reactions in the clear) "reply
// go ahead" first. A destructive plan: its phrase, exactly, and no ✅, no
// "go ahead" and no code; in an encrypted room, from a verified session.
func TestApprovalHintNamesOnlyWhatWorks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		change   func(v *CardView)
		first    string // the hint's approval starts with this
		want     []string
		not      []string
		wantHTML []string
	}{
		{
			name:  "reversible, room in the clear",
			first: "Approve: react ✅ or 👍",
			want:  []string{"reply \"go ahead\"", "say approve k7q2", "Deny: react ❌"},
			not:   []string{"phrase", "type exactly", "verified session", "restart service:jellyfin k7q2"},
		},
		{
			name:   "reversible, encrypted room",
			change: func(v *CardView) { v.VerifiedOnly = true },
			first:  "Approve: reply \"go ahead\" to this card",
			want:   []string{"say approve k7q2", "from a verified session", "a reaction, sent unencrypted, does not approve"},
			not:    []string{"✅", "👍", "phrase", "type exactly"},
		},
		{
			name:   "reversible with a phrase derived: still no phrase",
			change: func(v *CardView) { v.Planned.Phrase = "restart service:jellyfin k7q2" },
			first:  "Approve: react ✅ or 👍",
			not:    []string{"restart service:jellyfin k7q2", "phrase", "type exactly"},
		},
		{
			name:     "destructive, room in the clear",
			change:   destroyPlan,
			first:    "⚠️ Destructive. To approve, type exactly: destroy lxc:hubris/131 k7q2\n",
			want:     []string{"A reaction or a \"yes\" does not approve this plan."},
			not:      []string{"✅", "go ahead", "approve k7q2", "verified session"},
			wantHTML: []string{"type exactly: <code>destroy lxc:hubris/131 k7q2</code>"},
		},
		{
			name:   "destructive, encrypted room",
			change: func(v *CardView) { destroyPlan(v); v.VerifiedOnly = true },
			first:  "⚠️ Destructive. To approve, type exactly: destroy lxc:hubris/131 k7q2\n",
			want:   []string{"Type it from a verified session"},
			not:    []string{"✅", "go ahead", "approve k7q2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := cardSetup(t)
			if tc.change != nil {
				tc.change(&v)
			}
			plain, htm := RenderCard(v)
			at := strings.Index(plain, "awaiting approval")
			if at < 0 {
				t.Fatalf("no awaiting line in:\n%s", plain)
			}
			hint := plain[at:]
			if i := strings.Index(hint, "\n"); !strings.HasPrefix(strings.TrimLeft(hint[i:], "\n"), tc.first) {
				t.Errorf("the hint starts %q, want %q", strings.TrimLeft(hint[i:], "\n"), tc.first)
			}
			for _, w := range tc.want {
				if !strings.Contains(hint, w) {
					t.Errorf("the hint lacks %q:\n%s", w, hint)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(hint, n) {
					t.Errorf("the hint names %q, which does not approve this plan here:\n%s", n, hint)
				}
			}
			for _, w := range tc.wantHTML {
				if !strings.Contains(htm, w) {
					t.Errorf("the HTML lacks %q:\n%s", w, htm)
				}
			}
		})
	}
}

// TestAssentNotBoundNamesOnlyWhatWorks: the answer to a bare "yes" that
// does not approve says how to approve the plan, by the same rule as its
// card.
func TestAssentNotBoundNamesOnlyWhatWorks(t *testing.T) {
	t.Parallel()
	x := store.Execution{Request: store.Request{PlanCode: "k7q2", Action: "restart", TargetSlug: "service:jellyfin",
		RiskClass: "reversible_low", RequestedBy: "mcp:claude", RequestedVia: "mcp"}}
	for _, tc := range []struct {
		name         string
		class        string
		verifiedOnly bool
		want, not    []string
	}{
		{"reversible, room in the clear", "reversible_low", false, []string{"react ✅ or 👍", "approve k7q2"}, []string{"phrase"}},
		{"reversible, encrypted room", "reversible_low", true, []string{"reply \"go ahead\" to its card", "from a verified session"}, []string{"✅", "phrase"}},
		{"destructive", "destructive", false, []string{"type exactly the confirmation phrase its card shows"}, []string{"✅", "go ahead", "approve k7q2"}},
		{"destructive, encrypted room", "destructive", true, []string{"confirmation phrase", "from a verified session"}, []string{"✅", "go ahead"}},
	} {
		x.RiskClass = tc.class
		plain, _ := NoticeAssentNotBound(x, tc.verifiedOnly)
		_, how, _ := strings.Cut(plain, "To approve it, ")
		for _, w := range tc.want {
			if !strings.Contains(how, w) {
				t.Errorf("%s: %q lacks %q", tc.name, how, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(how, n) {
				t.Errorf("%s: %q names %q", tc.name, how, n)
			}
		}
	}
}
