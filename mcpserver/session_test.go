package mcpserver_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/store"
)

// TestDeleteSessionNeedsARequestToken: delete_session is neither offered
// to nor done for a read-scope token, nor for the agent (an agent steered
// by what it read must not erase its own record); a request token deletes
// the session, and the audit log names the client that did.
func TestDeleteSessionNeedsARequestToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := b.store.EnsureAgentSession(b.ctx, opsRoom, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.AppendAgentMessages(b.ctx, s.ID, store.AgentMessage{Role: store.AgentRoleUser, Content: "why is gitea down?"}); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"id": s.ID.String()}
	url := serveHTTP(t, b.srv.HTTPHandler())
	read := httpClient(t, b.ctx, url, readToken)
	if slices.Contains(toolNames(t, b.ctx, read), "delete_session") {
		t.Error("a read-scope token is offered delete_session")
	}
	if text, isErr := callTool(t, b.ctx, read, "delete_session", args); !isErr || !strings.Contains(text, "the token of mcp:dashboard may only read") {
		t.Errorf("delete_session with a read token = %v %q; want it refused", isErr, text)
	}
	if slices.Contains(toolNames(t, b.ctx, b.client), "delete_session") {
		t.Error("the agent is offered delete_session")
	}
	if text, isErr := callTool(t, b.ctx, b.client, "delete_session", args); !isErr || !strings.Contains(text, "not for the agent") {
		t.Errorf("delete_session by the agent = %v %q; want it refused", isErr, text)
	}
	if _, err := b.store.AgentSession(b.ctx, s.ID); err != nil {
		t.Fatalf("a refused delete_session deleted the session: %v", err)
	}

	req := httpClient(t, b.ctx, url, token)
	if !slices.Contains(toolNames(t, b.ctx, req), "delete_session") {
		t.Error("a request token is not offered delete_session")
	}
	if text, isErr := callTool(t, b.ctx, req, "delete_session", map[string]any{"id": "not-a-uuid"}); !isErr || !strings.Contains(text, "a UUID") {
		t.Errorf("delete_session of a bad id = %v %q; want a clear refusal", isErr, text)
	}
	text, isErr := callTool(t, b.ctx, req, "delete_session", args)
	if isErr || !strings.Contains(text, "deleted agent session "+s.ID.String()) || !strings.Contains(text, "1 messages") {
		t.Errorf("delete_session with a request token = %v %q", isErr, text)
	}
	if _, err := b.store.AgentSession(b.ctx, s.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete_session the session is %v; want it gone", err)
	}
	page, _, err := b.store.AuditPage(b.ctx, store.AuditQuery{Action: store.SessionDeletedAction})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].Actor != "mcp:claude" {
		t.Errorf("audit of the deletion: %+v; want one entry by mcp:claude", page)
	}
	if text, isErr := callTool(t, b.ctx, req, "delete_session", args); !isErr || !strings.Contains(text, "no agent session") {
		t.Errorf("delete_session again = %v %q; want not found", isErr, text)
	}
}
