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
