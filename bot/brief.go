package bot

import (
	"context"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/report"
)

// runBriefs posts each brief in the ops room when it falls due. It runs
// only on the leading bot; each period's brief is claimed in Postgres
// before it is posted, so a failover never posts one twice, and one that
// fell due while no bot led is posted once, late, within its period.
func (b *Bot) runBriefs(ctx context.Context) error {
	// posted remembers the period each kind was last seen done, so most
	// passes ask the database nothing.
	posted := map[report.Kind]string{}
	loop.Every(ctx, b.cfg.BriefCheckInterval, func(ctx context.Context) {
		for _, kind := range []report.Kind{report.Daily, report.Weekly} {
			b.postDueBrief(ctx, kind, posted)
		}
	})
	return nil
}

func (b *Bot) postDueBrief(ctx context.Context, kind report.Kind, posted map[report.Kind]string) {
	now := b.now()
	due, period, ok := b.cfg.Briefs.Period(kind, now)
	// A period that began before this deployment's first sync was never
	// missed: the first brief is the next one.
	if !ok || posted[kind] == period || due.Before(b.startedAt) {
		return
	}
	claimed, err := b.store.ClaimBrief(ctx, string(kind), period)
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("claim a brief", "kind", kind, "period", period, "err", err)
		}
		return
	}
	if !claimed {
		posted[kind] = period
		return
	}
	room := id.RoomID(b.cfg.OpsRoom)
	ev, err := b.postBrief(ctx, room, kind, now, nil)
	if err != nil {
		b.logger.Warn("could not post a brief; retrying next pass", "kind", kind, "period", period, "room_id", room, "err", err)
		if err := b.store.UnclaimBrief(context.WithoutCancel(ctx), string(kind), period); err != nil {
			b.logger.Error("unclaim a brief that was not posted", "kind", kind, "period", period, "err", err)
		}
		return
	}
	posted[kind] = period
	b.logger.Info("brief posted", "kind", kind, "period", period, "room_id", room, "late", humanLate(now, due))
	if err := b.store.SetBriefEvent(ctx, string(kind), period, room.String(), ev.String()); err != nil {
		b.logger.Warn("record a brief's message", "kind", kind, "period", period, "err", err)
	}
}

// humanLate says how late a brief went out, for the log.
func humanLate(now, due time.Time) string { return now.Sub(due).Round(time.Second).String() }

// postBrief builds kind's brief from the database and posts it as an
// m.notice with its Markdown rendered.
func (b *Bot) postBrief(ctx context.Context, room id.RoomID, kind report.Kind, now time.Time, replyTo *event.Event) (id.EventID, error) {
	loc := time.Local
	if b.cfg.Briefs != nil && b.cfg.Briefs.Location != nil {
		loc = b.cfg.Briefs.Location
	}
	r, err := report.Build(ctx, b.store, kind, report.Options{Now: now, Location: loc, StatusURL: b.cfg.StatusURL})
	if err != nil {
		return "", err
	}
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: r.Markdown, Mentions: &event.Mentions{}}
	return b.trySend(ctx, room, content, renderMarkdown(r.Markdown), replyTo, nil)
}

// replyBrief answers "brief" (and "brief weekly", which names it in
// which) with one now, to operators and readers.
func (b *Bot) replyBrief(ctx context.Context, evt *event.Event, which string) {
	kind := report.Daily
	if which == string(report.Weekly) {
		kind = report.Weekly
	}
	if _, err := b.postBrief(ctx, evt.RoomID, kind, b.now(), evt); err != nil {
		b.logger.Error("post a brief on request", "kind", kind, "room_id", evt.RoomID, "err", err)
		b.sendNotice(ctx, evt.RoomID, "I could not write the brief just now. The status page has the same facts.", "", evt)
	}
}

// parseBrief reads "brief", "brief daily", "brief weekly", "daily brief"
// and "weekly brief" or "weekly report".
func parseBrief(c *Command, verb string, args []token) (string, bool) {
	words := norms(args)
	kind := ""
	switch {
	case verb == "brief" && len(words) == 0:
		kind = string(report.Daily)
	case verb == "brief" && len(words) == 1 && (words[0] == "daily" || words[0] == "weekly"):
		kind = words[0]
	case verb != "brief" && len(words) == 1 && (words[0] == "brief" || words[0] == "report"):
		kind = verb
	case verb != "brief":
		return "", false // "daily" or "weekly" in a sentence is not a command
	default:
		return "usage: brief, or brief weekly", false
	}
	c.Kind, c.Target = CmdBrief, kind
	return "", true
}
