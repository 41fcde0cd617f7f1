package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// AgentActivity is what the agent has been doing: its sessions, how much it
// talked and called tools, and how often results continued it.
type AgentActivity struct {
	// Sessions is every session ever; Active those updated in the window.
	Sessions int
	Active   int
	// Messages counts the window's stored messages by role.
	Messages map[string]int
	// ToolCalls counts the tool calls the window's assistant messages made.
	ToolCalls int
	// Continuations counts execution results that re-invoked a session in
	// the window.
	Continuations int
	// Recent lists the most recently updated sessions.
	Recent []AgentSessionSummary
}

// AgentSessionSummary summarises one session.
type AgentSessionSummary struct {
	ID        uuid.UUID
	RoomID    string
	ThreadID  string
	Title     string
	Messages  int
	UpdatedAt time.Time
}

// AgentActivitySince summarises agent sessions and messages since a time,
// listing up to recent sessions.
func (s *Store) AgentActivitySince(ctx context.Context, since time.Time, recent int) (AgentActivity, error) {
	if recent <= 0 {
		recent = 5
	}
	a := AgentActivity{Messages: map[string]int{}}
	err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM agent_sessions),
			(SELECT count(*) FROM agent_sessions WHERE updated_at >= $1),
			(SELECT coalesce(sum(jsonb_array_length(tool_calls)), 0) FROM agent_messages
				WHERE created_at >= $1 AND role = 'assistant' AND jsonb_typeof(tool_calls) = 'array'),
			(SELECT count(*) FROM plan_executions WHERE continued_at >= $1)`, since).
		Scan(&a.Sessions, &a.Active, &a.ToolCalls, &a.Continuations)
	if err != nil {
		return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT role, count(*) FROM agent_messages WHERE created_at >= $1 GROUP BY role`, since)
	if err != nil {
		return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
	}
	for rows.Next() {
		var role string
		var n int
		if err := rows.Scan(&role, &n); err != nil {
			rows.Close()
			return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
		}
		a.Messages[role] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT a.id, a.room_id, a.thread_id, a.title,
			(SELECT count(*) FROM agent_messages m WHERE m.session_id = a.id), a.updated_at
		FROM agent_sessions a ORDER BY a.updated_at DESC LIMIT $1`, recent)
	if err != nil {
		return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var x AgentSessionSummary
		if err := rows.Scan(&x.ID, &x.RoomID, &x.ThreadID, &x.Title, &x.Messages, &x.UpdatedAt); err != nil {
			return AgentActivity{}, fmt.Errorf("agent activity: %w", err)
		}
		a.Recent = append(a.Recent, x)
	}
	return a, rows.Err()
}

// ExecutionsVia returns the newest executions requested through any of the
// given routes (agent, mcp, chat, ...), newest first.
func (s *Store) ExecutionsVia(ctx context.Context, via []string, limit int) ([]Execution, error) {
	if limit <= 0 {
		limit = 10
	}
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE x.requested_via = ANY($1) ORDER BY x.created_at DESC LIMIT $2`, via, limit)
	if err != nil {
		return nil, fmt.Errorf("executions via %v: %w", via, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("executions via %v: %w", via, err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}
