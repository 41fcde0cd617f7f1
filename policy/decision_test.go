package policy

import (
	"testing"
)

var decisionTests = []struct {
	text string
	want Decision // 0: not a decision
}{
	{"go ahead", Approve},
	{"Go ahead!", Approve},
	{"yes", Approve},
	{"Yes.", Approve},
	{"YES!!!", Approve},
	{"yes please", Approve},
	{"yes, go ahead", Approve},
	{"ok go ahead", Approve},
	{"do it", Approve},
	{"just do it", Approve},
	{"approve", Approve},
	{"approved", Approve},
	{"lgtm", Approve},
	{"LGTM 👍", Approve},
	{"ship it", Approve},
	{"ok", Approve},
	{"okay", Approve},
	{"sure", Approve},
	{"sure, thanks", Approve},
	{"👍", Approve},
	{"👍🏽", Approve},
	{"✅", Approve},
	{"✅✅", Approve},
	{"+1", Approve},
	{"@nomos yes", Approve},
	{"proceed", Approve},
	{"go for it", Approve},
	{"no", Deny},
	{"No.", Deny},
	{"nope", Deny},
	{"no thanks", Deny},
	{"stop", Deny},
	{"STOP!", Deny},
	{"cancel", Deny},
	{"deny", Deny},
	{"don't", Deny},
	{"don’t", Deny},
	{"dont", Deny},
	{"don't do it", Deny},
	{"do not do it", Deny},
	{"no no no", Deny},
	{"❌", Deny},
	{"👎", Deny},
	{"👎🏻", Deny},
	{"abort", Deny},
	{"no go", Deny},
	{"not now", Deny},
	{"-1", Deny},

	// Not decisions.
	{"", 0},
	{"   ", 0},
	{"no idea why it's down", 0},
	{"yes but first check disk", 0},
	{"yes, but first check the disk", 0},
	{"ok no", 0},
	{"yes no", 0},
	{"👍 ❌", 0},
	{"stop jellyfin", 0},
	{"restart jellyfin", 0},
	{"is it ok?", 0},
	{"not ok", 0},
	{"what do you think? yes or no", 0},
	{"y", 0},
	{"yesterday", 0},
	{"nothing", 0},
	{"ok-ish", 0},
	{"destroy lxc:131 k7q2", 0},
	{"cancelled already", 0},
	{"🙂", 0},
	{"-", 0},
	{"please", 0},
}

func TestParseDecision(t *testing.T) {
	t.Parallel()
	for _, tt := range decisionTests {
		got, ok := ParseDecision(tt.text)
		if ok != (tt.want != 0) || got != tt.want {
			t.Errorf("ParseDecision(%q) = %v, %v; want %v", tt.text, got, ok, tt.want)
		}
	}
}

func TestParseReaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want Decision
	}{
		{"✅", Approve}, {"👍", Approve}, {"👍️", Approve}, {"👍🏿", Approve},
		{"❌", Deny}, {"👎", Deny}, {"👎🏼", Deny},
		{"🎉", 0}, {"", 0}, {"yes", 0}, {"✅✅", 0}, {"👍❌", 0},
	}
	for _, tt := range tests {
		got, ok := ParseReaction(tt.key)
		if ok != (tt.want != 0) || got != tt.want {
			t.Errorf("ParseReaction(%q) = %v, %v; want %v", tt.key, got, ok, tt.want)
		}
	}
}

var refusalWords = map[string]bool{
	"no": true, "nope": true, "nah": true, "stop": true, "cancel": true, "deny": true, "denied": true,
	"don't": true, "dont": true, "not": true, "abort": true, "reject": true, "rejected": true, "-1": true,
	"❌": true, "👎": true, "🛑": true, "⛔": true, "🚫": true, "✖": true,
}

func FuzzParseDecision(f *testing.F) {
	for _, tt := range decisionTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, ok := ParseDecision(text)
		if ok != (d != 0) {
			t.Fatalf("ParseDecision(%q) = %v, %v", text, d, ok)
		}
		if !ok {
			return
		}
		toks := decisionTokens(text)
		for _, tok := range toks {
			if d == Approve && refusalWords[tok] {
				t.Fatalf("ParseDecision(%q) = approve although it says %q", text, tok)
			}
		}
		// A decision followed by anything that is not a decision word is
		// not a decision.
		if d2, ok2 := ParseDecision(text + " but check the disk first"); ok2 {
			t.Fatalf("ParseDecision(%q + qualifier) = %v", text, d2)
		}
		// Mixing in the opposite answer makes it no decision.
		opposite := " ❌"
		if d == Deny {
			opposite = " ✅"
		}
		if d2, ok2 := ParseDecision(text + opposite); ok2 {
			t.Fatalf("ParseDecision(%q) = %v", text+opposite, d2)
		}
	})
}
