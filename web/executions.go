package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

var allStates = []store.ExecutionState{
	store.StateAwaitingApproval, store.StateApproved, store.StateDispatched, store.StateRunning,
	store.StateSucceeded, store.StateFailed, store.StateOutcomeUnknown, store.StateReconciled,
	store.StateDenied, store.StateExpired, store.StateCancelled,
}

var riskClasses = []string{"read_only", "reversible_low", "config_mutation", "destructive"}

type executionsData struct {
	base
	Rows                           []store.Execution
	State, Risk, Target, Requester string
	States                         []store.ExecutionState
	Risks                          []string
	Next                           string
	Paged                          bool
}

// executions lists executions in one query, filtered and paged by key.
func (s *Server) executions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := executionsData{base: s.base("Executions", "executions"), States: allStates, Risks: riskClasses,
		State: q.Get("state"), Risk: q.Get("risk"), Target: strings.TrimSpace(q.Get("target")), Requester: strings.TrimSpace(q.Get("requester"))}
	eq := store.ExecutionQuery{RiskClass: d.Risk, Target: d.Target, RequestedBy: d.Requester, Limit: 50}
	if d.State != "" {
		eq.States = []store.ExecutionState{store.ExecutionState(d.State)}
	}
	if after := q.Get("after"); after != "" {
		c, err := parseExecutionCursor(after)
		if err != nil {
			http.Error(w, "That page link is not valid; start again from the first page.", http.StatusBadRequest)
			return
		}
		eq.After, d.Paged = &c, true
	}
	rows, next, err := s.store.ExecutionPage(r.Context(), eq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d.Rows = rows
	if next != nil {
		v := url.Values{}
		for k, val := range map[string]string{"state": d.State, "risk": d.Risk, "target": d.Target, "requester": d.Requester} {
			if val != "" {
				v.Set(k, val)
			}
		}
		v.Set("after", formatExecutionCursor(*next))
		d.Next = "/executions?" + v.Encode()
	}
	s.render(w, r, "executions", d)
}

func formatExecutionCursor(c store.ExecutionCursor) string {
	return strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "_" + c.ID.String()
}

func parseExecutionCursor(s string) (store.ExecutionCursor, error) {
	ns, id, ok := strings.Cut(s, "_")
	if !ok {
		return store.ExecutionCursor{}, errors.New("no separator")
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return store.ExecutionCursor{}, err
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return store.ExecutionCursor{}, err
	}
	return store.ExecutionCursor{CreatedAt: time.Unix(0, n), ID: u}, nil
}

// timelineEntry is one audited step of an execution.
type timelineEntry struct {
	At     time.Time
	Actor  string
	Action string
	// Cause is what the audit row says about why, redacted.
	Cause string
}

type executionData struct {
	base
	X        store.Execution
	Result   string
	Timeline []timelineEntry
	Session  *store.ExecutionLink
}

// execution shows one execution in three queries: the row, its audit
// trail and the agent session behind it.
func (s *Server) execution(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.notFound(w, r)
		return
	}
	ctx := r.Context()
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Steps are shown exactly as they run (the gate refuses a step that
	// carries a secret); what came back, and why it was asked, pass
	// through redaction.
	x.Reason = redact.String(x.Reason)
	x.Error = redact.String(x.Error)
	x.ProgressTail = redact.String(x.ProgressTail)
	d := executionData{base: s.base(x.Action+" on "+x.TargetSlug, "executions"), X: x}
	if len(x.Result) > 0 && string(x.Result) != "null" {
		d.Result = redactJSON(x.Result)
	}
	audit, _, err := s.store.AuditPage(ctx, store.AuditQuery{ExecutionID: &id, Oldest: true, Limit: 500})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, a := range audit {
		d.Timeline = append(d.Timeline, timelineEntry{At: a.At, Actor: a.Actor, Action: a.Action, Cause: auditCause(a.Detail)})
	}
	link, err := s.store.ExecutionLink(ctx, id)
	switch {
	case err == nil:
		d.Session = &link
	case !errors.Is(err, store.ErrNotFound):
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "execution", d)
}

// redactJSON pretty-prints a JSON document and redacts it.
func redactJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return redact.String(string(raw))
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return redact.String(string(raw))
	}
	return redact.String(string(b))
}

// auditCause picks the fields of an audit detail that say why a step
// happened, and shows the rest compactly; every value is redacted.
func auditCause(detail map[string]any) string {
	if len(detail) == 0 {
		return ""
	}
	var parts []string
	for _, k := range []string{"method", "error", "reason", "cause", "note", "exit_code"} {
		if v, ok := detail[k]; ok && fmt.Sprint(v) != "" {
			parts = append(parts, k+": "+fmt.Sprint(v))
		}
	}
	if len(parts) == 0 {
		return detailJSON(detail, 400)
	}
	return shorten(redact.String(strings.Join(parts, "; ")), 400)
}
