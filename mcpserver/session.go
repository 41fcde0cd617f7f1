package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/store"
)

// deleteSession deletes an agent session's transcript for a request-scope
// client (guard refuses a read-scope one, and the agent); the audit log
// records the client as who deleted it.
func (s *Server) deleteSession(ctx context.Context, a sessionArgs) (*mcp.CallToolResult, error) {
	id, err := uuid.Parse(a.ID)
	if err != nil {
		return mcp.NewToolResultError("delete_session needs the session's id, a UUID, as get_agent_activity lists it"), nil
	}
	c := s.caller(ctx)
	f, err := s.store.DeleteAgentSession(ctx, id, c.RequestedBy, "mcp")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return mcp.NewToolResultError(fmt.Sprintf("there is no agent session %s; nothing was deleted", id)), nil
	case err != nil:
		return s.internal(ctx, "delete_session", err, "nothing was deleted: the session could not be deleted just now; try again shortly"), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("deleted agent session %s (%s): %d messages and %d stored tool outputs; the executions it asked for and the audit log stay",
		id, f.RoomID, f.Messages, f.Blobs)), nil
}
