package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/internal/schedule"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// ScheduledRun runs a catalogue action or a runbook at a cron time, as a
// request like any other (executions.ViaSchedule): a read-only catalogue
// action runs unattended, within the unattended limit; anything else is
// carded in the ops room and waits for a person, unless it runs under the
// standing approval of the window it names.
type ScheduledRun struct {
	// Name names the schedule: its requests are "schedule:<name>".
	Name string
	// Spec is its cron spec, read in Location (nil: UTC).
	Spec     string
	Location *time.Location
	// Action and Params, or Runbook (a runbook's slug), say what runs on
	// Target.
	Action  string
	Params  json.RawMessage
	Runbook string
	Target  string
	// Standing names a window (WindowSchedule.Name) whose standing
	// approval it may run under; empty: none.
	Standing string
}

// WindowSchedule opens a maintenance window at a cron time, for Duration.
type WindowSchedule struct {
	Name     string
	Spec     string
	Location *time.Location
	Duration time.Duration
	Targets  []string
	Reason   string
	// Allow, when set, asks at each opening for a standing approval up to
	// this risk class, which an operator grants with its phrase.
	Allow string
}

// Scheduler is the bot's scheduler: the briefs, the schedules and the
// windows from the config run on it, on the leading bot. Other jobs (a
// prune, say) may be added with Add before Run.
func (b *Bot) Scheduler() *schedule.Scheduler { return b.sched }

// addJobs registers the briefs, schedules and windows of the config, and
// the prune of agent sessions past their retention.
func (b *Bot) addJobs() error {
	var jobs []schedule.Job
	if b.cfg.OpsRoom != "" && b.cfg.Briefs != nil {
		jobs = append(jobs, b.briefJobs()...)
	}
	if b.cfg.SessionRetention > 0 {
		jobs = append(jobs, b.sessionRetentionJob())
	}
	for _, s := range b.cfg.Schedules {
		jobs = append(jobs, schedule.Job{Name: "schedule:" + s.Name, Spec: s.Spec, Location: s.Location, LeaderOnly: true,
			Run: func(ctx context.Context, slot time.Time) error { return b.runScheduled(ctx, s, slot) }})
	}
	for _, w := range b.cfg.Windows {
		jobs = append(jobs, schedule.Job{Name: "window:" + w.Name, Spec: w.Spec, Location: w.Location, LeaderOnly: true,
			Run: func(ctx context.Context, slot time.Time) error { return b.openScheduledWindow(ctx, w, slot) }})
	}
	for _, j := range jobs {
		if err := b.sched.Add(j); err != nil {
			return fmt.Errorf("bot: %w", err)
		}
	}
	return nil
}

// runScheduled asks for what s runs. A plan that waits for a person, or
// runs under a standing approval, is carded in the ops room; an
// unattended read is recorded and shown on the status page and in the
// history, not carded.
func (b *Bot) runScheduled(ctx context.Context, s ScheduledRun, slot time.Time) error {
	room := id.RoomID(b.cfg.OpsRoom)
	r := executions.Request{Target: s.Target, RequestedBy: "schedule:" + s.Name, Via: executions.ViaSchedule,
		Schedule: s.Name, Standing: s.Standing, RoomID: room.String(),
		Reason: fmt.Sprintf("schedule %s (%s), due %s", s.Name, s.Spec, slot.Format("2006-01-02 15:04 MST"))}
	if s.Runbook != "" {
		steps, err := b.runbookSteps(s.Runbook, s.Target)
		if err != nil {
			b.sendNotice(ctx, room, fmt.Sprintf("Schedule %s could not run: %v.", s.Name, err), "", nil)
			return err
		}
		r.Steps = steps
	} else {
		r.Action, r.Params = s.Action, s.Params
	}
	p, err := b.exec.Request(ctx, r)
	if err != nil {
		b.sendNotice(ctx, room, fmt.Sprintf("Schedule %s could not plan its run: %s", s.Name, requestErrorText(err)), "", nil)
		return fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	x := p.Execution
	if x.State == store.StateAwaitingApproval || (x.Approval != nil && x.Approval.StandingID != nil) {
		b.postCard(ctx, room, p, nil)
	}
	return nil
}

// runbookSteps are the runbook slug's steps on target.
func (b *Bot) runbookSteps(slug, target string) ([]executions.Step, error) {
	b.mu.Lock()
	rbs := b.runbooks
	b.mu.Unlock()
	for _, rb := range rbs {
		if rb.Slug != slug {
			continue
		}
		var out []executions.Step
		for _, st := range rb.Steps {
			var params json.RawMessage
			if filled := fillTarget(st.Params, target); filled != nil {
				raw, err := json.Marshal(filled)
				if err != nil {
					return nil, err
				}
				params = raw
			}
			out = append(out, executions.Step{Action: st.Action, Params: params})
		}
		return out, nil
	}
	return nil, fmt.Errorf("there is no runbook %s", slug)
}

// openScheduledWindow opens a config window's occurrence that fell due at
// slot, unless it is over already (no bot led all through it).
func (b *Bot) openScheduledWindow(ctx context.Context, ws WindowSchedule, slot time.Time) error {
	if !b.now().Before(slot.Add(ws.Duration)) {
		b.logger.Warn("a maintenance window was missed entirely; not opening it", "window", ws.Name, "slot", slot)
		return nil
	}
	var schedules []string
	for _, s := range b.cfg.Schedules {
		if s.Standing == ws.Name {
			schedules = append(schedules, s.Name)
		}
	}
	w, opened, err := b.exec.OpenWindow(ctx, executions.WindowRequest{Name: ws.Name, Targets: ws.Targets, Reason: ws.Reason,
		By: "schedule:" + ws.Name, RoomID: b.cfg.OpsRoom, StartsAt: slot, Duration: ws.Duration, Allow: ws.Allow, Schedules: schedules})
	if err != nil {
		return fmt.Errorf("open window %s: %w", ws.Name, err)
	}
	if opened {
		plain, htm := windowOpenedText(w, b.now())
		b.sendNotice(ctx, id.RoomID(b.cfg.OpsRoom), plain, htm, nil)
	}
	return nil
}

// windowOpenedText announces a window, and how to grant its standing
// approval.
func windowOpenedText(w store.Window, now time.Time) (plain, htm string) {
	targets := strings.Join(w.TargetSlugs, ", ")
	plain = fmt.Sprintf("🛠️ Maintenance window %s is open until %s on %s: %s. Their alerts are held back and summed up when it ends.",
		w.Name, absTime(w.EndsAt, now), targets, w.Reason)
	htm = fmt.Sprintf("🛠️ Maintenance window %s is open until %s on %s: %s. Their alerts are held back and summed up when it ends.",
		codeSpan(w.Name), escape(absTime(w.EndsAt, now)), codeSpan(targets), escape(w.Reason))
	if w.Standing != nil {
		phrase := executions.StandingPhrase(w)
		quorum := ""
		if w.Standing.Quorum > 1 {
			quorum = fmt.Sprintf(" %d different operators must type it.", w.Standing.Quorum)
		}
		plain += fmt.Sprintf("\nIt asks for a standing approval: plans up to %s on these targets would run without a per-plan ✅ until the window ends. An operator grants it by typing: %s%s",
			w.Standing.MaxClass, phrase, quorum)
		htm += fmt.Sprintf("<br>It asks for a standing approval: plans up to <code>%s</code> on these targets would run without a per-plan ✅ until the window ends. An operator grants it by typing: <code>%s</code>%s",
			escape(w.Standing.MaxClass), escape(phrase), escape(quorum))
	}
	return plain, htm
}

// openWindow answers "window <target> <duration> [allow <class>] <reason>"
// from an operator.
func (b *Bot) openWindow(ctx context.Context, evt *event.Event, cmd Command) {
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "open a window on "+cmd.Target)
		return
	}
	d, _ := time.ParseDuration(fmt.Sprint(cmd.Params["duration"]))
	allow, _ := cmd.Params["allow"].(string)
	reason, _ := cmd.Params["reason"].(string)
	w, _, err := b.exec.OpenWindow(ctx, executions.WindowRequest{Targets: []string{cmd.Target}, Reason: reason, By: evt.Sender.String(),
		RoomID: evt.RoomID.String(), StartsAt: b.now(), Duration: d, Allow: allow})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, windowErrorText(err), "", evt)
		return
	}
	plain, htm := windowOpenedText(w, b.now())
	b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
}

// windowErrorText is what an operator reads when a window is refused.
func windowErrorText(err error) string {
	switch {
	case errors.Is(err, executions.ErrStandingRefused):
		return "I opened no window: " + err.Error() + ". Destructive plans always need their own typed phrase."
	case errors.Is(err, policy.ErrInvalidParams):
		return "I opened no window: " + strings.TrimPrefix(err.Error(), policy.ErrInvalidParams.Error()+": ") + "."
	}
	return strings.Replace(requestErrorText(err), "planned nothing", "opened no window", 1)
}

// endWindow answers "end window [name or target]".
func (b *Bot) endWindow(ctx context.Context, evt *event.Event, cmd Command) {
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "end window "+cmd.Target)
		return
	}
	open, err := b.store.OpenWindows(ctx, b.now())
	if err != nil {
		b.logger.Error("list open windows", "err", err)
		b.sendNotice(ctx, evt.RoomID, "I could not read the windows just now; nothing was ended.", "", evt)
		return
	}
	var match []store.Window
	for _, w := range open {
		if cmd.Target == "" || w.Name == cmd.Target || containsFold(w.TargetSlugs, cmd.Target) {
			match = append(match, w)
		}
	}
	switch len(match) {
	case 0:
		b.sendNotice(ctx, evt.RoomID, "No open window matches that. Say `windows` to list them.", "", evt)
		return
	case 1:
	default:
		names := make([]string, len(match))
		for i, w := range match {
			names[i] = w.Name
		}
		b.sendNotice(ctx, evt.RoomID, "Which one? Say `end window <name>` with one of: "+strings.Join(names, ", ")+".", "", evt)
		return
	}
	if _, err := b.store.CloseWindow(ctx, match[0].ID, evt.Sender.String(), b.now()); err != nil {
		b.logger.Error("close a window", "window", match[0].Name, "err", err)
		b.sendNotice(ctx, evt.RoomID, "I could not end the window just now; try again.", "", evt)
		return
	}
	b.sumWindows(ctx)
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) || strings.EqualFold(strings.SplitN(v, ":", 2)[len(strings.SplitN(v, ":", 2))-1], s) {
			return true
		}
	}
	return false
}

// grantStanding answers a standing approval's typed phrase. It counts
// only from an operator, and in a room where approvals count only from
// verified devices, only from one.
func (b *Bot) grantStanding(ctx context.Context, evt *event.Event, cmd Command) {
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "grant a standing approval")
		return
	}
	if b.verifiedOnly(ctx, evt.RoomID) {
		if reason, device := b.deviceCheck(ctx, evt); reason != verifiedDevice {
			plain, htm := NoticeUnverifiedDevice(evt.Sender.String(), device.String())
			if reason == notEncrypted {
				plain, htm = NoticeApprovalNotEncrypted(evt.Sender.String(), "")
			}
			if err := b.store.AppendAudit(ctx, store.AuditEntry{Actor: evt.Sender.String(), Action: "standing.refused",
				Detail: map[string]any{"reason": "unverified device", "event_id": evt.ID.String()}}); err != nil {
				b.logger.Error("audit a refused standing approval", "err", err)
			}
			b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
			return
		}
	}
	w, vote, err := b.exec.GrantStanding(ctx, cmd.Phrase, evt.Sender.String(), evt.ID.String())
	var text string
	switch {
	case errors.Is(err, executions.ErrNoStanding):
		text = "That phrase grants no standing approval waiting in an open window; nothing changed. Say `windows` to see them."
	case errors.Is(err, executions.ErrSelfApproval), errors.Is(err, store.ErrAlreadyApprovedStanding):
		text = "That does not count: another operator must type the phrase."
	case errors.Is(err, store.ErrStandingClosed):
		text = "That standing approval is no longer waiting; nothing changed."
	case err != nil:
		b.logger.Error("grant a standing approval", "err", err)
		text = "I could not record that just now; nothing changed. Try again."
	case !vote.Approved:
		text = fmt.Sprintf("Recorded (%d of %d); another operator must type the phrase too.", len(vote.Approval.ApprovedBy), vote.Approval.Quorum)
	default:
		text = fmt.Sprintf("✅ Standing approval %s granted: plans up to %s on %s run without a per-plan ✅ until %s, from operators here and from the schedules %s. `end window %s` revokes it.",
			vote.Approval.Code, vote.Approval.MaxClass, strings.Join(w.TargetSlugs, ", "), absTime(vote.Approval.ExpiresAt, b.now()),
			orNone(vote.Approval.Schedules), w.Name)
	}
	b.sendNotice(ctx, evt.RoomID, text, "", evt)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	return strings.Join(list, ", ")
}

// replyWindows answers "windows".
func (b *Bot) replyWindows(ctx context.Context, evt *event.Event) {
	now := b.now()
	ws, err := b.store.RecentWindows(ctx, now.Add(-24*time.Hour))
	if err != nil {
		b.logger.Error("list windows", "err", err)
		b.sendNotice(ctx, evt.RoomID, "I could not read the windows just now.", "", evt)
		return
	}
	if len(ws) == 0 {
		b.sendNotice(ctx, evt.RoomID, "No maintenance window is open, and none ended in the last 24 h.", "", evt)
		return
	}
	var lines []string
	for _, w := range ws {
		state := "open until " + absTime(w.EndsAt, now)
		switch {
		case w.EndedAt != nil:
			state = "ended " + humantime.Ago(now, *w.EndedAt)
		case now.Before(w.StartsAt):
			state = "opens " + absTime(w.StartsAt, now)
		}
		line := fmt.Sprintf("• %s on %s, %s: %s", w.Name, strings.Join(w.TargetSlugs, ", "), state, w.Reason)
		if sa := w.Standing; sa != nil {
			switch {
			case sa.Holds(now) && w.Open(now):
				line += fmt.Sprintf(" — standing approval %s for %s, granted by %s", sa.Code, sa.MaxClass, strings.Join(sa.ApprovedBy, " and "))
			case sa.ApprovedAt == nil && w.Open(now):
				line += fmt.Sprintf(" — standing approval for %s waits for: %s", sa.MaxClass, executions.StandingPhrase(w))
			}
		}
		lines = append(lines, line)
	}
	b.sendNotice(ctx, evt.RoomID, "Maintenance windows:\n"+strings.Join(lines, "\n"), "", evt)
}

// holdingWindow is the open window that covers entity, if any.
func holdingWindow(open []store.Window, entity uuid.UUID, now time.Time) (store.Window, bool) {
	for _, w := range open {
		if w.Open(now) && w.Covers(entity) {
			return w, true
		}
	}
	return store.Window{}, false
}

// closeWindows closes the windows whose time is up and sums up each
// closed window in the ops room.
func (b *Bot) closeWindows(ctx context.Context) {
	now := b.now()
	due, err := b.store.WindowsToClose(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("list windows to close", "err", err)
		}
		return
	}
	for _, w := range due {
		if _, err := b.store.CloseWindow(ctx, w.ID, "nomos", now); err != nil {
			b.logger.Warn("close a window", "window", w.Name, "err", err)
		}
	}
	b.sumWindows(ctx)
}

// sumWindows posts, once, the summary of each closed window: the alerts
// it held back, and which of them still fail.
func (b *Bot) sumWindows(ctx context.Context) {
	ws, err := b.store.WindowsToSum(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("list windows to sum up", "err", err)
		}
		return
	}
	for _, w := range ws {
		// Summed up where it was opened: the ops room for a config window.
		room := id.RoomID(cmp.Or(w.RoomID, b.cfg.OpsRoom))
		if room == "" {
			continue
		}
		if ok, err := b.store.ClaimWindowSummary(ctx, w.ID); err != nil || !ok {
			continue
		}
		held, err := b.store.HeldSignals(ctx, w.ID)
		if err != nil {
			b.logger.Warn("list a window's held signals", "window", w.Name, "err", err)
			_ = b.store.UnclaimWindowSummary(ctx, w.ID)
			continue
		}
		plain, htm, failing := windowSummaryText(w, held, b.now())
		content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: plain, Mentions: &event.Mentions{}}
		if failing && b.operatorsAway(room) {
			// Something it held back still fails: now it is a page.
			content.MsgType, content.Mentions.UserIDs = event.MsgText, b.operatorMentions()
		}
		ev, err := b.trySend(ctx, room, content, htm, nil, nil)
		if err != nil {
			b.logger.Warn("post a window's summary; retrying", "window", w.Name, "err", err)
			_ = b.store.UnclaimWindowSummary(ctx, w.ID)
			continue
		}
		if err := b.store.SetWindowSummaryEvent(ctx, w.ID, ev.String()); err != nil {
			b.logger.Warn("record a window's summary", "window", w.Name, "err", err)
		}
	}
}

// windowSummaryText sums up a closed window; failing reports whether an
// alert it held back is still open.
func windowSummaryText(w store.Window, held []store.Signal, now time.Time) (plain, htm string, failing bool) {
	head := fmt.Sprintf("🛠️ Maintenance window %s on %s has ended (%s).", w.Name, strings.Join(w.TargetSlugs, ", "), w.Reason)
	if len(held) == 0 {
		head += " It held back no alerts."
		return head, escape(head), false
	}
	head += fmt.Sprintf(" It held back %d alert(s):", len(held))
	var lines, htmLines []string
	for _, g := range held {
		state := "recovered"
		if g.Open() {
			state, failing = "still failing", true
		} else if g.ResolvedAt != nil {
			state = "recovered after " + humantime.Duration(g.ResolvedAt.Sub(g.RaisedAt))
		}
		summary := redact.String(g.Summary)
		lines = append(lines, fmt.Sprintf("• %s %s since %s: %s — %s", g.EntitySlug, g.Kind, absTime(g.RaisedAt, now), summary, state))
		htmLines = append(htmLines, fmt.Sprintf("<li><code>%s</code> <code>%s</code> since %s: %s — <b>%s</b></li>",
			escape(g.EntitySlug), escape(g.Kind), escape(absTime(g.RaisedAt, now)), escape(summary), escape(state)))
	}
	return head + "\n" + strings.Join(lines, "\n"), "<p>" + escape(head) + "</p><ul>" + strings.Join(htmLines, "") + "</ul>", failing
}
