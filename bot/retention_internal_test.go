package bot

import (
	"testing"
	"time"

	"github.com/nomoshq/nomos/internal/testenv"
)

// TestSessionRetentionPrunesOnTheBotsClock: the retention job deletes the
// sessions untouched for longer than SessionRetention at the bot's clock,
// and keeps a session touched since.
func TestSessionRetentionPrunesOnTheBotsClock(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st := testenv.Store(t)
	old, err := st.EnsureAgentSession(ctx, "!ops:test", "$old")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(31 * 24 * time.Hour) // a month on, the session is old
	b := &Bot{store: st, logger: testenv.Logger(t), now: func() time.Time { return now },
		cfg: Config{SessionRetention: 30 * 24 * time.Hour}}
	fresh, err := st.EnsureAgentSession(ctx, "!ops:test", "$fresh")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgentSessionTitle(ctx, fresh.ID, "touched"); err != nil {
		t.Fatal(err)
	}
	// Both were touched just now, a month before the bot's clock: both go.
	if n := b.pruneSessions(ctx); n != 2 {
		t.Fatalf("pruned %d sessions a month on, want 2", n)
	}
	if _, err := st.AgentSession(ctx, old.ID); err == nil {
		t.Error("the old session is still there")
	}
	// Retention is measured from now: nothing younger goes.
	if _, err := st.EnsureAgentSession(ctx, "!ops:test", "$new"); err != nil {
		t.Fatal(err)
	}
	now = time.Now().Add(29 * 24 * time.Hour)
	if n := b.pruneSessions(ctx); n != 0 {
		t.Errorf("pruned %d sessions 29 days on, want none", n)
	}
}
