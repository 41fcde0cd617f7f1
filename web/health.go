package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// ErrUnknown is what a ReadyCheck returns when it cannot tell yet (the
// homeserver sync before its first pass): reported, but not a failure.
var ErrUnknown = errors.New("unknown")

// ErrStandby is what a ReadyCheck of a leader-only part returns on a
// standby process: reported as "standby", not a failure.
var ErrStandby = errors.New("standby")

// healthz says the process is alive; it reads nothing.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodHead {
		w.Write([]byte("ok\n"))
	}
}

// readyReport is /readyz's body.
type readyReport struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	// LastSyncAgeSeconds is how long ago the homeserver last answered the
	// bot's /sync, for a watchdog on another machine (nomos watchdog);
	// absent on a standby and before the first answer.
	LastSyncAgeSeconds *int64 `json:"last_sync_age_seconds,omitempty"`
}

// readyz asks each dependency, at once and within two seconds, and names
// each with "ok", "unknown" or "unavailable". The cause stays in the log.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	rep := readyReport{Status: "ok", Checks: make(map[string]string, len(s.cfg.Ready))}
	results := make([]error, len(s.cfg.Ready))
	done := make(chan int, len(s.cfg.Ready))
	for i, c := range s.cfg.Ready {
		go func() {
			if c.Check == nil {
				results[i] = ErrUnknown
			} else {
				results[i] = c.Check(ctx)
			}
			done <- i
		}()
	}
	for range s.cfg.Ready {
		<-done
	}
	status := http.StatusOK
	for i, c := range s.cfg.Ready {
		switch err := results[i]; {
		case err == nil:
			rep.Checks[c.Name] = "ok"
		case errors.Is(err, ErrUnknown):
			rep.Checks[c.Name] = "unknown"
		case errors.Is(err, ErrStandby):
			rep.Checks[c.Name] = "standby"
		default:
			rep.Checks[c.Name] = "unavailable"
			rep.Status = "unavailable"
			status = http.StatusServiceUnavailable
			s.logger.Warn("not ready", "dependency", c.Name, "err", err)
		}
	}
	if s.cfg.LastSync != nil {
		if at := s.cfg.LastSync(); !at.IsZero() {
			age := int64(max(s.now().Sub(at), 0) / time.Second)
			rep.LastSyncAgeSeconds = &age
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(rep) // a report always encodes; a failed write is a client gone
	}
}
