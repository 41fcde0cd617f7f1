package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/store"
)

func (s *Server) signalHistory(ctx context.Context, a signalArgs) (*mcp.CallToolResult, error) {
	since, err := parseSince(a.Since, 7*24*time.Hour)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	limit := a.Limit
	now := s.now()
	f := store.SignalFilter{Since: now.Add(-since), Limit: limit}
	scope := "the fleet"
	if ref := a.Entity; ref != "" {
		e, bad := s.resolve(ctx, "get_signal_history", ref)
		if bad != nil {
			return bad, nil
		}
		f.EntityID, scope = &e.ID, e.Slug
	}
	signals, err := s.store.ListSignals(ctx, f)
	if err != nil {
		return s.internal(ctx, "get_signal_history", err, "could not read the signals just now; try again shortly"), nil
	}
	if len(signals) == 0 {
		return mcp.NewToolResultText(fmt.Sprintf("No signals for %s: none open, none raised or resolved in the last %s.", scope, humantime.Duration(since))), nil
	}
	var b strings.Builder
	open := 0
	for _, g := range signals {
		if g.Open() {
			open++
		}
	}
	fmt.Fprintf(&b, "Signals for %s: %d open, %d closed in the last %s (open first, worst first):\n", scope, open, len(signals)-open, humantime.Duration(since))
	for _, g := range signals {
		line := fmt.Sprintf("%s %s %s %s: %s — raised %s", g.State, g.Severity, g.Kind, g.EntitySlug, oneLine(g.Summary, 160), humantime.Ago(now, g.RaisedAt))
		if g.ResolvedAt != nil {
			line += ", resolved " + humantime.Ago(now, *g.ResolvedAt)
		}
		b.WriteString(line + "\n")
	}
	if len(signals) == limit {
		fmt.Fprintf(&b, "(limit %d reached; narrow by entity or since)", limit)
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) queryMetrics(ctx context.Context, a metricsArgs) (*mcp.CallToolResult, error) {
	since, err := parseSince(a.Since, time.Hour)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	agg := cmp.Or(string(a.Aggregate), "latest")
	if agg != "latest" && agg != "avg" && agg != "max" && agg != "min" {
		return mcp.NewToolResultError(fmt.Sprintf("aggregate %q: want latest, avg, max or min", agg)), nil
	}
	typ := string(a.Type)
	metric := strings.TrimSpace(a.Metric)
	limit := a.Limit
	now := s.now()
	from := now.Add(-since)
	if metric == "" {
		return s.metricNames(ctx, from, since, "")
	}
	rows, err := s.store.AggregateMetrics(ctx, store.MetricQuery{Metric: metric, Since: from, EntityType: typ})
	if err != nil {
		return s.internal(ctx, "query_metrics", err, "could not read the metrics just now; try again shortly"), nil
	}
	if len(rows) == 0 {
		return s.metricNames(ctx, from, since, fmt.Sprintf("No %s samples in the last %s%s.", metric, humantime.Duration(since), typeNote(typ)))
	}
	value := func(a store.MetricAggregate) float64 {
		switch agg {
		case "avg":
			return a.Avg
		case "max":
			return a.Max
		case "min":
			return a.Min
		}
		return a.Latest
	}
	sort.SliceStable(rows, func(i, j int) bool { return value(rows[i]) > value(rows[j]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%s over the last %s%s, %s per entity, highest first (%d entities):\n", metric, humantime.Duration(since), typeNote(typ), agg, len(rows))
	for i, a := range rows {
		if i == limit {
			fmt.Fprintf(&b, "… %d more (raise limit or filter by type)\n", len(rows)-i)
			break
		}
		fmt.Fprintf(&b, "%s %s — latest %s (%s), avg %s, min %s, max %s, n=%d\n", a.Slug, num(value(a)),
			num(a.Latest), humantime.Ago(now, a.LatestAt), num(a.Avg), num(a.Min), num(a.Max), a.Count)
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

func typeNote(typ string) string {
	if typ == "" {
		return ""
	}
	return " for " + typ + " entities"
}

// metricNames answers with the metrics that do have samples, after an
// optional lead sentence.
func (s *Server) metricNames(ctx context.Context, from time.Time, since time.Duration, lead string) (*mcp.CallToolResult, error) {
	names, err := s.store.MetricNames(ctx, from)
	if err != nil {
		return s.internal(ctx, "query_metrics", err, "could not read the metrics just now; try again shortly"), nil
	}
	var b strings.Builder
	if lead != "" {
		b.WriteString(lead + " ")
	}
	if len(names) == 0 {
		fmt.Fprintf(&b, "No metric has samples in the last %s.", humantime.Duration(since))
		return mcp.NewToolResultText(b.String()), nil
	}
	fmt.Fprintf(&b, "Metrics with samples in the last %s:\n", humantime.Duration(since))
	now := s.now()
	for _, n := range names {
		fmt.Fprintf(&b, "%s — %d entities, %d samples, latest %s\n", n.Name, n.Entities, n.Samples, humantime.Ago(now, n.LatestAt))
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) trend(ctx context.Context, a trendArgs) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, "get_trend", a.Entity)
	if bad != nil {
		return bad, nil
	}
	metric := strings.TrimSpace(a.Metric)
	if metric == "" {
		return mcp.NewToolResultError("name a metric, such as disk_used_pct; query_metrics lists them"), nil
	}
	since, err := parseSince(a.Since, 24*time.Hour)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	buckets := a.Buckets
	width := max((since / time.Duration(buckets)).Round(time.Minute), time.Minute)
	now := s.now()
	points, err := s.store.MetricTrend(ctx, e.ID, metric, now.Add(-since), width)
	if err != nil {
		return s.internal(ctx, "get_trend", err, "could not read the metrics just now; try again shortly"), nil
	}
	if len(points) == 0 {
		latest, err := s.store.EntityLatestMetrics(ctx, e.ID)
		if err != nil {
			return s.internal(ctx, "get_trend", err, "could not read the metrics just now; try again shortly"), nil
		}
		msg := fmt.Sprintf("No %s samples for %s in the last %s.", metric, e.Slug, humantime.Duration(since))
		if len(latest) > 0 {
			var ms []string
			for _, m := range latest {
				ms = append(ms, fmt.Sprintf("%s (latest %s)", m.Metric, humantime.Ago(now, m.At)))
			}
			msg += " Its metrics: " + strings.Join(ms, ", ") + "."
		} else {
			msg += " It has no metrics at all."
		}
		return mcp.NewToolResultText(msg), nil
	}
	lo, hi, n := points[0].Min, points[0].Max, 0
	for _, p := range points {
		lo, hi, n = min(lo, p.Min), max(hi, p.Max), n+p.Count
	}
	first, last := points[0].Avg, points[len(points)-1].Avg
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s over the last %s in %s buckets (UTC): %s → %s (%+.2f), min %s, max %s, %d samples\n",
		e.Slug, metric, humantime.Duration(since), humantime.Duration(width), num(first), num(last), last-first, num(lo), num(hi), n)
	layout := "15:04"
	if since > 24*time.Hour {
		layout = "01-02 15:04"
	}
	for _, p := range points {
		fmt.Fprintf(&b, "%s avg %s min %s max %s n=%d\n", p.Start.UTC().Format(layout), num(p.Avg), num(p.Min), num(p.Max), p.Count)
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) searchKnowledge(ctx context.Context, a searchArgs) (*mcp.CallToolResult, error) {
	query := strings.TrimSpace(a.Query)
	if query == "" {
		return mcp.NewToolResultError("give a query: a few words or a question"), nil
	}
	limit := a.Limit
	hits, err := s.store.SearchKnowledge(ctx, query, limit)
	if err != nil {
		return s.internal(ctx, "search_knowledge", err, "could not search the knowledge base just now; try again shortly"), nil
	}
	if len(hits) == 0 {
		return mcp.NewToolResultText(fmt.Sprintf("No document matches %q. Try other words, or get_entity_knowledge for an entity.", query)), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d documents for %q, best first", len(hits), query)
	if hits[0].Loose {
		b.WriteString(" (no document has every word; these have some)")
	}
	b.WriteString(":\n")
	for i, h := range hits {
		fmt.Fprintf(&b, "%d. %s (%s): %s", i+1, h.Slug, h.Kind, h.Title)
		if len(h.Entities) > 0 {
			b.WriteString(" — about " + strings.Join(h.Entities, ", "))
		}
		if len(h.Tags) > 0 {
			b.WriteString(" — tags " + strings.Join(h.Tags, ", "))
		}
		b.WriteString("\n   " + oneLine(h.Snippet, 400) + "\n")
	}
	b.WriteString("get_entity_knowledge <entity> returns whole documents.")
	return mcp.NewToolResultText(b.String()), nil
}

// docBodyLimit bounds each document's text in get_entity_knowledge.
const docBodyLimit = 1500

func (s *Server) entityKnowledge(ctx context.Context, a entityKnowledgeArgs) (*mcp.CallToolResult, error) {
	e, bad := s.resolve(ctx, "get_entity_knowledge", a.Entity)
	if bad != nil {
		return bad, nil
	}
	limit := a.Limit
	docs, err := s.store.KnowledgeForEntity(ctx, e.Slug, limit)
	if err != nil {
		return s.internal(ctx, "get_entity_knowledge", err, "could not read the knowledge base just now; try again shortly"), nil
	}
	if len(docs) == 0 {
		return mcp.NewToolResultText(fmt.Sprintf("No document is linked to %s or its neighbours. search_knowledge searches every document.", e.Slug)), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d documents about %s, nearest first:\n", len(docs), e.Slug)
	for _, d := range docs {
		link := "linked to it directly"
		if d.Hops > 0 {
			link = "through " + d.Via + " (" + relation(d.Relation, d.Via) + ")"
		}
		fmt.Fprintf(&b, "## %s (%s): %s — %s\n", d.Slug, d.Kind, d.Title, link)
		body := strings.TrimSpace(d.Body)
		if len(body) > docBodyLimit {
			body = oneLine(body, docBodyLimit) + " [cut]"
		}
		b.WriteString(body + "\n")
	}
	return mcp.NewToolResultText(strings.TrimRight(b.String(), "\n")), nil
}

// relation reads a KnowledgeForEntity relation as a phrase about the
// entity asked for ("this") and its neighbour.
func relation(rel, via string) string {
	if r, ok := strings.CutSuffix(rel, "<-"); ok {
		return via + " " + r + " this"
	}
	return "this " + rel + " " + via
}

// parseID reads an execution id.
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(strings.TrimSpace(s))
	if err != nil {
		return uuid.Nil, fmt.Errorf("id %q is not an execution id; they look like 0190f3c2-7a1e-7b44-9c1d-2f6e8a9b0c3d", s)
	}
	return id, nil
}
