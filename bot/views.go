package bot

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"maps"
	"slices"
	"sort"
	"strings"

	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
)

// stopped is a container stopped on purpose (onboot off, or a template):
// at rest, not failing.
var healthIcon = map[string]string{"healthy": "🟢", "degraded": "🟡", "unhealthy": "🔴", "stale": "⚪", "unknown": "⚫", "stopped": "⏹️"}

// healthText is an entity's health as the room reads it: a container
// stopped on purpose says why it is not failing.
func healthText(e store.Entity) string {
	if e.Health != "stopped" {
		return e.Health
	}
	if t, _ := e.Attrs["template"].(bool); t {
		return "stopped: a template"
	}
	return "stopped on purpose: onboot is off"
}

func icon(health string) string {
	if i, ok := healthIcon[health]; ok {
		return i
	}
	return "⚫"
}

// replyStatus answers "status": the fleet at a glance.
func (b *Bot) replyStatus(ctx context.Context, evt *event.Event) {
	var plain, htm strings.Builder
	plain.WriteString("Fleet status\n")
	htm.WriteString("<p><b>Fleet status</b></p><ul>")
	for _, typ := range []string{"host", "lxc", "service"} {
		es, err := b.store.ListEntities(ctx, typ)
		if err != nil {
			b.sendNotice(ctx, evt.RoomID, "I could not read the fleet state just now.", "", evt)
			return
		}
		es = slices.DeleteFunc(es, func(e store.Entity) bool { return e.Lifecycle == "destroyed" })
		counts, states := map[string]int{}, map[string]int{}
		var bad []string
		for _, e := range es {
			counts[e.Health]++
			if e.RunState != "" {
				states[e.RunState]++
			}
			if e.Health == "unhealthy" || e.Health == "degraded" {
				bad = append(bad, e.Name)
			}
		}
		line := fmt.Sprintf("%ss: %d (%s)", typ, len(es), healthSummary(counts))
		if len(states) > 0 {
			line += "; " + stateSummary(states)
		}
		if len(bad) > maxNoticeNames {
			bad = append(bad[:maxNoticeNames], fmt.Sprintf("and %d more", len(bad)-maxNoticeNames))
		}
		if len(bad) > 0 {
			line += "; attention: " + strings.Join(bad, ", ")
		}
		plain.WriteString("• " + line + "\n")
		htm.WriteString("<li>" + html.EscapeString(line) + "</li>")
	}
	htm.WriteString("</ul>")
	if sigs, err := b.store.ListSignals(ctx, store.SignalFilter{Limit: maxStatusSignals + 1}); err == nil && len(sigs) > 0 {
		plain.WriteString("Open signals:\n")
		htm.WriteString("<p>Open signals:</p><ul>")
		for i, g := range sigs {
			line := fmt.Sprintf("%s %s %s: %s", signalIcon(g.Severity), g.EntitySlug, g.Kind, clip(redact.String(g.Summary), 200))
			if i == maxStatusSignals {
				line = "… and more: get_state_snapshot or the status page lists them all"
			}
			plain.WriteString("• " + line + "\n")
			htm.WriteString("<li>" + html.EscapeString(line) + "</li>")
		}
		htm.WriteString("</ul>")
	}
	active, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{
		store.StateAwaitingApproval, store.StateApproved, store.StateDispatched, store.StateRunning}, Limit: 50})
	if err == nil {
		line := fmt.Sprintf("Plans in flight: %d", len(active))
		plain.WriteString(line + "\n")
		htm.WriteString("<p>" + line + "</p>")
	}
	b.sendNotice(ctx, evt.RoomID, plain.String(), htm.String(), evt)
}

// maxStatusSignals bounds the open signals "status" lists.
const maxStatusSignals = 8

func signalIcon(severity string) string {
	switch severity {
	case "critical":
		return "🔴"
	case "warning":
		return "🟡"
	}
	return "ℹ️"
}

// stateSummary says how many containers are in each run state: "12
// running, 1 stopped".
func stateSummary(states map[string]int) string {
	keys := slices.Sorted(maps.Keys(states))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", states[k], k)
	}
	return strings.Join(parts, ", ")
}

func healthSummary(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d %s", icon(k), counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// replyContainers answers "list containers" in one message: the live
// containers with their run state and health, then the ones that are gone.
//
// kind is "" for the containers, "vm" for the VMs and "guests" for both.
func (b *Bot) replyContainers(ctx context.Context, evt *event.Event, kind string) {
	types := map[string][]string{"": {"lxc"}, "vm": {"vm"}, "guests": {"lxc", "vm"}}[kind]
	var es []store.Entity
	for _, typ := range types {
		more, err := b.store.ListEntities(ctx, typ)
		if err != nil {
			b.sendNotice(ctx, evt.RoomID, "I could not read the guests just now.", "", evt)
			return
		}
		es = append(es, more...)
	}
	if len(types) > 1 {
		slices.SortStableFunc(es, func(a, b store.Entity) int { return cmp.Compare(a.AttrInt("vmid"), b.AttrInt("vmid")) })
	}
	plain, htm := containersCard(es)
	b.sendNotice(ctx, evt.RoomID, plain, htm, evt)
}

// cardRows is how many containers "list containers" shows one per row.
// Past it, the running containers with nothing to report (healthy, or
// never checked) are folded into vmid ranges per host: a Matrix event
// holds 64 KiB, and a row each for a thousand containers is three times
// that, so the card would not be sent at all.
const cardRows = 150

// guestCount says how many containers and VMs es holds: "15 containers",
// "2 VMs", "15 containers and 2 VMs".
func guestCount(es []store.Entity) string {
	vms := 0
	for _, e := range es {
		if e.Type == "vm" {
			vms++
		}
	}
	cts := len(es) - vms
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	switch {
	case vms == 0:
		return plural(cts, "container", "containers")
	case cts == 0:
		return plural(vms, "VM", "VMs")
	}
	return plural(cts, "container", "containers") + " and " + plural(vms, "VM", "VMs")
}

// attrIsTrue reads a flag attribute as JSON gives it: true, or 1.
func attrIsTrue(e store.Entity, key string) bool {
	switch v := e.Attrs[key].(type) {
	case bool:
		return v
	case float64:
		return v != 0
	}
	return false
}

// containersCard renders "list containers": the live containers with
// their run state and health, then the ones that are gone.
func containersCard(es []store.Entity) (plain, htm string) {
	live := slices.DeleteFunc(slices.Clone(es), func(e store.Entity) bool { return e.Lifecycle == "destroyed" })
	var pb, hb strings.Builder
	fmt.Fprintf(&pb, "%s\n", guestCount(live))
	hb.WriteString("<table><tr><th>vmid</th><th>name</th><th>host</th><th>ip</th><th>state</th><th>health</th></tr>")
	// folded[health][host] holds the vmids shown only as ranges.
	folded := map[string]map[string][]int{}
	for _, e := range live {
		host := e.AttrString("host")
		quiet := e.Lifecycle == "active" && e.RunState == "running" && (e.Health == "healthy" || e.Health == "unknown")
		if len(live) > cardRows && quiet {
			if folded[e.Health] == nil {
				folded[e.Health] = map[string][]int{}
			}
			folded[e.Health][host] = append(folded[e.Health][host], e.AttrInt("vmid"))
			continue
		}
		ip := e.AttrString("ip")
		state := cmp.Or(e.RunState, "state unknown")
		if d, _ := e.Attrs["discovered"].(bool); d {
			state += ", discovered"
		}
		if e.Lifecycle != "active" {
			state += ", " + e.Lifecycle
		}
		vmid := e.AttrInt("vmid")
		if e.Type == "vm" {
			// What sets a VM apart in a list: it is one, and whether
			// Nomos can reach inside it through a guest agent.
			state += ", VM"
			if attrIsTrue(e, "agent") {
				state += " with guest agent"
			}
		}
		fmt.Fprintf(&pb, "%s %d %s on %s, %s, %s, %s\n", icon(e.Health), vmid, e.Name, host, ip, state, healthText(e))
		fmt.Fprintf(&hb, "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s %s</td></tr>", vmid,
			html.EscapeString(e.Name), html.EscapeString(host), html.EscapeString(ip), html.EscapeString(state), icon(e.Health), html.EscapeString(healthText(e)))
	}
	hb.WriteString("</table>")
	for _, health := range []string{"healthy", "unknown"} {
		hosts := slices.Sorted(maps.Keys(folded[health]))
		if len(hosts) == 0 {
			continue
		}
		what := "running and healthy"
		if health == "unknown" {
			what = "running, not checked yet"
		}
		fmt.Fprintf(&pb, "%s %s, by host (show <vmid> for one):\n", icon(health), what)
		fmt.Fprintf(&hb, "<p>%s %s, by host (show &lt;vmid&gt; for one):</p><ul>", icon(health), what)
		for _, h := range hosts {
			line := h + ": " + mcpserver.VMIDRanges(folded[health][h])
			pb.WriteString("• " + line + "\n")
			hb.WriteString("<li>" + html.EscapeString(line) + "</li>")
		}
		hb.WriteString("</ul>")
	}
	var gone []string
	for _, e := range es {
		if e.Lifecycle == "destroyed" {
			gone = append(gone, e.Slug+" "+e.Name)
		}
	}
	if len(gone) > 0 {
		if len(gone) > maxNoticeNames {
			gone = append(gone[:maxNoticeNames], fmt.Sprintf("and %d more", len(gone)-maxNoticeNames))
		}
		line := "Gone: " + strings.Join(gone, ", ")
		pb.WriteString(line + "\n")
		hb.WriteString("<p>" + html.EscapeString(line) + "</p>")
	}
	return pb.String(), hb.String()
}

// replyShow answers "show <entity>". Matches that are one thing to a
// person are shown together: a service and the container it runs in (and
// its host), which often share a name, or one vmid that several
// standalone nodes use. Matches that are unrelated are asked about.
func (b *Bot) replyShow(ctx context.Context, evt *event.Event, ref string) {
	matches, err := b.store.ResolveTargets(ctx, ref)
	if err != nil || len(matches) == 0 {
		text := fmt.Sprintf("I don't know %q. Try `list containers` or `status`.", ref)
		if name := b.nearTarget(ctx, ref); name != "" {
			text += didYouMean(evt.Content.AsMessage().Body, ref, name)
		}
		b.sendNotice(ctx, evt.RoomID, text, "", evt)
		return
	}
	rels, _ := b.store.Relationships(ctx)
	if len(matches) > 1 && !sameVMID(matches) && !related(matches, rels) {
		b.askWhich(ctx, evt, ref, matches)
		return
	}
	var plain, htm strings.Builder
	if len(matches) > 1 && sameVMID(matches) {
		line := fmt.Sprintf("%d containers have vmid %d, one in each cluster; to act on one, name it as %s does.",
			len(matches), matches[0].AttrInt("vmid"), matches[0].Slug)
		plain.WriteString(line + "\n")
		htm.WriteString("<p>" + html.EscapeString(line) + "</p>")
	}
	for _, e := range matches {
		showEntity(&plain, &htm, e, rels)
		if e.Type == "vm" {
			checks, err := b.store.ChecksOf(ctx, e.ID)
			if err != nil {
				b.logger.Warn("read a VM's checks for show", "slug", e.Slug, "err", err)
			}
			line := agentLine(e, checks)
			plain.WriteString(line + "\n")
			htm.WriteString("<p>" + html.EscapeString(line) + "</p>")
		}
	}
	b.sendNotice(ctx, evt.RoomID, plain.String(), htm.String(), evt)
}

// agentLine says whether a VM's QEMU guest agent answers, from its
// run-state check (pct_status, which pings an enabled agent).
func agentLine(e store.Entity, checks []store.CheckView) string {
	if !attrIsTrue(e, "agent") {
		return "Guest agent: not enabled (agent: 0), so Nomos sees only the VM's run state and its services over the network."
	}
	for _, c := range checks {
		if c.Kind != "pct_status" || c.LastResultAt == nil {
			continue
		}
		switch {
		case strings.Contains(c.LastDetail, "guest agent answers"):
			return "Guest agent: answers (" + c.LastDetail + ")."
		case strings.Contains(c.LastDetail, "guest agent does not answer"):
			return "Guest agent: does not answer: " + c.LastDetail + "."
		}
		return "Guest agent: enabled; not asked, since " + c.LastDetail + "."
	}
	return "Guest agent: enabled; not checked yet (a pct_status check on the VM pings it)."
}

// askWhich asks which of matches ref means: Nomos never guesses.
func (b *Bot) askWhich(ctx context.Context, evt *event.Event, ref string, matches []store.Entity) {
	slugs := make([]string, len(matches))
	for i, m := range matches {
		slugs[i] = m.Slug
	}
	b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("%q could mean %s. Which one?", ref, strings.Join(slugs, " or ")), "", evt)
}

// sameVMID reports whether every entity is a container of one vmid.
func sameVMID(es []store.Entity) bool {
	for _, e := range es {
		if e.Type != "lxc" || e.AttrInt("vmid") != es[0].AttrInt("vmid") {
			return false
		}
	}
	return true
}

// related reports whether the entities are one stack: a service, the
// container it runs in and that container's host, each up the runs and
// hosts edges from the one below. Two containers on one host are not.
func related(es []store.Entity, rels []store.Relationship) bool {
	up := map[string]string{}
	for _, r := range rels {
		if r.Type == "runs" || r.Type == "hosts" {
			up[r.To] = r.From
		}
	}
	for _, bottom := range es {
		chain := map[string]bool{}
		for s := bottom.Slug; s != "" && !chain[s]; s = up[s] {
			chain[s] = true
		}
		if !slices.ContainsFunc(es, func(e store.Entity) bool { return !chain[e.Slug] }) {
			return true
		}
	}
	return false
}

// showEntity writes one entity, its attributes and its relations.
func showEntity(plain, htm *strings.Builder, e store.Entity, rels []store.Relationship) {
	fmt.Fprintf(plain, "%s %s (%s), %s\n", icon(e.Health), e.Name, e.Slug, healthText(e))
	fmt.Fprintf(htm, "<p>%s <b>%s</b> <code>%s</code>, %s</p><ul>", icon(e.Health), html.EscapeString(e.Name), html.EscapeString(e.Slug), html.EscapeString(healthText(e)))
	keys := make([]string, 0, len(e.Attrs))
	for k := range e.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := redact.String(fmt.Sprint(e.Attrs[k]))
		if v == "" {
			continue
		}
		fmt.Fprintf(plain, "  %s: %s\n", k, v)
		fmt.Fprintf(htm, "<li>%s: %s</li>", html.EscapeString(k), html.EscapeString(v))
	}
	htm.WriteString("</ul>")
	var edges []string
	for _, r := range rels {
		if r.From == e.Slug {
			edges = append(edges, fmt.Sprintf("%s %s", r.Type, r.To))
		} else if r.To == e.Slug {
			edges = append(edges, fmt.Sprintf("%s %s this", r.From, r.Type))
		}
	}
	if len(edges) > 0 {
		plain.WriteString("Relations: " + strings.Join(edges, "; ") + "\n")
		htm.WriteString("<p>Relations: " + html.EscapeString(strings.Join(edges, "; ")) + "</p>")
	}
}

// replyPending lists the plans waiting for a decision in this room.
func (b *Bot) replyPending(ctx context.Context, evt *event.Event) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, RoomID: evt.RoomID.String()})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the pending plans just now.", "", evt)
		return
	}
	if len(xs) == 0 {
		b.sendNotice(ctx, evt.RoomID, "No plan is waiting for a decision.", "", evt)
		return
	}
	var lines []string
	for _, x := range xs {
		what := x.Action + " " + x.TargetSlug
		if x.Plan != nil {
			what = fmt.Sprintf("a plan of %d steps, from %s", x.Plan.Steps, what)
		}
		lines = append(lines, fmt.Sprintf("• %s, %s, code %s, expires %s", what, x.GateClass(), x.PlanCode, x.ExpiresAt.UTC().Format("15:04 MST")))
	}
	b.sendNotice(ctx, evt.RoomID, fmt.Sprintf("%d waiting:\n%s", len(xs), strings.Join(lines, "\n")), "", evt)
}

// replyHistory lists the latest executions in this room.
func (b *Bot) replyHistory(ctx context.Context, evt *event.Event) {
	xs, err := b.store.ListExecutions(ctx, store.ExecutionFilter{RoomID: evt.RoomID.String(), Limit: 10})
	if err != nil {
		b.sendNotice(ctx, evt.RoomID, "I could not read the history just now.", "", evt)
		return
	}
	if len(xs) == 0 {
		b.sendNotice(ctx, evt.RoomID, "Nothing has been planned in this room yet.", "", evt)
		return
	}
	var lines []string
	for _, x := range xs {
		who := x.RequestedBy
		if x.Approval != nil {
			who = x.Approval.Decision + " by " + x.Approval.DecidedBy
		}
		what := x.Action + " " + x.TargetSlug
		if x.Plan != nil {
			what = fmt.Sprintf("step %d/%d %s", x.Position, x.Plan.Steps, what)
		}
		lines = append(lines, fmt.Sprintf("• %s %s: %s (%s)", x.CreatedAt.UTC().Format("Jan 02 15:04"), what, strings.ReplaceAll(string(x.State), "_", " "), who))
	}
	b.sendNotice(ctx, evt.RoomID, "Latest plans here:\n"+strings.Join(lines, "\n"), "", evt)
}
