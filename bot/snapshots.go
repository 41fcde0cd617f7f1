package bot

import (
	"context"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/policy"
)

// replySnapshots answers "snapshots <lxc|vm>": the guest's snapshots as
// its node last listed them, newest first, each with its age where its
// name tells it and who made it: Nomos, before which change and for whom,
// or someone else (Nomos never deletes those).
func (b *Bot) replySnapshots(ctx context.Context, evt *event.Event, ref string) {
	matches, err := b.store.ResolveTargets(ctx, ref, "lxc", "vm")
	switch {
	case err != nil:
		b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
		return
	case len(matches) == 0:
		b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("I don't know a container or VM %q. Try `list guests`.", ref), "", evt)
		return
	case len(matches) > 1:
		b.askWhich(ctx, evt, ref, matches)
		return
	}
	ct := matches[0]
	raw, listed := ct.Attrs["snapshots"].([]any)
	if !listed {
		b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("No inventory has listed the snapshots of %s (%s) yet; `nomos discover` asks its node now.", ct.Name, ct.Slug), "", evt)
		return
	}
	var names []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			names = append(names, s)
		}
	}
	slices.Reverse(names) // newest first
	origins, err := b.store.SnapshotOrigins(ctx, ct.Slug, names)
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
		return
	}
	now := b.now()
	var plain, htm strings.Builder
	title := fmt.Sprintf("Snapshots of %s (%s): %d, newest first", ct.Name, ct.Slug, len(names))
	if len(names) == 0 {
		title = fmt.Sprintf("%s (%s) has no snapshots.", ct.Name, ct.Slug)
	}
	plain.WriteString(title + "\n")
	htm.WriteString("<p><b>" + html.EscapeString(title) + "</b></p>")
	if len(names) > 0 {
		htm.WriteString("<ul>")
	}
	for _, name := range names {
		line := name
		if at, ok := snapshotTime(name); ok {
			line += ", " + humantime.Ago(now, at)
		}
		switch o, ok := origins[name]; {
		case ok:
			line += fmt.Sprintf(", by Nomos before %s on %s, asked by %s", o.Action, o.TargetSlug, o.RequestedBy)
			if o.ApprovedBy != "" {
				line += ", approved by " + o.ApprovedBy
			}
		case policy.IsNomosSnapshot(name):
			line += ", by Nomos"
		default:
			line += ", not made by Nomos (Nomos never deletes it)"
		}
		plain.WriteString("• " + line + "\n")
		htm.WriteString("<li>" + html.EscapeString(line) + "</li>")
	}
	if len(names) > 0 {
		htm.WriteString("</ul>")
	}
	var notes []string
	if ct.AttrString("storage_type") == "zfspool" && len(names) > 1 {
		notes = append(notes, "On ZFS a rollback goes to the newest snapshot only; a rollback to an older one deletes the newer ones first, and its card names them.")
	}
	if ct.RunStateAt != nil {
		notes = append(notes, "As its node listed them "+humantime.Ago(now, *ct.RunStateAt)+".")
	}
	for _, n := range notes {
		plain.WriteString(n + "\n")
		htm.WriteString("<p>" + html.EscapeString(n) + "</p>")
	}
	b.sendNotice(ctx, evt.RoomID, plain.String(), htm.String(), evt)
}

// snapshotTime is when Nomos took a snapshot, from the name it gave it.
func snapshotTime(name string) (time.Time, bool) {
	if !policy.IsNomosSnapshot(name) {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102-150405", strings.TrimPrefix(name, "nomos-")[:15])
	return t, err == nil
}
