package bot

import (
	"context"
	"fmt"
	"html"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// announceSignals announces, in the ops room, each check that starts
// failing and, as a reply, its recovery.
func (b *Bot) announceSignals(ctx context.Context) {
	room := id.RoomID(b.cfg.OpsRoom)
	now := b.now()
	list, err := b.store.SignalsToAnnounce(ctx, now.Add(-b.cfg.AlertDelay))
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("list signals to announce", "err", err)
		}
		return
	}
	var open []store.Window
	if len(list) > 0 {
		if open, err = b.store.OpenWindows(ctx, now); err != nil {
			b.logger.Warn("list open windows; alerts wait for the next pass", "err", err)
			return
		}
	}
	for _, a := range list {
		if a.State == "resolved" {
			b.noteRecovery(ctx, a)
			continue
		}
		// A window on the entity holds the alert back: recorded, never
		// paged, and summed up when the window ends.
		if w, ok := holdingWindow(open, a.EntityID, now); ok {
			if _, err := b.store.HoldSignal(ctx, a.ID, w.ID); err != nil {
				b.logger.Warn("hold back an alert", "signal", a.Kind, "window", w.Name, "err", err)
			}
			continue
		}
		// A check that fails again soon after its last announcement waits
		// out the flap window: if it is still failing then, it is
		// announced; if it recovered meanwhile, nobody is disturbed.
		if flapping, err := b.store.AnnouncedSince(ctx, a, now.Add(-b.cfg.FlapWindow)); err != nil || flapping {
			continue
		}
		if ok, err := b.store.ClaimSignalAlert(ctx, a.ID); err != nil || !ok {
			continue
		}
		plain, htm := alertText(a)
		content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: plain, Mentions: &event.Mentions{}}
		if a.Severity == "critical" && b.operatorsAway(room) {
			content.MsgType, content.Mentions.UserIDs = event.MsgText, b.operatorMentions()
		}
		ev, err := b.trySend(ctx, room, content, htm, nil, nil)
		if err != nil {
			b.alertFailed(a, room, err)
			if err := b.store.UnclaimSignalAlert(ctx, a.ID); err != nil {
				b.logger.Error("unclaim an alert that was not posted", "signal", a.Kind, "err", err)
			}
			continue
		}
		b.alertPosted(room)
		if err := b.store.SetSignalAlertEvent(ctx, a.ID, room.String(), ev.String()); err != nil {
			b.logger.Warn("record a signal's announcement", "signal", a.Kind, "err", err)
		}
	}
}

// alertWarnInterval is how often the log repeats that alerts cannot be
// posted: the loop retries every few seconds, the log need not.
const alertWarnInterval = time.Minute

// alertFailed logs a failed alert at most once per alertWarnInterval, with
// how many attempts failed since the last warning.
func (b *Bot) alertFailed(a store.SignalAlert, room id.RoomID, err error) {
	now := b.now()
	b.mu.Lock()
	b.alertFailures++
	n := b.alertFailures
	due := now.Sub(b.alertWarnedAt) >= alertWarnInterval
	if due {
		b.alertWarnedAt, b.alertFailures = now, 0
	}
	b.mu.Unlock()
	if due {
		b.logger.Warn("could not post alerts in the ops room; retrying every pass", "room_id", room, "failed_attempts", n,
			"signal", a.Kind, "entity", a.EntitySlug, "err", err)
	}
}

// alertPosted notes that alerts reach the room again.
func (b *Bot) alertPosted(room id.RoomID) {
	b.mu.Lock()
	warned := !b.alertWarnedAt.IsZero()
	b.alertWarnedAt, b.alertFailures = time.Time{}, 0
	b.mu.Unlock()
	if warned {
		b.logger.Info("alerts reach the ops room again", "room_id", room)
	}
}

// noteRecovery replies to a signal's announcement that it has resolved.
func (b *Bot) noteRecovery(ctx context.Context, a store.SignalAlert) {
	if ok, err := b.store.ClaimResolveNote(ctx, a.ID); err != nil || !ok {
		return
	}
	after := ""
	if a.ResolvedAt != nil {
		after = " after " + humantime.Duration(a.ResolvedAt.Sub(a.RaisedAt))
	}
	plain := fmt.Sprintf("🟢 %s recovered%s (%s).", a.EntitySlug, after, a.Kind)
	htm := fmt.Sprintf("🟢 <code>%s</code> recovered%s (<code>%s</code>).", html.EscapeString(a.EntitySlug), after, html.EscapeString(a.Kind))
	if b.sendNotice(ctx, id.RoomID(a.RoomID), plain, htm, &event.Event{ID: id.EventID(a.EventID)}) == "" {
		if err := b.store.UnclaimResolveNote(ctx, a.ID); err != nil {
			b.logger.Error("unclaim a recovery note that was not posted", "signal", a.Kind, "err", err)
		}
	}
}

func alertText(a store.SignalAlert) (plain, htm string) {
	icon, what := "🔴", "is failing"
	switch {
	case a.Kind == store.StaleSignalKind:
		icon, what = "⚪", "is stale, its checks have stopped answering"
	case a.Severity == "warning":
		icon, what = "🟡", "is degraded"
	}
	summary := redact.String(a.Summary)
	plain = fmt.Sprintf("%s %s %s: %s\nSay `show %s` for details.", icon, a.EntitySlug, what, summary, a.EntitySlug)
	htm = fmt.Sprintf("<p>%s <b><code>%s</code></b> %s: %s</p><p>Say <code>show %s</code> for details.</p>",
		icon, html.EscapeString(a.EntitySlug), what, html.EscapeString(summary), html.EscapeString(a.EntitySlug))
	return plain, htm
}
