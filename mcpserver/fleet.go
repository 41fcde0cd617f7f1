package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// fullRows is how many containers list_lxcs shows one per line. Past it,
// the containers with nothing to report (healthy, or never checked) are
// folded into vmid ranges per host, so a fleet of a thousand still fits
// one result and every container that needs attention keeps its row.
const fullRows = 150

func (s *Server) listLXCs(ctx context.Context, a guestListArgs) (*mcp.CallToolResult, error) {
	return s.listGuests(ctx, a, "list_lxcs", "lxc")
}

func (s *Server) listVMs(ctx context.Context, a guestListArgs) (*mcp.CallToolResult, error) {
	return s.listGuests(ctx, a, "list_vms", "vm")
}

func (s *Server) listAllGuests(ctx context.Context, a guestListArgs) (*mcp.CallToolResult, error) {
	return s.listGuests(ctx, a, "list_guests", "lxc", "vm")
}

// listGuests answers list_lxcs, list_vms and list_guests: the guests of
// the given kinds. With more than one kind, each row starts with its type.
func (s *Server) listGuests(ctx context.Context, a guestListArgs, tool string, kinds ...string) (*mcp.CallToolResult, error) {
	host := strings.TrimSpace(a.Host)
	health := string(a.Health)
	all, err := s.store.ListGuests(ctx, kinds...)
	if err != nil {
		return s.internal(ctx, tool, err, "could not read the guests just now; try again shortly"), nil
	}
	noun := map[string]string{"list_lxcs": "container", "list_vms": "VM", "list_guests": "guest"}[tool]
	now := s.now()
	var cs []store.Container
	hosts := map[string]int{}
	counts, states := map[string]int{}, map[string]int{}
	for _, c := range all {
		h := attrText(c.Entity, "host")
		if (host != "" && !strings.EqualFold(h, host)) || !healthFilter(health, c.Health) {
			continue
		}
		cs = append(cs, c)
		hosts[h]++
		counts[c.Health]++
		if c.RunState != "" {
			states[c.RunState]++
		}
	}
	var b strings.Builder
	hostNames := make([]string, 0, len(hosts))
	for h := range hosts {
		hostNames = append(hostNames, h)
	}
	sort.Strings(hostNames)
	perHost := make([]string, len(hostNames))
	for i, h := range hostNames {
		perHost[i] = fmt.Sprintf("%s %d", h, hosts[h])
	}
	filter := lxcFilter(host, health)
	if len(cs) == 0 {
		fmt.Fprintf(&b, "no %ss%s (of %d in the fleet)", noun, filter, len(all))
		return mcp.NewToolResultText(b.String()), nil
	}
	running := ""
	if len(states) > 0 {
		running = "; " + countLine(states)
	}
	fmt.Fprintf(&b, "%s%s on %s (%s): %s%s. Health is the worst of each %s's run state, its checks and its services'.\n",
		plural(len(cs), noun), filter, plural(len(hosts), "host"), strings.Join(perHost, ", "), countLine(counts), running, noun)
	if len(kinds) > 1 {
		b.WriteString("Each row: type (lxc or vm), vmid, name, host, ip, health, services.\n")
	}
	writeLXCRows(&b, cs, host == "", hostNames, now, len(kinds) > 1)
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

// lxcFilter says which filters list_lxcs applied: " with host=strong
// health=unhealthy", or "".
func lxcFilter(host, health string) string {
	var conds []string
	if host != "" {
		conds = append(conds, "host="+host)
	}
	if health != "" && health != "all" && health != "any" {
		conds = append(conds, "health="+health)
	}
	if len(conds) == 0 {
		return ""
	}
	return " with " + strings.Join(conds, " ")
}

// writeLXCRows writes a row per container. In a long fleet-wide list,
// quiet containers (healthy, or never checked) are folded into vmid ranges
// per host, so the answer stays small.
func writeLXCRows(b *strings.Builder, cs []store.Container, fleetWide bool, hostNames []string, now time.Time, typed bool) {
	// folded[health][host] lists the vmids shown only as ranges.
	folded := map[string]map[string][]int{}
	for _, c := range cs {
		quiet := c.Lifecycle == "active" && (c.Health == "healthy" || (c.Health == "unknown" && c.LastCheckAt == nil))
		if len(cs) > fullRows && fleetWide && quiet && !slices.ContainsFunc(c.Services, noisy) {
			if folded[c.Health] == nil {
				folded[c.Health] = map[string][]int{}
			}
			h := attrText(c.Entity, "host")
			folded[c.Health][h] = append(folded[c.Health][h], c.Entity.AttrInt("vmid"))
			continue
		}
		if typed {
			b.WriteString(c.Type + " ")
		}
		b.WriteString(containerRow(c, now))
		if c.Type == "vm" && attrText(c.Entity, "agent") == "true" {
			b.WriteString(" (guest agent)")
		}
		b.WriteByte('\n')
	}
	for _, health := range []string{"healthy", "unknown"} {
		if len(folded[health]) == 0 {
			continue
		}
		what := "healthy"
		if health == "unknown" {
			what = "never checked"
		}
		fmt.Fprintf(b, "%s, folded by host (list_lxcs host=<name> shows their rows):\n", what)
		for _, h := range hostNames {
			if ids := folded[health][h]; len(ids) > 0 {
				fmt.Fprintf(b, "%s: %s\n", h, VMIDRanges(ids))
			}
		}
	}
}

// noisy reports whether a service's health is worth a row of its own.
func noisy(sv store.ServiceState) bool {
	return sv.Health == "unhealthy" || sv.Health == "degraded" || sv.Health == "stale"
}

func containerRow(c store.Container, now time.Time) string {
	svcs := make([]string, len(c.Services))
	for i, sv := range c.Services {
		svcs[i] = sv.Name
		if sv.Health != c.Health && sv.Health != "healthy" && sv.Health != "unknown" {
			svcs[i] += "(" + sv.Health + ")"
		}
	}
	services := strings.Join(svcs, ",")
	if services == "" {
		services = "-"
	}
	row := fmt.Sprintf("%s %s %s %s %s %s", cmp.Or(attrText(c.Entity, "vmid"), "?"), c.Name,
		cmp.Or(attrText(c.Entity, "host"), "?"), cmp.Or(attrText(c.Entity, "ip"), "?"), c.Health, services)
	if c.Lifecycle != "active" {
		row += " [" + c.Lifecycle + "]"
	}
	if c.RunState != "" && c.RunState != "running" {
		row += " [" + c.RunState + "]"
	}
	if c.Health != "healthy" && (c.Health != "unknown" || c.LastCheckAt != nil) {
		row += " — " + statusNote(c.Entity, now)
	}
	return row
}

// statusNote says what the last check saw and when.
func statusNote(e store.Entity, now time.Time) string {
	if e.LastCheckAt == nil {
		return "never checked"
	}
	if e.Detail == "" {
		return "checked " + humantime.Ago(now, *e.LastCheckAt)
	}
	return oneLine(e.Detail, 120) + " (" + humantime.Ago(now, *e.LastCheckAt) + ")"
}

// VMIDRanges folds vmids into sorted ranges, "101-107, 110", so a long
// list of containers reads in one line. It sorts ids in place.
func VMIDRanges(ids []int) string {
	slices.Sort(ids)
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// typeOrder lists entity types for rollups, the fleet's own types first.
var typeOrder = []string{"host", "lxc", "service"}

func sortedTypes(m map[string]map[string]int) []string {
	var out []string
	for _, t := range typeOrder {
		if _, ok := m[t]; ok {
			out = append(out, t)
		}
	}
	var rest []string
	for t := range m {
		if !slices.Contains(typeOrder, t) {
			rest = append(rest, t)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func (s *Server) healthCounts(ctx context.Context) (map[string]map[string]int, error) {
	hc, err := s.store.HealthCounts(ctx)
	if err != nil {
		return nil, err
	}
	byType := map[string]map[string]int{}
	for _, c := range hc {
		if byType[c.Type] == nil {
			byType[c.Type] = map[string]int{}
		}
		byType[c.Type][c.Health] += c.Count
	}
	return byType, nil
}

// attentionLimit bounds how many not-healthy entities a rollup names.
const attentionLimit = 25

// attention lists the entities that are unhealthy, degraded or stale,
// worst first, and then, in one line, those whose health is unknown: in a
// fleet with unmonitored parts they are many, and naming each is noise.
func attention(es []store.Entity, now time.Time, limit int) []string {
	var bad []store.Entity
	var unknown []string
	for _, e := range es {
		switch {
		case e.Lifecycle == "destroyed", e.Health == "healthy":
		case e.Health == "unknown":
			unknown = append(unknown, e.Slug)
		default:
			bad = append(bad, e)
		}
	}
	sort.SliceStable(bad, func(i, j int) bool { return healthOrder[bad[i].Health] < healthOrder[bad[j].Health] })
	var lines []string
	for i, e := range bad {
		if i == limit {
			lines = append(lines, fmt.Sprintf("… and %d more (list_entities health=attention)", len(bad)-limit))
			break
		}
		lines = append(lines, fmt.Sprintf("%s %s — %s", e.Slug, e.Health, statusNote(e, now)))
	}
	if len(unknown) > 0 {
		const named = 6
		line := fmt.Sprintf("unknown (no check result yet): %d — %s", len(unknown), strings.Join(unknown[:min(named, len(unknown))], ", "))
		if len(unknown) > named {
			line += ", … (list_entities health=unknown)"
		}
		lines = append(lines, line)
	}
	return lines
}

func (s *Server) healthSummary(ctx context.Context, _ noArgs) (*mcp.CallToolResult, error) {
	byType, err := s.healthCounts(ctx)
	if err != nil {
		return s.internal(ctx, "get_health_summary", err, "could not read fleet health just now; try again shortly"), nil
	}
	es, err := s.store.ListEntities(ctx, "")
	if err != nil {
		return s.internal(ctx, "get_health_summary", err, "could not read fleet health just now; try again shortly"), nil
	}
	var b strings.Builder
	b.WriteString("Health by type (checks excluded):\n")
	total := map[string]int{}
	n := 0
	for _, t := range sortedTypes(byType) {
		sum := 0
		for h, c := range byType[t] {
			sum += c
			total[h] += c
		}
		n += sum
		fmt.Fprintf(&b, "%s: %d — %s\n", t, sum, countLine(byType[t]))
	}
	fmt.Fprintf(&b, "total: %d — %s\n", n, countLine(total))
	lines := attention(es, s.now(), attentionLimit)
	if len(lines) == 0 {
		b.WriteString("Everything is healthy.")
	} else {
		b.WriteString("Not healthy:\n")
		b.WriteString(strings.Join(lines, "\n"))
	}
	return mcp.NewToolResultStructured(healthSummary(byType, es), b.String()), nil
}

// diskMetric is the metric the disk probe writes.
const diskMetric = "disk_used_pct"

func (s *Server) stateSnapshot(ctx context.Context, _ noArgs) (*mcp.CallToolResult, error) {
	text, err := s.snapshotText(ctx)
	if err != nil {
		return s.internal(ctx, "get_state_snapshot", err, "could not read the fleet state just now; try again shortly"), nil
	}
	return mcp.NewToolResultText(text), nil
}

// snapshotText is the fleet at a glance: get_state_snapshot's answer and
// the resource snapshotURI.
func (s *Server) snapshotText(ctx context.Context) (string, error) {
	fail := func(err error) (string, error) { return "", err }
	now := s.now()
	byType, err := s.healthCounts(ctx)
	if err != nil {
		return fail(err)
	}
	es, err := s.store.ListEntities(ctx, "")
	if err != nil {
		return fail(err)
	}
	disks, err := s.store.LatestSamples(ctx, diskMetric)
	if err != nil {
		return fail(err)
	}
	signals, err := s.store.ListSignals(ctx, store.SignalFilter{Limit: 50})
	if err != nil {
		return fail(err)
	}
	inFlight, err := s.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{
		store.StateAwaitingApproval, store.StateApproved, store.StateDispatched, store.StateRunning}, Limit: 50})
	if err != nil {
		return fail(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Fleet at %s\n", stamp(now))
	parts := make([]string, 0, len(byType))
	for _, t := range sortedTypes(byType) {
		sum := 0
		for _, c := range byType[t] {
			sum += c
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s)", t, sum, countLine(byType[t])))
	}
	b.WriteString("health: " + strings.Join(parts, "; ") + "\n")
	if lines := attention(es, now, 12); len(lines) > 0 {
		b.WriteString("attention:\n  " + strings.Join(lines, "\n  ") + "\n")
	}
	writeDisks(&b, disks, now)
	writeOpenSignals(&b, signals, now)
	writeInFlight(&b, inFlight, now)
	return strings.TrimRight(b.String(), "\n"), nil
}

// writeDisks lists the fullest disks, at most eight.
func writeDisks(b *strings.Builder, disks []store.MetricSample, now time.Time) {
	if len(disks) > 0 {
		b.WriteString("disk used (latest, fullest first):")
		for i, d := range disks {
			if i == 8 {
				fmt.Fprintf(b, " … %d more (query_metrics metric=%s)", len(disks)-i, diskMetric)
				break
			}
			fmt.Fprintf(b, " %s %s%% (%s);", d.Slug, num(d.Value), humantime.Ago(now, d.At))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("disk used: no disk samples yet\n")
	}
}

// writeOpenSignals counts the open signals by severity and lists ten.
func writeOpenSignals(b *strings.Builder, signals []store.Signal, now time.Time) {
	open := 0
	bySev := map[string]int{}
	for _, g := range signals {
		if g.Open() {
			open++
			bySev[g.Severity]++
		}
	}
	if open == 0 {
		b.WriteString("open signals: none\n")
	} else {
		fmt.Fprintf(b, "open signals: %d (%s)\n", open, countLine(bySev))
		for i, g := range signals {
			if i == 10 {
				fmt.Fprintf(b, "  … %d more (get_signal_history)\n", open-i)
				break
			}
			fmt.Fprintf(b, "  %s %s %s: %s (%s, %s)\n", g.Severity, g.Kind, g.EntitySlug, oneLine(g.Summary, 120), g.State, humantime.Ago(now, g.RaisedAt))
		}
	}
}

// writeInFlight lists the executions not yet ended, at most ten.
func writeInFlight(b *strings.Builder, inFlight []store.Execution, now time.Time) {
	if len(inFlight) == 0 {
		b.WriteString("executions in flight: none")
	} else {
		fmt.Fprintf(b, "executions in flight: %d\n", len(inFlight))
		for i, x := range inFlight {
			if i == 10 {
				fmt.Fprintf(b, "  … %d more\n", len(inFlight)-i)
				break
			}
			fmt.Fprintf(b, "  %s %s %s: %s (%s), by %s via %s, %s\n", x.ID, x.Action, x.TargetSlug, x.State, x.RiskClass,
				x.RequestedBy, x.RequestedVia, humantime.Ago(now, x.CreatedAt))
		}
	}
}

// listLimit bounds list_entities.
const listLimit = 300

func (s *Server) listEntities(ctx context.Context, a listEntitiesArgs) (*mcp.CallToolResult, error) {
	typ, health := string(a.Type), string(a.Health)
	es, err := s.store.ListEntities(ctx, typ)
	if err != nil {
		return s.internal(ctx, "list_entities", err, "could not read the fleet graph just now; try again shortly"), nil
	}
	now := s.now()
	var rows []string
	counts := map[string]int{}
	for _, e := range es {
		if !healthFilter(health, e.Health) {
			continue
		}
		counts[e.Health]++
		if len(rows) < listLimit {
			rows = append(rows, entityRow(e, now))
		}
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	what := cmp.Or(typ, "entities (every type but check)")
	if n == 0 {
		return mcp.NewToolResultText(fmt.Sprintf("no %s match health=%q", what, health)), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s\n", n, what, countLine(counts))
	b.WriteString(strings.Join(rows, "\n"))
	if n > len(rows) {
		fmt.Fprintf(&b, "\n… %d more; filter by type or health", n-len(rows))
	}
	return mcp.NewToolResultText(b.String()), nil
}

// entityRow is one line per entity with the attributes that place it.
func entityRow(e store.Entity, now time.Time) string {
	row := e.Slug + " " + e.Health
	if e.Name != "" && !strings.HasSuffix(e.Slug, ":"+e.Name) {
		row += " " + e.Name
	}
	switch e.Type {
	case "lxc":
		row += fmt.Sprintf(" on %s ip %s", attrText(e, "host"), attrText(e, "ip"))
	case "service":
		where := "on host " + attrText(e, "host")
		if c := attrText(e, "container"); c != "" {
			where = "in " + c
		} else if v := attrText(e, "vmid"); v != "" && v != "0" {
			where = "in CT " + v + " on " + attrText(e, "host")
		}
		row += fmt.Sprintf(" %s unit %s", where, attrText(e, "unit"))
		if p := attrText(e, "port"); p != "" && p != "0" {
			row += " port " + p
		}
	case "check":
		row += fmt.Sprintf(" %s on %s", attrText(e, "kind"), attrText(e, "target"))
	}
	if e.Lifecycle != "active" {
		row += " [" + e.Lifecycle + "]"
	}
	if e.Health != "healthy" && e.Health != "unknown" {
		row += " — " + statusNote(e, now)
	}
	return row
}

func (s *Server) getEntity(ctx context.Context, a entityArgs) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, "get_entity", a.Entity)
	if bad != nil {
		return bad, nil
	}
	fail := func(err error) (*mcp.CallToolResult, error) {
		return s.internal(ctx, "get_entity", err, "could not read "+e.Slug+" just now; try again shortly"), nil
	}
	rels, err := s.store.Relationships(ctx)
	if err != nil {
		return fail(err)
	}
	ovs, err := s.store.PolicyOverrides(ctx)
	if err != nil {
		return fail(err)
	}
	metrics, err := s.store.EntityLatestMetrics(ctx, e.ID)
	if err != nil {
		return fail(err)
	}
	signals, err := s.store.ListSignals(ctx, store.SignalFilter{EntityID: &e.ID, Limit: 10})
	if err != nil {
		return fail(err)
	}
	now := s.now()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%s, %s): %s — %s\n", e.Slug, e.Name, e.Type, e.Lifecycle, e.Health, statusNote(e, now))
	writeEntityAttrs(&b, e)
	writeEntityRelations(&b, e, rels, ovs)
	if len(metrics) > 0 {
		var ms []string
		for _, m := range metrics {
			ms = append(ms, fmt.Sprintf("%s %s (%s)", m.Metric, num(m.Value), humantime.Ago(now, m.At)))
		}
		b.WriteString("metrics: " + strings.Join(ms, "; ") + "\n")
	}
	var open []string
	for _, g := range signals {
		if g.Open() {
			open = append(open, fmt.Sprintf("%s %s: %s (%s)", g.Severity, g.Kind, oneLine(g.Summary, 120), humantime.Ago(now, g.RaisedAt)))
		}
	}
	if len(open) > 0 {
		b.WriteString("open signals: " + strings.Join(open, "; ") + "\n")
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

// writeEntityAttrs lists an entity's attributes, sorted by key.
func writeEntityAttrs(b *strings.Builder, e store.Entity) {
	keys := make([]string, 0, len(e.Attrs))
	for k := range e.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var attrs []string
	for _, k := range keys {
		if v := attrText(e, k); v != "" {
			attrs = append(attrs, k+"="+oneLine(v, 80))
		}
	}
	if len(attrs) > 0 {
		b.WriteString("attrs: " + strings.Join(attrs, " ") + "\n")
	}
}

// writeEntityRelations lists an entity's relations out and in, and the
// policy overrides on it and on what it runs.
func writeEntityRelations(b *strings.Builder, e store.Entity, rels []store.Relationship, ovs []store.PolicyOverride) {
	var out, in, ran []string
	for _, r := range rels {
		switch {
		case r.From == e.Slug:
			out = append(out, r.Type+" "+r.To)
			if r.Type == "runs" {
				ran = append(ran, r.To)
			}
		case r.To == e.Slug:
			in = append(in, r.From+" "+r.Type+" this")
		}
	}
	if len(out) > 0 {
		b.WriteString("this: " + strings.Join(out, "; ") + "\n")
	}
	if len(in) > 0 {
		b.WriteString("in: " + strings.Join(in, "; ") + "\n")
	}
	var pol []string
	for _, o := range ovs {
		switch {
		case o.Slug == e.Slug:
			pol = append(pol, fmt.Sprintf("%s → %s (%s)", o.Action, o.RiskClass, o.Reason))
		case slices.Contains(ran, o.Slug):
			pol = append(pol, fmt.Sprintf("%s on %s → at least %s (%s)", o.Action, o.Slug, o.RiskClass, o.Reason))
		}
	}
	if len(pol) > 0 {
		b.WriteString("policy: " + strings.Join(pol, "; ") + "\n")
	}
}

func (s *Server) blastRadius(ctx context.Context, a entityArgs) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, "get_blast_radius", a.Entity)
	if bad != nil {
		return bad, nil
	}
	rels, err := s.store.Relationships(ctx)
	if err != nil {
		return s.internal(ctx, "get_blast_radius", err, "could not read the fleet graph just now; try again shortly"), nil
	}
	es, err := s.store.ListEntities(ctx, "")
	if err != nil {
		return s.internal(ctx, "get_blast_radius", err, "could not read the fleet graph just now; try again shortly"), nil
	}
	health := make(map[string]string, len(es))
	for _, x := range es {
		health[x.Slug] = x.Health
	}
	edges := make([]policy.Edge, len(rels))
	for i, r := range rels {
		edges[i] = policy.Edge{From: r.From, To: r.To, Type: policy.EdgeType(r.Type)}
	}
	affected := policy.BlastRadius(edges, e.Slug)
	if len(affected) == 0 {
		return mcp.NewToolResultText(fmt.Sprintf("Acting on %s affects nothing else: it hosts and runs nothing, and nothing depends on it or is routed through it.", e.Slug)), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Acting on %s (%s) reaches %d entities; an upper bound, as if each were fully affected. depth entity health — why:\n", e.Slug, e.Health, len(affected))
	for _, a := range affected {
		fmt.Fprintf(&b, "%d %s %s — %s\n", a.Depth, a.Slug, cmp.Or(health[a.Slug], "unknown"), reach(a))
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

// reach says why an entity is in a blast radius, reading the edge the
// right way round.
func reach(a policy.Affected) string {
	switch a.Via {
	case policy.EdgeHosts:
		return "hosted on " + a.From
	case policy.EdgeRuns:
		return "runs in " + a.From
	case policy.EdgeDependsOn:
		return "depends on " + a.From
	case policy.EdgeRoutesTo:
		return "routed to through " + a.From
	}
	return string(a.Via) + " " + a.From
}
