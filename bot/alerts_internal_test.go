package bot

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/store"
)

// TestAlertFailureWarningBacksOff: a room that refuses alerts for three
// minutes of passes every 5s is warned about once a minute, each warning
// counting the attempts since the one before.
func TestAlertFailureWarningBacksOff(t *testing.T) {
	var log bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &Bot{logger: slog.New(slog.NewTextHandler(&log, nil)), now: func() time.Time { return now }}
	a := store.SignalAlert{Signal: store.Signal{Kind: "check:x", EntitySlug: "service:x"}}
	for range 36 { // 3 minutes of 5s passes
		b.alertFailed(a, "!ops:hs", errors.New("M_FORBIDDEN"))
		now = now.Add(5 * time.Second)
	}
	warnings := strings.Count(log.String(), "could not post alerts")
	if warnings != 3 {
		t.Errorf("%d warnings in 3 minutes, want 3:\n%s", warnings, log.String())
	}
	if !strings.Contains(log.String(), "failed_attempts=12") {
		t.Errorf("no warning counts the 12 attempts of a minute:\n%s", log.String())
	}
	b.alertPosted("!ops:hs")
	if !strings.Contains(log.String(), "alerts reach the ops room again") {
		t.Errorf("no note that alerts are posted again:\n%s", log.String())
	}
}

// TestAlertTextSaysStale: a health.stale signal is announced as stale,
// not as degraded, though it is a warning.
func TestAlertTextSaysStale(t *testing.T) {
	for _, c := range []struct {
		kind, severity, want string
	}{
		{store.StaleSignalKind, "warning", "⚪ service:caddy is stale, its checks have stopped answering: no result"},
		{"check:caddy-http", "warning", "🟡 service:caddy is degraded: no result"},
		{"check:caddy-http", "critical", "🔴 service:caddy is failing: no result"},
	} {
		plain, _ := alertText(store.SignalAlert{Signal: store.Signal{Kind: c.kind, Severity: c.severity, EntitySlug: "service:caddy", Summary: "no result"}})
		if !strings.HasPrefix(plain, c.want) {
			t.Errorf("%s %s: %q, want it to start %q", c.kind, c.severity, plain, c.want)
		}
	}
}
