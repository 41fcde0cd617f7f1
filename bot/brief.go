package bot

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/report"
)

// briefJobs are the scheduler's jobs that post each brief in the ops
// room when it falls due. They run only on the leading bot, which claims
// each slot first, so a failover never posts one twice, and one that fell
// due while no bot led is posted once, late. Each period's brief is also
// claimed by its date, so a report.daily moved later in the day does not
// post that day's brief again.
func (b *Bot) briefJobs() []schedule.Job {
	var jobs []schedule.Job
	for _, kind := range []report.Kind{report.Daily, report.Weekly} {
		spec, ok := b.cfg.Briefs.Spec(kind)
		if !ok {
			continue
		}
		jobs = append(jobs, schedule.Job{Name: "brief." + string(kind), Spec: spec, Location: b.cfg.Briefs.Location, LeaderOnly: true,
			Run: func(ctx context.Context, slot time.Time) error { return b.postDueBrief(ctx, kind, slot) }})
	}
	return jobs
}

func (b *Bot) postDueBrief(ctx context.Context, kind report.Kind, slot time.Time) error {
	now := b.now()
	_, period, _ := b.cfg.Briefs.Period(kind, slot)
	claimed, err := b.store.ClaimBrief(ctx, string(kind), period)
	if err != nil {
		return fmt.Errorf("claim the %s brief of %s: %w: %w", kind, period, err, schedule.ErrRetry)
	}
	if !claimed {
		return nil
	}
	room := id.RoomID(b.cfg.OpsRoom)
	ev, err := b.postBrief(ctx, room, kind, now, nil)
	if err != nil {
		if err := b.store.UnclaimBrief(context.WithoutCancel(ctx), string(kind), period); err != nil {
			b.logger.Error("unclaim a brief that was not posted", "kind", kind, "period", period, "err", err)
		}
		return fmt.Errorf("post the %s brief in %s: %w: %w", kind, room, err, schedule.ErrRetry)
	}
	b.logger.Info("brief posted", "kind", kind, "period", period, "room_id", room, "late", humanLate(now, slot))
	if err := b.store.SetBriefEvent(ctx, string(kind), period, room.String(), ev.String()); err != nil {
		b.logger.Warn("record a brief's message", "kind", kind, "period", period, "err", err)
	}
	return nil
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
	r, err := report.Build(ctx, b.store, kind, report.Options{Now: now, Location: loc, StatusURL: b.cfg.StatusURL, BackupMaxAge: b.cfg.BackupMaxAge})
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
