package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/store"
)

// Reactions an operator puts on an alert.
const (
	reactAck  = "👀"
	reactMute = "🔇"
)

// maxMute bounds a mute asked for in words: a typo must not silence a
// check for a year.
const maxMute = 7 * 24 * time.Hour

// signalVerb is what an operator asked of an alert.
type signalVerb int

const (
	verbAck signalVerb = iota + 1
	verbMute
)

// parseSignalReply reads "ack", "acknowledge", "mute" or "mute 2h" (a Go
// duration, from a minute to maxMute). ok is false for anything else, so
// other replies to an alert go on to the grammar and the agent.
func parseSignalReply(body string) (verb signalVerb, d time.Duration, ok bool) {
	f := strings.Fields(strings.ToLower(strings.Trim(stripMention(body), " .!")))
	switch {
	case len(f) == 1 && (f[0] == "ack" || f[0] == "acknowledge" || f[0] == "acknowledged"):
		return verbAck, 0, true
	case len(f) == 1 && f[0] == "mute":
		return verbMute, 0, true
	case len(f) == 2 && f[0] == "mute":
		d, err := time.ParseDuration(f[1])
		if err != nil || d < time.Minute || d > maxMute {
			return 0, 0, false
		}
		return verbMute, d, true
	}
	return 0, 0, false
}

// signalReaction handles 👀 and 🔇 on an alert. It reports whether the
// reaction was on an alert with one of those keys, handled or refused.
func (b *Bot) signalReaction(ctx context.Context, evt *event.Event, target id.EventID, key string) bool {
	key = strings.TrimSuffix(key, "\ufe0f")
	var verb signalVerb
	switch key {
	case reactAck:
		verb = verbAck
	case reactMute:
		verb = verbMute
	default:
		return false
	}
	a, err := b.store.SignalByAlert(ctx, evt.RoomID.String(), target.String())
	if err != nil {
		return false
	}
	if !b.claim(ctx, evt) {
		return true
	}
	b.actOnSignal(ctx, evt, a, verb, 0)
	return true
}

// signalReply handles "ack" or "mute 2h" in reply to an alert. It reports
// whether the message was one.
func (b *Bot) signalReply(ctx context.Context, evt *event.Event, target id.EventID, body string) bool {
	verb, d, ok := parseSignalReply(body)
	if !ok {
		return false
	}
	a, err := b.store.SignalByAlert(ctx, evt.RoomID.String(), target.String())
	if err != nil {
		return false
	}
	b.actOnSignal(ctx, evt, a, verb, d)
	return true
}

// actOnSignal acknowledges or mutes a signal for an operator and says so
// under its alert. The store audits the change.
func (b *Bot) actOnSignal(ctx context.Context, evt *event.Event, a store.SignalAlert, verb signalVerb, d time.Duration) {
	what := "acknowledge"
	if verb == verbMute {
		what = "mute"
	}
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, what+" signal "+a.Kind+" on "+a.EntitySlug)
		return
	}
	alert := &event.Event{ID: id.EventID(a.EventID)}
	who := evt.Sender.String()
	switch verb {
	case verbAck:
		changed, err := b.store.AcknowledgeSignal(ctx, a.ID, who)
		if err != nil {
			b.logger.Error("acknowledge signal", "signal_id", a.ID, "err", err)
			b.sendNotice(ctx, evt.RoomID, "I could not record that acknowledgement; nothing was changed. The log has the details.", "", alert)
			return
		}
		if !changed {
			plain := fmt.Sprintf("%s on %s is %s; nothing to acknowledge.", a.Kind, a.EntitySlug, a.State)
			if a.State == "acknowledged" {
				plain = fmt.Sprintf("%s on %s was already acknowledged by %s.", a.Kind, a.EntitySlug, a.AcknowledgedBy)
			}
			b.sendNotice(ctx, evt.RoomID, plain, "", alert)
			return
		}
		plain := fmt.Sprintf("👀 %s acknowledged %s on %s.", who, a.Kind, a.EntitySlug)
		htm := fmt.Sprintf("👀 %s acknowledged <code>%s</code> on <code>%s</code>.", html.EscapeString(who), html.EscapeString(a.Kind), html.EscapeString(a.EntitySlug))
		b.sendNotice(ctx, evt.RoomID, plain, htm, alert)
	case verbMute:
		d = cmp.Or(d, b.cfg.MuteFor)
		until := b.now().Add(d)
		if err := b.store.MuteSignal(ctx, a.ID, who, until); err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				b.logger.Error("mute signal", "signal_id", a.ID, "err", err)
			}
			b.sendNotice(ctx, evt.RoomID, "I could not record that mute; nothing was changed. The log has the details.", "", alert)
			return
		}
		at := until.UTC().Format("Jan 2 15:04 UTC")
		plain := fmt.Sprintf("🔇 %s muted %s on %s for %s: no new alert of it here until %s. Its recovery is still noted.", who, a.Kind, a.EntitySlug, humantime.Duration(d), at)
		htm := fmt.Sprintf("🔇 %s muted <code>%s</code> on <code>%s</code> for %s: no new alert of it here until %s. Its recovery is still noted.",
			html.EscapeString(who), html.EscapeString(a.Kind), html.EscapeString(a.EntitySlug), humantime.Duration(d), at)
		b.sendNotice(ctx, evt.RoomID, plain, htm, alert)
	}
}
