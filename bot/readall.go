package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// readAllSummaries sum up, per catalogue read, its outcome on every
// container into one reply. A read across the fleet is offered only for
// the actions here.
var readAllSummaries = map[policy.Action]func(run readAllRun) (plain, html string){
	policy.ActionAptUpgrade: updatesSummary,
}

// readAllRun is what a read across the fleet gathered.
type readAllRun struct {
	outcomes []executions.ReadOutcome
	// names are the containers' names by slug.
	names map[string]string
	// skipped are the containers known to be stopped, not read.
	skipped []string
	wait    string
}

// readAll runs cmd's read on every container not known to be stopped,
// each as its own audited execution that approves itself and has no
// card, a few at a time (executions.ReadEach), and answers with one
// reply: first that it has begun, then edited into the summary. Only an
// operator may ask, as for the read on one container.
func (b *Bot) readAll(ctx context.Context, evt *event.Event, cmd Command) {
	summarise, ok := readAllSummaries[cmd.Action]
	if !ok {
		b.sendNotice(ctx, evt.RoomID, "I cannot run "+string(cmd.Action)+" on every container at once; name one.", "", evt)
		return
	}
	if !b.isOperator(evt.Sender) {
		b.refuseNonOperator(ctx, evt, "request "+string(cmd.Action)+" on every container")
		return
	}
	cts, err := b.store.ListContainers(ctx)
	if err != nil {
		b.logger.Warn("list containers for a read across the fleet", "err", err)
		b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
		return
	}
	run := readAllRun{names: map[string]string{}, wait: humantime.Duration(b.cfg.ReadAllWait)}
	var targets []string
	for _, c := range cts {
		switch {
		case c.Lifecycle != "active":
		case c.RunState != "" && c.RunState != "running":
			run.skipped = append(run.skipped, c.Slug)
		default:
			targets = append(targets, c.Slug)
			run.names[c.Slug] = c.Name
		}
	}
	if len(targets) == 0 {
		b.sendNotice(ctx, evt.RoomID, "No container is running, as far as I know: there is nothing to check.", "", evt)
		return
	}
	params, _ := json.Marshal(cmd.Params)
	head := fmt.Sprintf("Checking updates on %s, a few at a time; I edit this message with the summary when all have answered (at most %s each).",
		plural(len(targets), "running container", "running containers"), run.wait)
	reply := b.sendNotice(ctx, evt.RoomID, head, "", evt)
	b.agentTurns.Add(1)
	go func() {
		defer b.agentTurns.Done()
		r := executions.Request{Action: string(cmd.Action), Params: params, RequestedBy: evt.Sender.String(), Via: executions.ViaChat}
		run.outcomes = b.exec.ReadEach(ctx, r, targets, b.cfg.ReadAllWait)
		for _, o := range run.outcomes {
			if o.Err != nil {
				b.logger.Warn("a read across the fleet has no outcome", "action", cmd.Action, "target", o.Target, "execution_id", o.Execution.ID, "err", o.Err)
			}
		}
		plain, htm := summarise(run)
		if reply != "" && b.editMessage(ctx, evt.RoomID, reply, event.MsgNotice, plain, htm) == nil {
			return
		}
		b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
	}()
}

// containerUpdates is one container's line of the updates summary.
type containerUpdates struct {
	slug, name string
	// failed says why there is no list; empty when there is one.
	failed string
	// held is the class and reason that make the read one a person
	// must approve on this container, so it was not asked for.
	held     string
	packages int
	security int
	restart  []string
	// partial says the list was cut short: packages is a floor.
	partial bool
}

// updatesSummary sums up `apt list --upgradable` on every container:
// those with upgrades, worst first (most from security, then what needs
// a restart, then most packages), then those that could not be checked
// and why, those where the fleet's policy makes the read one a person
// approves, those up to date, and the totals.
func updatesSummary(run readAllRun) (plain, htm string) {
	var rows []containerUpdates
	for _, o := range run.outcomes {
		rows = append(rows, updatesOf(o, run.names[o.Target], run.wait))
	}
	slices.SortStableFunc(rows, func(a, b containerUpdates) int {
		return cmp.Or(cmp.Compare(b.security, a.security), cmp.Compare(len(b.restart), len(a.restart)), cmp.Compare(b.packages, a.packages))
	})
	var pending, failed, held, current []containerUpdates
	total, sec, restarts := 0, 0, 0
	for _, r := range rows {
		switch {
		case r.held != "":
			held = append(held, r)
		case r.failed != "":
			failed = append(failed, r)
		case r.packages == 0:
			current = append(current, r)
		default:
			pending = append(pending, r)
			total, sec = total+r.packages, sec+r.security
			if len(r.restart) > 0 {
				restarts++
			}
		}
	}
	var m bodies
	m.para(fmt.Sprintf("Updates on %s:", plural(len(rows), "container", "containers")),
		"<strong>"+escape(fmt.Sprintf("Updates on %s:", plural(len(rows), "container", "containers")))+"</strong>")
	if len(pending) > 0 {
		items := make([]string, len(pending))
		for i, r := range pending {
			s := r.label() + ": " + countText(r.packages, r.partial)
			if r.security > 0 {
				s += ", " + strconv.Itoa(r.security) + " from security"
			}
			if len(r.restart) > 0 {
				s += "; ⚠️ " + strings.Join(r.restart, ", ") + " need a restart to take effect"
			}
			items[i] = s
		}
		titledList(&m, "", items)
	}
	if len(failed) > 0 {
		items := make([]string, len(failed))
		for i, r := range failed {
			items[i] = r.label() + ": " + r.failed
		}
		titledList(&m, "Could not check:", items)
	}
	if len(held) > 0 {
		items := make([]string, len(held))
		for i, r := range held {
			items[i] = r.label() + ": " + r.held + "; check updates on " + r.slug + " asks on its own card"
		}
		titledList(&m, "Not checked, a person must approve a read here:", items)
	}
	if len(current) > 0 {
		names := make([]string, len(current))
		for i, r := range current {
			names[i] = r.label()
		}
		line := "Up to date: " + strings.Join(names, ", ") + "."
		m.para(line, escape(line))
	}
	if len(run.skipped) > 0 {
		line := "Not checked, stopped: " + strings.Join(run.skipped, ", ") + "."
		m.para(line, escape(line))
	}
	totals := fmt.Sprintf("Total: %s upgradable on %s, %d from security", plural(total, "package", "packages"),
		plural(len(pending), "container", "containers"), sec)
	if restarts > 0 {
		totals += fmt.Sprintf("; %d need a restart after the upgrade", restarts)
	}
	totals += fmt.Sprintf("; %d up to date; %d could not be checked", len(current), len(failed))
	if len(held) > 0 {
		totals += fmt.Sprintf("; %d need approval to check", len(held))
	}
	totals += ". Nothing was installed; upgrade <lxc> does that."
	m.para(totals, escape(totals))
	return m.done()
}

// titledList writes a titled list; an empty title writes the list alone.
func titledList(m *bodies, title string, items []string) {
	if title != "" {
		m.para(title, "<strong>"+escape(title)+"</strong>")
	}
	htm := make([]string, len(items))
	for i, it := range items {
		htm[i] = escape(it)
	}
	m.list(items, htm)
}

func (r containerUpdates) label() string {
	if r.name == "" {
		return r.slug
	}
	return r.name + " (" + r.slug + ")"
}

func countText(n int, partial bool) string {
	if partial {
		return "at least " + plural(n, "package", "packages")
	}
	return plural(n, "package", "packages")
}

// updatesOf reads one container's outcome: the upgradable packages of a
// read that succeeded, or why there are none to show.
func updatesOf(o executions.ReadOutcome, name, wait string) containerUpdates {
	r := containerUpdates{slug: cmp.Or(o.Execution.TargetSlug, o.Target), name: name}
	var held *executions.NeedsApprovalError
	switch {
	case errors.Is(o.Err, executions.ErrReadTimedOut):
		r.failed = "timed out: no answer within " + wait
		return r
	case errors.As(o.Err, &held):
		// The first reason says why: the policy that raised it.
		r.held = held.Risk.Class.String()
		if len(held.Risk.Reasons) > 0 {
			r.held = clip(redact.String(held.Risk.Reasons[0]), errorBytes)
		}
		return r
	case o.Err != nil:
		r.failed = clip(redact.String(requestErrorText(o.Err)), errorBytes)
		return r
	case o.Execution.State != store.StateSucceeded:
		why := firstLineOf(o.Execution.Error)
		r.failed = string(o.Execution.State)
		if why != "" {
			r.failed += ": " + clip(redact.String(why), errorBytes)
		}
		return r
	}
	var res tasks.Result
	if err := json.Unmarshal(o.Execution.Result, &res); err != nil {
		r.failed = "the result could not be read"
		return r
	}
	list := pveout.ParseAptList(res.Output)
	r.packages, r.partial = len(list.Changes), !list.Complete
	for _, c := range list.Changes {
		if c.Security() {
			r.security++
		}
		if needsRestart(c.Name) {
			r.restart = append(r.restart, c.Name)
		}
	}
	return r
}
