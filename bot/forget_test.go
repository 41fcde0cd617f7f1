package bot_test

import (
	"errors"
	"testing"

	"github.com/nomoshq/nomos/store"
)

// TestForgetSessionIsForOperators: "forget session <id>" from someone in
// the room who is not an operator is refused, audited, and deletes
// nothing; from an operator it deletes the transcript, says how much
// went, and the audit log records who deleted it.
func TestForgetSessionIsForOperators(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := b.store.EnsureAgentSession(b.ctx, string(b.room), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.AppendAgentMessages(b.ctx, s.ID,
		store.AgentMessage{Role: store.AgentRoleUser, Content: "why is jellyfin slow?"},
		store.AgentMessage{Role: store.AgentRoleAssistant, Content: "its disk is full"}); err != nil {
		t.Fatal(err)
	}

	b.say(t, b.guest, "forget session "+s.ID.String(), "")
	b.waitFor(t, b.botSays("only the operators", b.guest.UserID.String()))
	if _, err := b.store.AgentSession(b.ctx, s.ID); err != nil {
		t.Fatalf("a non-operator's forget deleted the session: %v", err)
	}

	b.say(t, b.operator, "forget session "+s.ID.String(), "")
	b.waitFor(t, b.botSays("Forgot agent session "+s.ID.String(), "2 messages"))
	if _, err := b.store.AgentSession(b.ctx, s.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after an operator's forget the session is %v; want it gone", err)
	}
	page, _, err := b.store.AuditPage(b.ctx, store.AuditQuery{Action: store.SessionDeletedAction})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].Actor != b.operator.UserID.String() {
		t.Errorf("audit of the deletion: %+v; want one entry by the operator", page)
	}
	refused, _, err := b.store.AuditPage(b.ctx, store.AuditQuery{Action: "chat.refused", Actor: b.guest.UserID.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 {
		t.Errorf("%d refusals of the guest audited, want 1", len(refused))
	}
}
