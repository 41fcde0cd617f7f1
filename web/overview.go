package web

import (
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

// fleetRow is a node of the health grid with the worst health under it.
type fleetRow struct {
	store.FleetNode
	// Worst is the worst health of the node and everything it holds.
	Worst    string
	Label    string
	Children []*fleetRow
	// Attention are the children that are degraded, stale or unhealthy,
	// listed under the tiles with what is wrong.
	Attention []*fleetRow
}

// healthCount is one tile of the counts strip.
type healthCount struct {
	Health string
	Count  int
}

// pendingView is a plan waiting for a person.
type pendingView struct {
	store.Execution
	Approvers []string
	// How is the approval the plan's class needs.
	How string
}

type overviewData struct {
	base
	Counts   []healthCount
	Total    int
	Hosts    []*fleetRow
	Orphans  []*fleetRow
	Signals  []store.Signal
	InFlight []store.Execution
	Pending  []pendingView
	// Windows are the open maintenance windows.
	Windows []store.Window
}

// inFlight are the states the overview follows: waiting for a person, or
// on the way to the actuator and back.
var inFlight = []store.ExecutionState{store.StateAwaitingApproval, store.StateApproved, store.StateDispatched, store.StateRunning}

// overview reads four things, whatever the fleet's size: the fleet with
// its health, the open signals, the open maintenance windows and the
// executions in flight.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	nodes, err := s.store.FleetNodes(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sigs, err := s.store.ListSignals(ctx, store.SignalFilter{Limit: 100})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	xs, err := s.store.ListExecutions(ctx, store.ExecutionFilter{States: inFlight, Limit: 200})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wins, err := s.store.OpenWindows(ctx, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := overviewData{base: s.base("Overview", "overview"), Signals: sigs, Windows: wins}
	d.Hosts, d.Orphans, d.Counts, d.Total = healthGrid(nodes)
	for _, x := range xs {
		if x.State == store.StateAwaitingApproval {
			d.Pending = append(d.Pending, pendingView{Execution: x, Approvers: s.cfg.Operators, How: approvalHow(x.RiskClass)})
			continue
		}
		d.InFlight = append(d.InFlight, x)
	}
	// The soonest to expire first: that is the one to decide.
	slices.SortStableFunc(d.Pending, func(a, b pendingView) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	s.render(w, r, "overview", d)
}

// approvalHow says what a plan of a risk class needs from a person, as
// policy.MethodAllowed decides it.
func approvalHow(risk string) string {
	if risk == "destructive" {
		return "the typed confirmation phrase"
	}
	return "a reaction on the card, a reply such as “go ahead”, or the phrase"
}

// healthGrid folds the nodes into hosts → LXCs → services, each row
// carrying the worst health under it, and counts the nodes by health.
func healthGrid(nodes []store.FleetNode) (hosts, orphans []*fleetRow, counts []healthCount, total int) {
	rows := make(map[uuid.UUID]*fleetRow, len(nodes))
	all := make([]*fleetRow, len(nodes))
	byHealth := map[string]int{}
	for i := range nodes {
		n := nodes[i]
		label := n.Name
		if n.Type == "lxc" || n.Type == "vm" {
			// The vmid: the tile sits in its host's row, which says
			// which cluster's it is.
			name := n.Slug[strings.IndexByte(n.Slug, ':')+1:]
			label = name[strings.IndexByte(name, '/')+1:]
		}
		row := &fleetRow{FleetNode: n, Worst: n.Health, Label: label}
		rows[n.ID] = row
		all[i] = row
		byHealth[n.Health]++
	}
	// Nodes come hosts first, then LXCs, then services, so a parent is
	// always known before its children.
	for _, row := range all {
		parent, ok := rows[row.Parent]
		switch {
		case row.Type == "host":
			hosts = append(hosts, row)
		case ok:
			parent.Children = append(parent.Children, row)
		default:
			orphans = append(orphans, row)
		}
	}
	// Services first, then LXCs, then hosts: worst-of flows upward.
	for i := len(all) - 1; i >= 0; i-- {
		row := all[i]
		// A container stopped on purpose is at rest, whatever its
		// services say: they are down because it is.
		if p, ok := rows[row.Parent]; ok && p.Health != "stopped" {
			p.Worst = worse(p.Worst, row.Worst)
		}
	}
	for _, h := range hosts {
		for _, c := range h.Children {
			if healthRank(c.Worst) >= healthRank("degraded") {
				h.Attention = append(h.Attention, c)
			}
		}
	}
	for _, h := range []string{"unhealthy", "stale", "degraded", "unknown", "stopped", "healthy"} {
		counts = append(counts, healthCount{Health: h, Count: byHealth[h]})
	}
	return hosts, orphans, counts, len(nodes)
}

// expiresIn says how long a plan has left, for the countdown's first
// paint; live.js keeps it ticking.
func expiresIn(now, at time.Time) string {
	if !at.After(now) {
		return "expired"
	}
	d := at.Sub(now).Round(time.Second)
	if d >= time.Hour {
		return d.Truncate(time.Minute).String()
	}
	return d.String()
}

// Tiles renders the row's children as grid tiles. A fleet of a thousand
// containers would spend most of the overview's time in the template
// engine's reflection here, so this one fragment is written directly,
// every value through template.HTMLEscapeString (TestTilesEscape).
func (r *fleetRow) Tiles() template.HTML {
	var b strings.Builder
	b.Grow(len(r.Children) * 96)
	for _, c := range r.Children {
		worst := c.Worst
		if _, ok := healthOrder[worst]; !ok {
			worst = "unknown"
		}
		b.WriteString(`<a class="tile b-`)
		b.WriteString(worst)
		b.WriteString(`" href="/e/`)
		b.WriteString(template.HTMLEscapeString(c.Slug))
		b.WriteString(`" title="`)
		b.WriteString(template.HTMLEscapeString(c.Name))
		b.WriteString(": ")
		b.WriteString(worst)
		b.WriteString(`">`)
		b.WriteString(template.HTMLEscapeString(c.Label))
		b.WriteString("</a>")
	}
	return template.HTML(b.String()) //nolint:gosec // G203: every value above is escaped or from a fixed set (TestTilesEscape)
}
