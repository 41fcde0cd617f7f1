package bot

import (
	"strings"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// matchRunbooks matches the message against every trigger. The trigger
// with the most literal words wins; on a tie, the first runbook.
func matchRunbooks(c *Command, toks []token, runbooks []store.Runbook) bool {
	bestScore := -1
	var best *store.Runbook
	var bestRef string
	for i := range runbooks {
		rb := &runbooks[i]
		if len(rb.Steps) == 0 || !knownSteps(rb.Steps) {
			continue
		}
		for _, trig := range rb.Triggers {
			pat, literal := compileTrigger(trig)
			if len(pat) == 0 || literal <= bestScore {
				continue
			}
			ref, typ, ok := matchPattern(pat, toks)
			if !ok {
				continue
			}
			if ref != "" && typ != "" && rb.TargetType != "" && typ != rb.TargetType {
				continue
			}
			best, bestRef, bestScore = rb, ref, literal
		}
	}
	if best == nil {
		return false
	}
	c.Kind, c.Target, c.Runbook = CmdAction, bestRef, best.Slug
	for _, s := range best.Steps {
		c.Steps = append(c.Steps, store.RunbookStep{Action: s.Action, Params: fillTarget(s.Params, bestRef)})
	}
	c.Action, c.Params = policy.Action(c.Steps[0].Action), c.Steps[0].Params
	return true
}

func knownSteps(steps []store.RunbookStep) bool {
	for _, s := range steps {
		if _, err := policy.Lookup(policy.Action(s.Action)); err != nil {
			return false
		}
	}
	return true
}

// targetSlot marks "{target}" in a compiled trigger.
const targetSlot = "\x00target"

// compileTrigger tokenizes a trigger the way messages are, with
// "{target}" as one slot, and counts its literal words. A trigger without
// exactly one slot compiles to nothing: every runbook step needs a target.
func compileTrigger(trig string) (pat []string, literal int) {
	parts := strings.Split(trig, "{target}")
	if len(parts) != 2 {
		return nil, 0
	}
	var toks []token
	for i, part := range parts {
		if i > 0 {
			toks = append(toks, token{raw: targetSlot, norm: targetSlot})
		}
		toks = append(toks, tokenize(part)...)
	}
	pat = norms(trimFillers(toks))
	return pat, len(pat) - 1
}

// matchPattern matches the whole message against a compiled trigger. A
// slot takes "[the] [type] <ref> [type]".
func matchPattern(pat []string, toks []token) (ref, typ string, ok bool) {
	if len(pat) == 0 {
		return "", "", len(toks) == 0
	}
	if pat[0] != targetSlot {
		if len(toks) == 0 || toks[0].norm != pat[0] {
			return "", "", false
		}
		return matchPattern(pat[1:], toks[1:])
	}
	// Try every way the slot can take words: optional article, type word
	// before, the ref, optional type word after.
	for skip := 0; skip <= 2 && skip < len(toks); skip++ {
		pre := toks[:skip]
		preType := ""
		switch {
		case skip == 1 && articles[pre[0].norm]:
		case skip == 1:
			t, isType := typeWords[pre[0].norm]
			if !isType {
				continue
			}
			preType = t
		case skip == 2:
			t, isType := typeWords[pre[1].norm]
			if !articles[pre[0].norm] || !isType {
				continue
			}
			preType = t
		}
		cand := toks[skip]
		if cand.raw == "" || !isRef(cand.raw) {
			continue
		}
		if _, isType := typeWords[cand.norm]; isType && preType == "" {
			continue
		}
		r := normSlug(cand.raw)
		candType := preType
		if t, _, isSlug := strings.Cut(r, ":"); isSlug {
			if candType != "" && candType != t {
				continue
			}
			candType = t
		}
		after := toks[skip+1:]
		if _, rt, ok := matchPattern(pat[1:], after); ok && rt == "" {
			return r, candType, true
		}
		if len(after) > 0 {
			if t, isType := typeWords[after[0].norm]; isType && (candType == "" || candType == t) {
				if _, rt, ok := matchPattern(pat[1:], after[1:]); ok && rt == "" {
					return r, t, true
				}
			}
		}
	}
	return "", "", false
}

// fillTarget copies params, replacing "{{target}}" in string values.
func fillTarget(params map[string]any, ref string) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "{{target}}", ref)
		}
		out[k] = v
	}
	return out
}
