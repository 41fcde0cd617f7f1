package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
)

// Flapping: a signal whose kind came back on its entity this many times
// within flapWindow.
const (
	flapWindow  = time.Hour
	flapRaises  = 2
	signalsSpan = 24 * time.Hour
)

type signalsData struct {
	base
	Open, Recent []store.SignalView
	FlapRaises   int
}

// signals shows open and recent signals with their checks, in one query.
func (s *Server) signals(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	all, err := s.store.SignalHistory(r.Context(), now.Add(-signalsSpan), now.Add(-flapWindow), 300)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := signalsData{base: s.base("Signals", "signals"), FlapRaises: flapRaises}
	for _, g := range all {
		if g.Open() {
			d.Open = append(d.Open, g)
		} else {
			d.Recent = append(d.Recent, g)
		}
	}
	s.render(w, r, "signals", d)
}

type agentData struct {
	base
	Sessions []store.SessionView
}

// agent lists sessions with their counts, in one query.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) {
	sessions, err := s.store.AgentSessionPage(r.Context(), 50)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "agent", agentData{base: s.base("Agent activity", "agent"), Sessions: sessions})
}

// toolCall is one call an assistant message made, as the page shows it.
type toolCall struct {
	Name      string
	Args      string
	ArgsBytes int
}

// turnView is one stored message of a session.
type turnView struct {
	store.TurnMessage
	Calls []toolCall
}

type sessionData struct {
	base
	S          store.AgentSession
	Turns      []turnView
	Executions []store.Execution
}

// turnHead is how much of each message the session page shows.
const turnHead = 600

// session shows one session's turns, tool calls and sizes, and what it
// asked to execute, in three queries.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.notFound(w, r)
		return
	}
	ctx := r.Context()
	sess, err := s.store.AgentSession(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := sessionData{base: s.base("Agent session", "agent"), S: sess}
	d.S.Summary = redact.String(sess.Summary)
	d.S.Title = redact.String(sess.Title)
	turns, err := s.store.SessionTurns(ctx, id, turnHead)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range turns {
		t.Head = redact.String(t.Head)
		d.Turns = append(d.Turns, turnView{TurnMessage: t, Calls: toolCalls(t.ToolCalls)})
	}
	if d.Executions, err = s.store.SessionExecutions(ctx, id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "session", d)
}

// toolCalls reads the OpenAI-shaped tool calls an assistant message
// stored; anything else shows as no calls rather than failing the page.
func toolCalls(raw json.RawMessage) []toolCall {
	if len(raw) == 0 {
		return nil
	}
	var calls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil
	}
	out := make([]toolCall, 0, len(calls))
	for _, c := range calls {
		out = append(out, toolCall{Name: c.Function.Name, Args: shorten(redact.String(c.Function.Arguments), 300), ArgsBytes: len(c.Function.Arguments)})
	}
	return out
}

type auditData struct {
	base
	Rows                  []store.AuditRecord
	Actor, Action, Entity string
	From, To              string
	Next                  string
	Paged                 bool
}

// timeInput is the layout of a datetime-local input, read as UTC.
const timeInput = "2006-01-02T15:04"

// audit lists the audit trail newest first, filtered and paged by id, in
// one query.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := auditData{base: s.base("Audit trail", "audit"), Actor: strings.TrimSpace(q.Get("actor")), Action: strings.TrimSpace(q.Get("action")),
		Entity: strings.TrimSpace(q.Get("entity")), From: q.Get("from"), To: q.Get("to")}
	aq := store.AuditQuery{Actor: d.Actor, Action: d.Action, Entity: d.Entity, Limit: 100}
	var err error
	if d.From != "" {
		if aq.From, err = time.Parse(timeInput, d.From); err != nil {
			http.Error(w, "From wants a time such as 2026-01-31T18:00 (UTC).", http.StatusBadRequest)
			return
		}
	}
	if d.To != "" {
		if aq.To, err = time.Parse(timeInput, d.To); err != nil {
			http.Error(w, "To wants a time such as 2026-01-31T18:00 (UTC).", http.StatusBadRequest)
			return
		}
	}
	if b := q.Get("before"); b != "" {
		if aq.Before, err = strconv.ParseInt(b, 10, 64); err != nil || aq.Before <= 0 {
			http.Error(w, "That page link is not valid; start again from the first page.", http.StatusBadRequest)
			return
		}
		d.Paged = true
	}
	rows, next, err := s.store.AuditPage(r.Context(), aq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d.Rows = rows
	if next > 0 {
		v := q
		v.Set("before", strconv.FormatInt(next, 10))
		d.Next = "/audit?" + v.Encode()
	}
	s.render(w, r, "audit", d)
}

type knowledgeData struct {
	base
	Q    string
	Hits []store.KnowledgeHit
}

// knowledge searches the documents with Postgres full-text search: one
// query, two when nothing has every word.
func (s *Server) knowledge(w http.ResponseWriter, r *http.Request) {
	d := knowledgeData{base: s.base("Knowledge", "knowledge"), Q: strings.TrimSpace(r.URL.Query().Get("q"))}
	if len(d.Q) > 200 {
		d.Q = d.Q[:200]
	}
	if d.Q != "" {
		hits, err := s.store.SearchKnowledge(r.Context(), d.Q, 20)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for i := range hits {
			hits[i].Title = redact.String(hits[i].Title)
		}
		d.Hits = hits
	}
	s.render(w, r, "knowledge", d)
}
