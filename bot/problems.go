package bot

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"slices"
	"strings"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// Bounds of the problems reply, so it stays readable on a phone.
const (
	maxProblemSignals = 10
	maxProblemTargets = 15
)

// problemRank orders the healths that need attention, worst first.
var problemRank = map[string]int{"unhealthy": 0, "degraded": 1, "stale": 2}

// replyProblems answers "problems" and "what's wrong": the open signals,
// then every host, container and service that is unhealthy, degraded or
// stale and has no open signal of its own, worst first. A container
// stopped on purpose (onboot off) is not a problem; it is counted apart.
func (b *Bot) replyProblems(ctx context.Context, evt *event.Event) {
	sigs, err := b.store.ListSignals(ctx, store.SignalFilter{Limit: 200})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
		return
	}
	var targets []store.Entity
	stopped := 0
	for _, typ := range []string{"host", "lxc", "service"} {
		es, err := b.store.ListEntities(ctx, typ)
		if err != nil {
			b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
			return
		}
		for _, e := range es {
			switch _, bad := problemRank[e.Health]; {
			case e.Lifecycle == "destroyed":
			case e.Health == "stopped":
				stopped++
			case bad:
				targets = append(targets, e)
			}
		}
	}
	signalled := map[string]bool{}
	for _, g := range sigs {
		signalled[g.EntitySlug] = true
	}
	targets = slices.DeleteFunc(targets, func(e store.Entity) bool { return signalled[e.Slug] })
	slices.SortStableFunc(targets, func(x, y store.Entity) int {
		return cmp.Or(problemRank[x.Health]-problemRank[y.Health], cmp.Compare(x.Slug, y.Slug))
	})

	now := b.now()
	var plain, htm strings.Builder
	if len(sigs) == 0 && len(targets) == 0 {
		line := "Nothing needs attention: no open signals, and nothing is unhealthy, degraded or stale."
		plain.WriteString(line + "\n")
		htm.WriteString("<p>" + html.EscapeString(line) + "</p>")
	}
	list := func(title string, lines []string, more int) {
		if len(lines) == 0 {
			return
		}
		if more > 0 {
			lines = append(lines, fmt.Sprintf("… and %d more: the status page lists them all", more))
		}
		plain.WriteString(title + "\n")
		htm.WriteString("<p><b>" + html.EscapeString(title) + "</b></p><ul>")
		for _, l := range lines {
			plain.WriteString("• " + l + "\n")
			htm.WriteString("<li>" + html.EscapeString(l) + "</li>")
		}
		htm.WriteString("</ul>")
	}
	var lines []string
	for _, g := range sigs[:min(len(sigs), maxProblemSignals)] {
		l := fmt.Sprintf("%s %s %s: %s (raised %s", signalIcon(g.Severity), g.EntitySlug, g.Kind, clip(redact.String(g.Summary), 160), humantime.Ago(now, g.RaisedAt))
		if g.Muted(now) {
			l += ", muted"
		} else if g.AcknowledgedBy != "" {
			l += ", acknowledged by " + g.AcknowledgedBy
		}
		lines = append(lines, l+")")
	}
	list(fmt.Sprintf("Open signals (%d), worst first:", len(sigs)), lines, len(sigs)-len(lines))
	lines = nil
	for _, e := range targets[:min(len(targets), maxProblemTargets)] {
		l := fmt.Sprintf("%s %s %s, %s", icon(e.Health), e.Name, "("+e.Slug+")", e.Health)
		if d := strings.TrimSpace(e.Detail); d != "" {
			l += ": " + clip(redact.String(d), 160)
		}
		lines = append(lines, l)
	}
	list(fmt.Sprintf("Unhealthy, degraded or stale without a signal (%d):", len(targets)), lines, len(targets)-len(lines))
	if stopped > 0 {
		line := fmt.Sprintf("Not counted: %d container(s) stopped on purpose (onboot off).", stopped)
		plain.WriteString(line + "\n")
		htm.WriteString("<p>" + html.EscapeString(line) + "</p>")
	}
	b.sendNotice(ctx, evt.RoomID, plain.String(), htm.String(), evt)
}
