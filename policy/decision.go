package policy

import (
	"strings"
	"unicode"
)

// Decision is an operator's answer to a plan.
type Decision uint8

// The decisions.
const (
	Approve Decision = iota + 1
	Deny
)

// String returns "approve" or "deny".
func (d Decision) String() string {
	switch d {
	case Approve:
		return "approve"
	case Deny:
		return "deny"
	}
	return "Decision(?)"
}

// Phrases ParseDecision recognises, as lowercase words. A message is read as
// a decision only if it consists entirely of these and of fillers.
var (
	assentPhrases = []string{
		"yes", "yep", "yeah", "yup", "sure", "ok", "okay", "alright", "all right",
		"go", "go ahead", "go for it", "do it", "approve", "approved", "lgtm",
		"sgtm", "ship it", "proceed", "confirm", "confirmed", "sounds good",
		"affirmative", "+1", "👍", "✅", "✔", "👌", "🆗",
	}
	refusalPhrases = []string{
		"no", "nope", "nah", "no go", "no way", "stop", "cancel", "deny", "denied",
		"don't", "dont", "do not", "don't do it", "dont do it", "do not do it",
		"abort", "reject", "rejected", "not now", "hold off", "-1",
		"❌", "👎", "🛑", "⛔", "🚫", "✖",
	}
	fillerPhrases = []string{
		"please", "pls", "plz", "thanks", "thank you", "thx", "ty", "nomos",
		"now", "then", "just", "and",
	}
)

type phrase struct {
	words []string
	kind  Decision // 0 for a filler
}

var decisionPhrases = func() []phrase {
	var out []phrase
	add := func(list []string, k Decision) {
		for _, p := range list {
			out = append(out, phrase{strings.Fields(p), k})
		}
	}
	add(assentPhrases, Approve)
	add(refusalPhrases, Deny)
	add(fillerPhrases, 0)
	return out
}()

// maxDecisionLen bounds the messages ParseDecision reads; a decision is
// never long.
const maxDecisionLen = 200

// ParseDecision reads a chat reply as approval or refusal. The whole message
// must be assent ("go ahead", "yes", "do it", "approve", "lgtm", "ship it",
// "ok", "sure", 👍, ✅ and kin) or refusal ("no", "stop", "cancel", "deny",
// "don't", ❌, 👎 and kin), possibly repeated and with fillers such as
// "please" or "thanks", after folding case and dropping punctuation. It is
// never a substring match: "no idea why it's down" and "yes but first check
// disk" are not decisions, and neither is a message that mixes assent and
// refusal. The boolean is false when the message is not a decision.
func ParseDecision(text string) (Decision, bool) {
	if len(text) > maxDecisionLen {
		return 0, false
	}
	toks := decisionTokens(text)
	var got Decision
	for i := 0; i < len(toks); {
		best := -1
		for j, p := range decisionPhrases {
			if len(p.words) <= len(toks)-i && equalWords(p.words, toks[i:i+len(p.words)]) &&
				(best < 0 || len(p.words) > len(decisionPhrases[best].words)) {
				best = j
			}
		}
		if best < 0 {
			return 0, false
		}
		p := decisionPhrases[best]
		if p.kind != 0 {
			if got != 0 && got != p.kind {
				return 0, false
			}
			got = p.kind
		}
		i += len(p.words)
	}
	return got, got != 0
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// decisionTokens lowercases text and splits it into words and single
// symbols: letters, digits, apostrophes and '+' and '-' inside a word form
// words; whitespace and punctuation separate; every other symbol (an emoji)
// is a token of its own. Emoji presentation selectors and skin tones are
// dropped, and typographic apostrophes become '.
func decisionTokens(text string) []string {
	var toks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			t := strings.Trim(cur.String(), "'")
			if strings.Trim(t, "+-") != "" {
				toks = append(toks, t)
			}
			cur.Reset()
		}
	}
	for _, r := range strings.ToLower(text) {
		switch {
		case r == 0xfe0f || r == 0xfe0e || (r >= 0x1f3fb && r <= 0x1f3ff):
			continue
		case r == '’' || r == '‘' || r == 'ʼ' || r == '′':
			r = '\''
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'':
			cur.WriteRune(r)
		case r == '+' || r == '-':
			// A sign belongs to the word it starts (+1, -1); elsewhere it
			// separates.
			flush()
			cur.WriteRune(r)
		case unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsControl(r):
			flush()
		default:
			flush()
			toks = append(toks, string(r))
		}
	}
	flush()
	return toks
}

// ParseReaction reads a reaction key on a plan card: ✅ or 👍 approve,
// ❌ or 👎 deny, with any skin tone or presentation selector. Anything else
// is not a decision.
func ParseReaction(key string) (Decision, bool) {
	var b strings.Builder
	for _, r := range key {
		if r == 0xfe0f || r == 0xfe0e || (r >= 0x1f3fb && r <= 0x1f3ff) {
			continue
		}
		b.WriteRune(r)
	}
	switch b.String() {
	case "✅", "👍":
		return Approve, true
	case "❌", "👎":
		return Deny, true
	}
	return 0, false
}
