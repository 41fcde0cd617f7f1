// Package web serves Nomos's read-only status page: open signals, fleet
// health and the latest executions with their output. It only reads the
// store; nothing on it can change the fleet. Off a loopback address it
// asks for a user and password (RequireAuth, Listen).
package web

import (
	"context"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// Handler serves the page at / and one execution at /executions/<id>.
type Handler struct {
	Store  *store.Store
	Logger *slog.Logger
}

var _ http.Handler = (*Handler)(nil)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	switch {
	case r.URL.Path == "/":
		h.index(ctx, w)
	case strings.HasPrefix(r.URL.Path, "/executions/"):
		id, err := uuid.Parse(strings.TrimPrefix(r.URL.Path, "/executions/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h.execution(ctx, w, id)
	default:
		http.NotFound(w, r)
	}
}

type entityRow struct {
	Slug, Name, Health, Detail string
}

func (h *Handler) index(ctx context.Context, w http.ResponseWriter) {
	data := struct {
		Now        string
		Signals    []store.Signal
		Entities   []entityRow
		Executions []store.Execution
	}{Now: time.Now().UTC().Format("2006-01-02 15:04:05 MST")}
	sigs, err := h.Store.ListSignals(ctx, store.SignalFilter{Limit: 200})
	if err != nil {
		h.fail(w, err)
		return
	}
	for i := range sigs {
		sigs[i].Summary = redact.String(sigs[i].Summary)
	}
	data.Signals = sigs
	for _, typ := range []string{"host", "lxc", "service"} {
		es, err := h.Store.ListEntities(ctx, typ)
		if err != nil {
			h.fail(w, err)
			return
		}
		for _, e := range es {
			data.Entities = append(data.Entities, entityRow{e.Slug, e.Name, e.Health, redact.String(e.Detail)})
		}
	}
	xs, err := h.Store.ListExecutions(ctx, store.ExecutionFilter{Limit: 50})
	if err != nil {
		h.fail(w, err)
		return
	}
	data.Executions = xs
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := indexPage.Execute(w, data); err != nil {
		h.Logger.Warn("render status page", "err", err)
	}
}

func (h *Handler) execution(ctx context.Context, w http.ResponseWriter, id uuid.UUID) {
	x, err := h.Store.GetExecution(ctx, id)
	if err != nil {
		http.Error(w, "no such execution", http.StatusNotFound)
		return
	}
	// Steps are shown exactly as they run; what came back, and why it was
	// asked, pass through redaction.
	x.Reason = redact.String(x.Reason)
	x.Error = redact.String(x.Error)
	x.ProgressTail = redact.String(x.ProgressTail)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := executionPage.Execute(w, x); err != nil {
		h.Logger.Warn("render execution page", "err", err)
	}
}

// fail shows a fixed sentence; the log keeps the cause.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	h.Logger.Error("status page", "err", err)
	http.Error(w, "The status page cannot read the database right now.", http.StatusServiceUnavailable)
}

const style = `<style>body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:left}pre{background:#f5f5f5;padding:.6em;overflow:auto}.healthy{color:#080}.unhealthy,.critical{color:#b00}.degraded,.warning{color:#b60}.stale{color:#888}</style>`

var indexPage = template.Must(template.New("index").Parse(`<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="10"><title>Nomos status</title>` + style + `</head><body>
<h1>Nomos status</h1><p>Read-only. Updated {{.Now}}; refreshes every 10 s.</p>
<h2>Open signals</h2><table><tr><th>raised</th><th>severity</th><th>entity</th><th>signal</th><th>summary</th></tr>
{{range .Signals}}<tr><td>{{.RaisedAt.UTC.Format "Jan 02 15:04"}}</td><td class="{{.Severity}}">{{.Severity}}</td><td>{{.EntitySlug}}</td><td>{{.Kind}}</td><td>{{.Summary}}</td></tr>{{else}}<tr><td colspan="5">none</td></tr>{{end}}</table>
<h2>Latest executions</h2><table><tr><th>created</th><th>action</th><th>target</th><th>risk</th><th>state</th><th>requested by</th></tr>
{{range .Executions}}<tr><td>{{.CreatedAt.UTC.Format "Jan 02 15:04"}}</td><td><a href="/executions/{{.ID}}">{{.Action}}</a></td><td>{{.TargetSlug}}</td><td>{{.RiskClass}}</td><td>{{.State}}</td><td>{{.RequestedBy}}</td></tr>{{else}}<tr><td colspan="6">none yet</td></tr>{{end}}</table>
<h2>Fleet</h2><table><tr><th>entity</th><th>name</th><th>health</th><th>detail</th></tr>
{{range .Entities}}<tr><td>{{.Slug}}</td><td>{{.Name}}</td><td class="{{.Health}}">{{.Health}}</td><td>{{.Detail}}</td></tr>{{end}}</table>
</body></html>`))

var executionPage = template.Must(template.New("execution").Parse(`<!doctype html><html><head><meta charset="utf-8"><title>Execution {{.ID}}</title>` + style + `</head><body>
<p><a href="/">← status</a></p><h1>{{.Action}} on {{.TargetSlug}}</h1>
<p>State <b>{{.State}}</b>, risk {{.RiskClass}}, plan {{.PlanCode}}, requested by {{.RequestedBy}} via {{.RequestedVia}}.</p>
{{if .Reason}}<p>Why: {{.Reason}}</p>{{end}}
{{if .Approval}}<p>{{.Approval.Decision}} by {{.Approval.DecidedBy}} ({{.Approval.Method}}) at {{.Approval.DecidedAt.UTC.Format "15:04:05 MST"}}</p>{{end}}
<h2>Steps</h2><pre>{{range .Steps}}{{.}}
{{end}}</pre>
{{if .Error}}<h2>Error</h2><pre>{{.Error}}</pre>{{end}}
<h2>Output</h2><pre>{{.ProgressTail}}</pre>
</body></html>`))
