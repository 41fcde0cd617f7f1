package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
)

// TestDeleteAgentSessionKeepsTheAudit: deleting a session removes its
// transcript, the stored tool output only it named and the link that
// would continue it, keeps the execution it asked for and every audit
// entry (the execution's own, and one more saying who deleted what), and
// leaves another session's shared output alone.
func TestDeleteAgentSessionKeepsTheAudit(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	a, err := e.s.EnsureAgentSession(ctx, "!ops:test", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.s.EnsureAgentSession(ctx, "!ops:test", "$thread")
	if err != nil {
		t.Fatal(err)
	}
	own := strings.Repeat("only a's output ", 2000)   // over the cap: a blob
	shared := strings.Repeat("both read this ", 2000) // the same blob for both
	if _, err := e.s.AppendAgentMessages(ctx, a.ID,
		store.AgentMessage{Role: store.AgentRoleUser, Content: "restart jellyfin"},
		store.AgentMessage{Role: store.AgentRoleNote, Content: own},
		store.AgentMessage{Role: store.AgentRoleNote, Content: shared}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.AppendAgentMessages(ctx, b.ID, store.AgentMessage{Role: store.AgentRoleNote, Content: shared}); err != nil {
		t.Fatal(err)
	}
	x := e.execution(t)
	if _, err := e.s.LinkExecution(ctx, x, a.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.AppendAudit(ctx, store.AuditEntry{Actor: "@op:test", Action: "agent.tool_call", ExecutionID: &x,
		Detail: map[string]any{"session_id": a.ID.String()}}); err != nil {
		t.Fatal(err)
	}
	auditBefore := e.count(t, `SELECT count(*) FROM audit_log`)

	f, err := e.s.DeleteAgentSession(ctx, a.ID, "@op:test", "operator")
	if err != nil {
		t.Fatal(err)
	}
	if f.Messages != 3 || f.Blobs != 1 || f.RoomID != "!ops:test" {
		t.Errorf("deleted %+v; want 3 messages and the one blob only a named", f)
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM agent_sessions WHERE id = $1`:          0,
		`SELECT count(*) FROM agent_messages WHERE session_id = $1`:  0,
		`SELECT count(*) FROM plan_executions WHERE session_id = $1`: 0,
	} {
		if got := e.count(t, q, a.ID); got != want {
			t.Errorf("%s = %d, want %d", q, got, want)
		}
	}
	if got := e.count(t, `SELECT count(*) FROM agent_blobs`); got != 1 {
		t.Errorf("%d blobs left, want the one b still names", got)
	}
	if got := e.count(t, `SELECT count(*) FROM agent_messages WHERE session_id = $1`, b.ID); got != 1 {
		t.Errorf("b has %d messages left, want its 1", got)
	}
	if got := e.count(t, `SELECT count(*) FROM executions WHERE id = $1`, x); got != 1 {
		t.Error("the execution the session asked for was deleted with it")
	}
	if got := e.count(t, `SELECT count(*) FROM audit_log`); got != auditBefore+1 {
		t.Errorf("%d audit rows after, want the %d before and one more", got, auditBefore)
	}
	if got := e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor = '@op:test'
		AND detail->>'session_id' = $2 AND detail->>'reason' = 'operator' AND (detail->>'messages')::int = 3`,
		store.SessionDeletedAction, a.ID.String()); got != 1 {
		t.Errorf("%d audit rows record the deletion, want 1", got)
	}
	// Gone is gone: a second delete, or one of a made-up id, is not found.
	for _, id := range []uuid.UUID{a.ID, uuid.Must(uuid.NewV7())} {
		if _, err := e.s.DeleteAgentSession(ctx, id, "@op:test", "operator"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete %s again = %v, want ErrNotFound", id, err)
		}
	}
}

// TestPruneAgentSessions: retention deletes the sessions untouched since
// the cut-off, by the same path (audited as retention), and keeps the
// rest.
func TestPruneAgentSessions(t *testing.T) {
	t.Parallel()
	e := setupAgent(t)
	ctx := testenv.Context(t)
	var ids []uuid.UUID
	for _, room := range []string{"!old:test", "!older:test", "!new:test"} {
		s, err := e.s.EnsureAgentSession(ctx, room, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	now := time.Now()
	for i, age := range []time.Duration{31 * 24 * time.Hour, 40 * 24 * time.Hour, 29 * 24 * time.Hour} {
		if _, err := e.db.Exec(ctx, `UPDATE agent_sessions SET updated_at = $2 WHERE id = $1`, ids[i], now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.s.PruneAgentSessions(ctx, now.Add(-30*24*time.Hour), 100)
	if err != nil || n != 2 {
		t.Fatalf("PruneAgentSessions = %d, %v; want the two older than 30 days", n, err)
	}
	if got := e.count(t, `SELECT count(*) FROM agent_sessions WHERE id = $1`, ids[2]); got != 1 {
		t.Error("the session touched 29 days ago was pruned")
	}
	if got := e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND detail->>'reason' = 'retention'`, store.SessionDeletedAction); got != 2 {
		t.Errorf("%d retention deletions audited, want 2", got)
	}
	if n, err := e.s.PruneAgentSessions(ctx, now.Add(-30*24*time.Hour), 100); err != nil || n != 0 {
		t.Errorf("a second prune = %d, %v; want nothing left to prune", n, err)
	}
}
