package report

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// Bounds of each list, so a brief stays short enough for a phone.
const (
	maxPlans    = 8
	maxSignals  = 5
	maxProblems = 5
	maxPending  = 5
	maxTrend    = 5
)

// Options say how to write a brief.
type Options struct {
	// Now is when it is written; its window ends here.
	Now time.Time
	// Location is the time zone its times are shown in; nil means UTC.
	Location *time.Location
	// StatusURL is the status page's address (web.public_url); empty
	// leaves the links out.
	StatusURL string
	// BackupMaxAge is how old a guest's newest backup may be before the
	// daily brief names it (report.backup_max_age); zero leaves the
	// backups out.
	BackupMaxAge time.Duration
}

// Report is one written brief.
type Report struct {
	Kind Kind
	// Markdown is the whole text: readable as it is on a terminal or a
	// client that shows no formatting.
	Markdown string
}

// Build gathers kind's brief from the store and writes it: the daily
// brief covers the last 24 hours and the state now, the weekly report
// the last 7 days and their trends.
func Build(ctx context.Context, st *store.Store, kind Kind, o Options) (Report, error) {
	if o.Location == nil {
		o.Location = time.UTC
	}
	w := &writer{o: o}
	var err error
	switch kind {
	case Daily:
		err = w.daily(ctx, st)
	case Weekly:
		err = w.weekly(ctx, st)
	default:
		return Report{}, fmt.Errorf("build report: unknown kind %q", kind)
	}
	if err != nil {
		return Report{}, fmt.Errorf("build %s report: %w", kind, err)
	}
	w.links()
	return Report{Kind: kind, Markdown: strings.TrimSpace(w.b.String())}, nil
}

// writer accumulates a brief's Markdown.
type writer struct {
	o Options
	b strings.Builder
}

func (w *writer) para(format string, args ...any) {
	if w.b.Len() > 0 {
		w.b.WriteString("\n\n")
	}
	fmt.Fprintf(&w.b, format, args...)
}

func (w *writer) item(format string, args ...any) {
	w.b.WriteString("\n- ")
	fmt.Fprintf(&w.b, format, args...)
}

func (w *writer) more(n int, what string) {
	if n > 0 {
		w.item("… and %d more on the status page's %s", n, what)
	}
}

func (w *writer) daily(ctx context.Context, st *store.Store) error {
	now, since := w.o.Now, w.o.Now.Add(-24*time.Hour)
	w.para("**Daily brief** · %s", now.In(w.o.Location).Format("Mon 2 Jan 15:04 MST"))
	if err := w.changes(ctx, st, since, "Last 24 h", true); err != nil {
		return err
	}
	if err := w.signals(ctx, st, since); err != nil {
		return err
	}
	if err := w.health(ctx, st); err != nil {
		return err
	}
	if err := w.backups(ctx, st); err != nil {
		return err
	}
	if err := w.pending(ctx, st); err != nil {
		return err
	}
	return w.agent(ctx, st, since)
}

func (w *writer) weekly(ctx context.Context, st *store.Store) error {
	now, since := w.o.Now, w.o.Now.Add(-7*24*time.Hour)
	w.para("**Weekly report** · %s to %s", since.In(w.o.Location).Format("Mon 2 Jan"), now.In(w.o.Location).Format("Mon 2 Jan 15:04 MST"))
	if err := w.changes(ctx, st, since, "Last 7 days", false); err != nil {
		return err
	}
	restarts, err := st.RestartsSince(ctx, since, maxTrend)
	if err != nil {
		return err
	}
	recoveries, err := st.RecoveriesSince(ctx, since, maxTrend)
	if err != nil {
		return err
	}
	flips, err := st.CheckFlipsSince(ctx, since, maxTrend)
	if err != nil {
		return err
	}
	w.para("**Most restarted**")
	if len(restarts) == 0 {
		w.b.WriteString(": no service was restarted.")
	}
	for _, r := range restarts {
		w.item("`%s`: %s", r.Slug, times(r.Count))
	}
	w.para("**Time to recover** (signal opened → resolved), slowest first")
	if len(recoveries) == 0 {
		w.b.WriteString(": no signal resolved.")
	}
	for _, r := range recoveries {
		w.item("`%s`: %s on average, %s", r.EntitySlug, humantime.Duration(r.Mean), plural(r.Recovered, "recovery", "recoveries"))
	}
	w.para("**Flaky checks** (result flips)")
	if len(flips) == 0 {
		w.b.WriteString(": none flipped more than once.")
	}
	for _, f := range flips {
		w.item("`%s`: %s", f.Slug, plural(f.Count, "flip", "flips"))
	}
	return w.agent(ctx, st, since)
}

var stateIcons = map[store.ExecutionState]string{
	store.StateSucceeded: "✅", store.StateFailed: "❌", store.StateOutcomeUnknown: "❓", store.StateReconciled: "☑️",
	store.StateDenied: "🚫", store.StateExpired: "⌛", store.StateCancelled: "✖️", store.StateSkipped: "⏭️",
}

// changes writes what happened in the window: executions by outcome,
// each plan with who asked and who decided (when list is set), and what
// inventories found.
func (w *writer) changes(ctx context.Context, st *store.Store, since time.Time, title string, list bool) error {
	states, err := st.ExecutionStatesSince(ctx, since)
	if err != nil {
		return err
	}
	total := 0
	var parts []string
	for _, c := range states {
		total += c.Count
		parts = append(parts, fmt.Sprintf("%d %s", c.Count, strings.ReplaceAll(string(c.State), "_", " ")))
	}
	if total == 0 {
		w.para("**%s**: no executions.", title)
	} else {
		w.para("**%s**: %s: %s.", title, plural(total, "execution", "executions"), strings.Join(parts, ", "))
	}
	if list && total > 0 {
		plans, err := st.PlansSince(ctx, since, maxPlans+1)
		if err != nil {
			return err
		}
		for i, x := range plans {
			if i == maxPlans {
				w.more(len(plans)-maxPlans, "executions page")
				break
			}
			w.item("%s `%s` `%s` `%s`: %s; %s", icon(x.State), x.PlanCode, x.Action, x.TargetSlug,
				strings.ReplaceAll(string(x.State), "_", " "), who(x))
		}
	}
	runs, err := st.InventoryChangesSince(ctx, since)
	if err != nil {
		return err
	}
	var found []string
	for _, c := range runs {
		for _, group := range []struct {
			what string
			refs []store.ContainerRef
		}{{"new", c.New}, {"back", c.Back}, {"gone", c.Gone}} {
			for _, r := range group.refs {
				found = append(found, fmt.Sprintf("%s CT %d %s on %s", group.what, r.VMID, md(r.Name), md(c.Host)))
			}
		}
	}
	if len(found) > 0 {
		if len(found) > maxPlans {
			found = append(found[:maxPlans], fmt.Sprintf("%d more", len(found)-maxPlans))
		}
		w.para("**Inventory**: %s.", strings.Join(found, "; "))
	}
	return nil
}

func icon(s store.ExecutionState) string {
	if i, ok := stateIcons[s]; ok {
		return i
	}
	return "⏳"
}

// who says who asked for a plan and who decided it.
func who(x store.Execution) string {
	asker := x.RequestedBy
	if x.OnBehalfOf != "" {
		asker = x.OnBehalfOf + " via the agent"
	} else if x.RequestedVia == "mcp" {
		asker += " via MCP"
	}
	s := "asked by " + md(asker)
	if a := x.Approval; a != nil {
		s += ", " + a.Decision + " by " + md(a.DecidedBy)
		if a.Method == "auto" {
			s += " (automatically)"
		}
	}
	return s
}

func (w *writer) signals(ctx context.Context, st *store.Store, since time.Time) error {
	open, err := st.ListSignals(ctx, store.SignalFilter{Limit: 100})
	if err != nil {
		return err
	}
	flaps, err := st.FlappingSignals(ctx, since, maxSignals)
	if err != nil {
		return err
	}
	if len(open) == 0 {
		w.para("**Signals**: none open.")
	} else {
		w.para("**Signals**: %s open.", plural(len(open), "signal", "signals"))
	}
	for i, g := range open {
		if i == maxSignals {
			w.more(len(open)-maxSignals, "signals page")
			break
		}
		sev := "🟡"
		if g.Severity == "critical" {
			sev = "🔴"
		}
		w.item("%s `%s` `%s`: %s, open %s", sev, g.EntitySlug, tick(g.Kind), md(clip(redact.String(g.Summary), 80)), humantime.Duration(w.o.Now.Sub(g.RaisedAt)))
	}
	for _, f := range flaps {
		w.item("↕️ `%s` `%s` flapped: opened and resolved %s", f.EntitySlug, tick(f.Kind), times(f.Times))
	}
	return nil
}

var healthIcons = map[string]string{"unhealthy": "🔴", "degraded": "🟡", "stale": "⚪", "stopped": "⏹️"}

func (w *writer) health(ctx context.Context, st *store.Store) error {
	problems, err := st.HealthProblems(ctx)
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		w.para("**Now**: nothing unhealthy, degraded, stale or stopped.")
		return nil
	}
	counts := map[string]int{}
	for _, p := range problems {
		counts[p.Health]++
	}
	var parts []string
	for _, h := range []string{"unhealthy", "degraded", "stale", "stopped"} {
		if counts[h] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[h], h))
		}
	}
	w.para("**Now**: %s.", strings.Join(parts, ", "))
	shown := 0
	for _, p := range problems {
		if p.Health == "stopped" { // on purpose: counted, not listed
			continue
		}
		if shown == maxProblems {
			w.more(len(problems)-counts["stopped"]-maxProblems, "overview")
			break
		}
		shown++
		line := fmt.Sprintf("%s `%s` %s", healthIcons[p.Health], p.Slug, p.Health)
		if p.Detail != "" {
			line += ": " + md(clip(redact.String(p.Detail), 80))
		}
		w.item("%s", line)
	}
	return nil
}

// backups names the guests whose backups fall short, in groups, worst
// first: those a job selects that have none, those whose newest is older
// than BackupMaxAge (oldest first, with its age), those no job selects,
// and those whose storages could not be listed. A guest only a pool's job
// may select is not judged: /cluster/backup does not list a pool's
// members. Guests no inventory has judged are not counted.
func (w *writer) backups(ctx context.Context, st *store.Store) error {
	maxAge := w.o.BackupMaxAge
	if maxAge <= 0 {
		return nil
	}
	guests, err := st.GuestBackups(ctx)
	if err != nil {
		return err
	}
	if len(guests) == 0 {
		return nil
	}
	var none, old, unjobbed, unread []store.GuestBackup
	for _, g := range guests {
		b := g.Backup
		stale := b.Last.IsZero() || w.o.Now.Sub(b.Last) > maxAge
		switch {
		case len(b.Jobs) == 0 && len(b.ByPool) == 0:
			unjobbed = append(unjobbed, g)
		case !stale:
			// Backed up recently enough.
		case len(b.Unread) > 0:
			unread = append(unread, g)
		case len(b.Jobs) == 0:
			// Only a pool's job may back it up: not judged.
		case b.Last.IsZero():
			none = append(none, g)
		default:
			old = append(old, g)
		}
	}
	limit := hours(maxAge)
	behind := len(none) + len(old) + len(unjobbed) + len(unread)
	if behind == 0 {
		w.para("**Backups**: every guest has one from the last %s.", limit)
		return nil
	}
	w.para("**Backups**: %d of %s without one from the last %s.", behind, plural(len(guests), "guest", "guests"), limit)
	slices.SortStableFunc(old, func(a, b store.GuestBackup) int { return a.Backup.Last.Compare(b.Backup.Last) })
	w.guests("🔴 no backup, though a job selects it", none, nil)
	w.guests("🟠 newest too old", old, func(g store.GuestBackup) string { return " " + humantime.Duration(w.o.Now.Sub(g.Backup.Last)) })
	w.guests("⚪ in no backup job", unjobbed, nil)
	w.guests("❔ backup storage not read", unread, nil)
	return nil
}

// hours writes a limit as the configuration does: 36h, 1h30m.
func hours(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// guests writes one item naming up to maxProblems guests, each with what
// suffix adds.
func (w *writer) guests(title string, gs []store.GuestBackup, suffix func(store.GuestBackup) string) {
	if len(gs) == 0 {
		return
	}
	var names []string
	for i, g := range gs {
		if i == maxProblems {
			names = append(names, fmt.Sprintf("%d more", len(gs)-maxProblems))
			break
		}
		n := fmt.Sprintf("`%s` %s", tick(g.Slug), md(g.Name))
		if suffix != nil {
			n += suffix(g)
		}
		names = append(names, n)
	}
	w.item("%s: %s", title, strings.Join(names, ", "))
}

func (w *writer) pending(ctx context.Context, st *store.Store) error {
	xs, err := st.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, Limit: 100})
	if err != nil {
		return err
	}
	if len(xs) == 0 {
		return nil
	}
	// Soonest to expire first.
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j].ExpiresAt.Before(xs[j-1].ExpiresAt); j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
	w.para("**Waiting for a decision**: %s.", plural(len(xs), "plan", "plans"))
	for i, x := range xs {
		if i == maxPending {
			w.more(len(xs)-maxPending, "executions page")
			break
		}
		w.item("`%s` `%s` `%s`, expires %s", x.PlanCode, x.Action, x.TargetSlug, humantime.Ago(w.o.Now, x.ExpiresAt))
	}
	return nil
}

func (w *writer) agent(ctx context.Context, st *store.Store, since time.Time) error {
	a, err := st.AgentActivitySince(ctx, since, 1)
	if err != nil {
		return err
	}
	// No provider's cost is recorded anywhere, so none is invented.
	if a.Active == 0 {
		w.para("**Agent**: no sessions. LLM cost: not reported.")
		return nil
	}
	w.para("**Agent**: %s, %s, %s, %s. LLM cost: not reported.",
		plural(a.Active, "session", "sessions"), plural(a.Messages["user"], "request", "requests"),
		plural(a.ToolCalls, "tool call", "tool calls"), plural(a.Continuations, "continuation", "continuations"))
	return nil
}

// links ends the brief with the status page's pages, when there is one.
func (w *writer) links() {
	base := w.o.StatusURL
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	page := func(p string) string {
		u, _ := url.JoinPath(base, p)
		return u
	}
	w.para("[Status page](%s) · [Executions](%s) · [Signals](%s)", page("/"), page("executions"), page("signals"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// md escapes text for Markdown, so a summary or a name cannot format the
// brief or make a link.
func md(s string) string {
	var b strings.Builder
	for _, r := range strings.ReplaceAll(s, "\n", " ") {
		if strings.ContainsRune("\\`*_[]()<>#|~!", r) {
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tick keeps text that is not a validated slug from closing its code span.
func tick(s string) string { return strings.ReplaceAll(s, "`", "'") }
