package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

// liveEvent is what /events sends an open page: enough to know which
// parts to re-read, never the data itself, so nothing leaves the page's
// own escaping.
type liveEvent struct {
	Kind  string `json:"kind"` // execution, fleet or resync
	ID    string `json:"id,omitempty"`
	State string `json:"state,omitempty"`
}

// hub fans events out to live clients. Each client has a bounded buffer;
// one that falls behind is dropped (its browser reconnects), so a slow
// client never slows the listener, let alone the bot.
type hub struct {
	mu      sync.Mutex
	clients map[chan liveEvent]struct{}
	buffer  int
	max     int
	dropped int64
}

func newHub(buffer, max int) *hub {
	return &hub{clients: map[chan liveEvent]struct{}{}, buffer: buffer, max: max}
}

// subscribe adds a client, or returns nil when the hub is full.
func (h *hub) subscribe() chan liveEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= h.max {
		return nil
	}
	c := make(chan liveEvent, h.buffer)
	h.clients[c] = struct{}{}
	return c
}

func (h *hub) unsubscribe(c chan liveEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c)
	}
}

func (h *hub) publish(ev liveEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c <- ev:
		default:
			delete(h.clients, c)
			close(c)
			h.dropped++
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		delete(h.clients, c)
		close(c)
	}
}

func (h *hub) stats() (clients int, dropped int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients), h.dropped
}

// events is the live events page, or its Server-Sent Events stream when
// the browser asks for one (EventSource sends Accept: text/event-stream).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.stream(w, r)
		return
	}
	s.eventsPage(w, r)
}

// heartbeat keeps idle connections open through proxies.
const heartbeat = 25 * time.Second

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "Live updates are not available here.", http.StatusNotImplemented)
		return
	}
	c := s.hub.subscribe()
	if c == nil {
		http.Error(w, "Too many live pages are open; this one will not update by itself.", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.unsubscribe(c)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprint(w, "retry: 2000\n: live\n\n")
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": ping\n\n")
		case ev, open := <-c:
			if !open {
				return // dropped for falling behind, or shutting down
			}
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		flusher.Flush()
	}
}

// eventGroup is the events of one correlation: one execution's, or one
// entity's.
type eventGroup struct {
	Key     string
	Title   string
	Link    string
	Session *uuid.UUID
	Events  []store.AuditRecord
}

type eventsData struct {
	base
	Flat   bool
	Rows   []store.AuditRecord
	Groups []eventGroup
}

// eventsPage renders the latest events from the audit trail, grouped by
// correlation (one plan's events together) or flat, in one query.
func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request) {
	rows, _, err := s.store.AuditPage(r.Context(), store.AuditQuery{Limit: 200})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := eventsData{base: s.base("Live events", "events"), Flat: r.URL.Query().Get("view") == "flat", Rows: rows}
	if !d.Flat {
		d.Groups = groupEvents(rows)
	}
	s.render(w, r, "events", d)
}

// groupEvents groups rows by execution (or entity, or action), keeping
// the order of each group's newest event.
func groupEvents(rows []store.AuditRecord) []eventGroup {
	var out []eventGroup
	at := map[string]int{}
	for _, a := range rows {
		var g eventGroup
		switch {
		case a.ExecutionID != nil:
			g = eventGroup{Key: "x:" + a.ExecutionID.String(), Title: "execution " + shorten(a.ExecutionID.String(), 8) + " on " + a.EntitySlug,
				Link: "/executions/" + a.ExecutionID.String(), Session: a.SessionID}
		case a.EntitySlug != "":
			g = eventGroup{Key: "e:" + a.EntitySlug, Title: a.EntitySlug, Link: "/e/" + a.EntitySlug}
		default:
			g = eventGroup{Key: "a:" + a.Action, Title: a.Action}
		}
		i, ok := at[g.Key]
		if !ok {
			i = len(out)
			at[g.Key] = i
			out = append(out, g)
		}
		out[i].Events = append(out[i].Events, a)
	}
	return out
}
