package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// seriesView is one metric of an entity, drawn.
type seriesView struct {
	Metric string
	Latest float64
	Min    float64
	Max    float64
	Spark  template.HTML
}

type attrView struct {
	Key, Value string
}

type entityData struct {
	base
	E          store.Entity
	Attrs      []attrView
	Edges      []store.Edge
	Checks     []store.CheckView
	Series     []seriesView
	Docs       []store.LinkedDoc
	Executions []store.Execution
	Signals    []store.Signal
}

// sparkWindow is how far back an entity's sparklines reach.
const sparkWindow = 24 * time.Hour

// entity reads eight things: the entity, its edges, checks, metric
// series, signals, knowledge (two) and executions.
func (s *Server) entity(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	slug := r.PathValue("slug")
	e, err := s.store.EntityBySlug(ctx, slug)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := entityData{base: s.base(e.Slug, ""), E: e}
	d.E.Detail = redact.String(e.Detail)
	for k, v := range e.Attrs {
		d.Attrs = append(d.Attrs, attrView{Key: k, Value: redact.String(attrText(v))})
	}
	slices.SortFunc(d.Attrs, func(a, b attrView) int {
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	if d.Edges, err = s.store.EntityEdges(ctx, e.ID); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Checks, err = s.store.ChecksOf(ctx, e.ID); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	series, err := s.store.EntitySeries(ctx, e.ID, now.Add(-sparkWindow), now, 96)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, m := range series {
		v := seriesView{Metric: m.Metric}
		vals := make([]float64, len(m.Points))
		for i, p := range m.Points {
			vals[i] = p.Value
		}
		v.Latest, v.Min, v.Max = vals[len(vals)-1], slices.Min(vals), slices.Max(vals)
		v.Spark = sparkline(vals, 160, 28)
		d.Series = append(d.Series, v)
	}
	id := e.ID
	if d.Signals, err = s.store.ListSignals(ctx, store.SignalFilter{EntityID: &id, Since: now.Add(-7 * 24 * time.Hour), Limit: 20}); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Docs, err = s.store.KnowledgeForEntity(ctx, e.Slug, 20); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Executions, err = s.store.ExecutionsTouching(ctx, e.ID, e.Slug, 20); err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "entity", d)
}

// attrText is how an attribute reads on the entity page: a string as it
// is, a list or an object (snapshots, a backup's jobs) as compact JSON
// rather than Go's own notation, and null for a fact not known.
func attrText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any, []any, nil:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	default:
		return fmt.Sprint(v)
	}
}
