package bot

import (
	"context"
	"slices"
	"strings"

	"github.com/nomoshq/nomos/internal/typo"
)

// nearTarget is the name of a known entity that ref is a letter or two
// off, or "" when there is none, or when ref names one itself.
func (b *Bot) nearTarget(ctx context.Context, ref string) string {
	if strings.Contains(ref, ":") || strings.Contains(ref, "/") {
		return ""
	}
	es, err := b.store.ListEntities(ctx, "")
	if err != nil {
		b.logger.Warn("list entities for a suggestion", "err", err)
		return ""
	}
	var names []string
	for _, e := range es {
		if n := strings.ToLower(e.Name); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	name, _ := typo.Nearest(strings.ToLower(ref), names, typo.Near(len(ref)))
	return name
}

// didYouMean is a message with the word ref put right as name, as a
// question to append to an answer; "" when ref is not a word of it.
func didYouMean(raw, ref, name string) string {
	body := stripMention(stripReplyFallback(raw))
	fs := rawFields(body)
	for i, f := range fs {
		if strings.EqualFold(strings.Trim(f.text, ",.:;!?"), ref) {
			fs[i].text = name
			words := make([]string, len(fs))
			for j, g := range fs {
				words[j] = g.text
			}
			return " Did you mean `" + strings.Join(words, " ") + "`?"
		}
	}
	return ""
}
