package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExecutionQuery selects a page of executions, newest first.
type ExecutionQuery struct {
	States []ExecutionState
	// RiskClass, Target (a slug) and RequestedBy keep exact matches;
	// empty keeps any.
	RiskClass   string
	Target      string
	RequestedBy string
	// After continues a listing past the last row of a previous page.
	After *ExecutionCursor
	// Limit bounds the page; 0 means 50.
	Limit int
}

// ExecutionCursor is where a page of executions ended.
type ExecutionCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ExecutionPage returns one page of executions, newest first, and the
// cursor of the next page (nil on the last). Paging is by (created_at, id),
// so rows added meanwhile never shift a page.
func (s *Store) ExecutionPage(ctx context.Context, q ExecutionQuery) ([]Execution, *ExecutionCursor, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	states := make([]string, len(q.States))
	for i, st := range q.States {
		states[i] = string(st)
	}
	var afterAt *time.Time
	var afterID *uuid.UUID
	if q.After != nil {
		afterAt, afterID = &q.After.CreatedAt, &q.After.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE (cardinality($1::text[]) = 0 OR x.state = ANY($1))
		  AND ($2 = '' OR x.risk_class = $2)
		  AND ($3 = '' OR x.target_slug = $3)
		  AND ($4 = '' OR x.requested_by = $4)
		  AND ($5::timestamptz IS NULL OR (x.created_at, x.id) < ($5, $6::uuid))
		ORDER BY x.created_at DESC, x.id DESC LIMIT $7`,
		states, q.RiskClass, q.Target, q.RequestedBy, afterAt, afterID, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("page executions: %w", err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("page executions: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("page executions: %w", err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &ExecutionCursor{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}

// ExecutionsTouching returns the newest executions aimed at an entity, by
// id or by slug (an execution outlives its target's row).
func (s *Store) ExecutionsTouching(ctx context.Context, id uuid.UUID, slug string, limit int) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE x.target_id = $1 OR x.target_slug = $2
		ORDER BY x.created_at DESC, x.id DESC LIMIT $3`, id, slug, limit)
	if err != nil {
		return nil, fmt.Errorf("executions on %s: %w", slug, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("executions on %s: %w", slug, err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// AuditRecord is an audit row with its time and the slugs it concerns.
type AuditRecord struct {
	AuditEntry
	At time.Time
	// EntitySlug names the row's entity, or the target of its execution.
	EntitySlug string
	// SessionID is the agent session behind the row's execution, if any.
	SessionID *uuid.UUID
}

// AuditQuery selects a page of the audit trail, newest first.
type AuditQuery struct {
	// Actor and Action keep exact matches; Entity keeps rows about an
	// entity (by slug) or about an execution aimed at it.
	Actor  string
	Action string
	Entity string
	// ExecutionID keeps one execution's rows.
	ExecutionID *uuid.UUID
	// From and To bound the time; zero leaves that side open.
	From, To time.Time
	// Before continues a listing below an id from a previous page.
	Before int64
	// Limit bounds the page; 0 means 100.
	Limit int
	// Oldest lists oldest first (for one execution's timeline).
	Oldest bool
}

// AuditPage returns one page of the audit trail and the id to continue
// below (0 on the last page).
func (s *Store) AuditPage(ctx context.Context, q AuditQuery) ([]AuditRecord, int64, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var from, to *time.Time
	if !q.From.IsZero() {
		from = &q.From
	}
	if !q.To.IsZero() {
		to = &q.To
	}
	order := "DESC"
	if q.Oldest {
		order = "ASC"
	}
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.actor, a.action, a.execution_id, a.entity_id, a.detail, a.at,
			coalesce(e.slug, x.target_slug, ''), p.session_id
		FROM audit_log a
		LEFT JOIN entities e ON e.id = a.entity_id
		LEFT JOIN executions x ON x.id = a.execution_id
		LEFT JOIN plan_executions p ON p.execution_id = a.execution_id
		WHERE ($1 = '' OR a.actor = $1)
		  AND ($2 = '' OR a.action = $2)
		  AND ($3 = '' OR e.slug = $3 OR x.target_slug = $3)
		  AND ($4::uuid IS NULL OR a.execution_id = $4)
		  AND ($5::timestamptz IS NULL OR a.at >= $5)
		  AND ($6::timestamptz IS NULL OR a.at < $6)
		  AND ($7 = 0 OR a.id < $7)
		ORDER BY a.id `+order+` LIMIT $8`,
		q.Actor, q.Action, q.Entity, q.ExecutionID, from, to, q.Before, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("page audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditRecord, error) {
		var r AuditRecord
		err := row.Scan(&r.ID, &r.Actor, &r.Action, &r.ExecutionID, &r.EntityID, &r.Detail, &r.At, &r.EntitySlug, &r.SessionID)
		return r, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("page audit: %w", err)
	}
	if len(out) <= limit {
		return out, 0, nil
	}
	out = out[:limit]
	return out, out[limit-1].ID, nil
}

// SignalView is a signal with the check behind it and how often it came
// back.
type SignalView struct {
	Signal
	// Raises is how many signals of the same kind on the same entity were
	// raised since the flap window began, this one included.
	Raises        int
	CheckSlug     string
	CheckKind     string
	CheckHealth   string
	CheckDetail   string
	CheckResultAt *time.Time
}

// SignalHistory returns the open signals and those raised or resolved
// since a time, open first, then by severity, newest first; each counts
// the raises of its kind on its entity since flapSince.
func (s *Store) SignalHistory(ctx context.Context, since, flapSince time.Time, limit int) ([]SignalView, error) {
	if limit <= 0 {
		limit = 200
	}
	rows, err := s.pool.Query(ctx, `WITH w AS (
			SELECT g.*, count(*) FILTER (WHERE g.raised_at >= $2) OVER (PARTITION BY g.entity_id, g.kind) AS raises
			FROM signals g
			WHERE g.state IN ('raised', 'acknowledged', 'acting') OR g.raised_at >= least($1, $2) OR g.resolved_at >= $1)
		SELECT w.id, e.slug, w.kind, w.severity, w.state, w.summary, w.raised_at, w.resolved_at, w.raises,
			coalesce(c.slug, ''), coalesce(c.kind, ''), coalesce(c.last_health, ''), coalesce(c.last_detail, ''),
			c.last_result_at
		FROM w JOIN entities e ON e.id = w.entity_id
		LEFT JOIN check_defs c ON c.id = w.check_id
		WHERE w.state IN ('raised', 'acknowledged', 'acting') OR w.raised_at >= $1 OR w.resolved_at >= $1
		ORDER BY w.state IN ('raised', 'acknowledged', 'acting') DESC,
			array_position(ARRAY['critical', 'warning', 'info'], w.severity), w.raised_at DESC
		LIMIT $3`, since, flapSince, limit)
	if err != nil {
		return nil, fmt.Errorf("signal history: %w", err)
	}
	defer rows.Close()
	var out []SignalView
	for rows.Next() {
		var v SignalView
		if err := rows.Scan(&v.ID, &v.EntitySlug, &v.Kind, &v.Severity, &v.State, &v.Summary, &v.RaisedAt, &v.ResolvedAt, &v.Raises,
			&v.CheckSlug, &v.CheckKind, &v.CheckHealth, &v.CheckDetail, &v.CheckResultAt); err != nil {
			return nil, fmt.Errorf("signal history: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// SessionView is an agent session with what it did.
type SessionView struct {
	AgentSession
	Messages   int
	ToolCalls  int
	Executions int
}

// AgentSessionPage returns the most recently updated sessions, up to
// limit, with message, tool call and execution counts, in one query.
func (s *Store) AgentSessionPage(ctx context.Context, limit int) ([]SessionView, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.room_id, a.thread_id, a.title, a.summary, a.last_operator_approval_at,
			a.created_at, a.updated_at,
			(SELECT count(*) FROM agent_messages m WHERE m.session_id = a.id),
			(SELECT coalesce(sum(jsonb_array_length(m.tool_calls)), 0) FROM agent_messages m
				WHERE m.session_id = a.id AND jsonb_typeof(m.tool_calls) = 'array'),
			(SELECT count(*) FROM plan_executions p WHERE p.session_id = a.id)
		FROM agent_sessions a ORDER BY a.updated_at DESC, a.id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("page agent sessions: %w", err)
	}
	defer rows.Close()
	var out []SessionView
	for rows.Next() {
		var v SessionView
		if err := rows.Scan(&v.ID, &v.RoomID, &v.ThreadID, &v.Title, &v.Summary, &v.LastOperatorApprovalAt,
			&v.CreatedAt, &v.UpdatedAt, &v.Messages, &v.ToolCalls, &v.Executions); err != nil {
			return nil, fmt.Errorf("page agent sessions: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// TurnMessage is one stored message of a session, cut for display: its
// size, the head of its content and, for the assistant, its tool calls.
type TurnMessage struct {
	ID         int64
	Role       AgentRole
	Bytes      int
	BlobBytes  int
	Head       string
	ToolCalls  json.RawMessage
	ToolCallID string
	Summarized bool
	CreatedAt  time.Time
}

// SessionTurns returns a session's messages oldest first, each with its
// size and at most headBytes of its content.
func (s *Store) SessionTurns(ctx context.Context, sessionID uuid.UUID, headBytes int) ([]TurnMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT m.id, m.role, octet_length(m.content), coalesce(octet_length(b.content), 0),
			left(m.content, $2), m.tool_calls, coalesce(m.tool_call_id, ''), m.summarized, m.created_at
		FROM agent_messages m LEFT JOIN agent_blobs b ON b.sha256 = m.blob_sha256
		WHERE m.session_id = $1 ORDER BY m.id`, sessionID, headBytes)
	if err != nil {
		return nil, fmt.Errorf("turns of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []TurnMessage
	for rows.Next() {
		var m TurnMessage
		if err := rows.Scan(&m.ID, &m.Role, &m.Bytes, &m.BlobBytes, &m.Head, &m.ToolCalls, &m.ToolCallID, &m.Summarized, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("turns of session %s: %w", sessionID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// SessionExecutions returns the executions a session asked for, oldest
// first, with their links.
func (s *Store) SessionExecutions(ctx context.Context, sessionID uuid.UUID) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		JOIN plan_executions pe ON pe.execution_id = x.id
		WHERE pe.session_id = $1 ORDER BY x.created_at, x.id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("executions of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("executions of session %s: %w", sessionID, err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// OpsCounts is what /metrics reports from the database.
type OpsCounts struct {
	// Executions counts executions by state and risk class.
	Executions []ExecutionCount
	// OpenSignals counts open signals by severity.
	OpenSignals map[string]int
	// Health counts live entities by type and health (stale included).
	Health []HealthCount
}

// ExecutionCount is how many executions have one state and risk class.
type ExecutionCount struct {
	State     ExecutionState
	RiskClass string
	Count     int
}

// CountOps reads the counts /metrics reports, in three queries.
func (s *Store) CountOps(ctx context.Context) (OpsCounts, error) {
	c := OpsCounts{OpenSignals: map[string]int{}}
	rows, err := s.pool.Query(ctx, `SELECT state, risk_class, count(*) FROM executions GROUP BY state, risk_class ORDER BY state, risk_class`)
	if err != nil {
		return OpsCounts{}, fmt.Errorf("count executions: %w", err)
	}
	c.Executions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ExecutionCount, error) {
		var x ExecutionCount
		err := row.Scan(&x.State, &x.RiskClass, &x.Count)
		return x, err
	})
	if err != nil {
		return OpsCounts{}, fmt.Errorf("count executions: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT severity, count(*) FROM signals WHERE state IN ('raised', 'acknowledged', 'acting') GROUP BY severity`)
	if err != nil {
		return OpsCounts{}, fmt.Errorf("count signals: %w", err)
	}
	for rows.Next() {
		var sev string
		var n int
		if err := rows.Scan(&sev, &n); err != nil {
			rows.Close()
			return OpsCounts{}, fmt.Errorf("count signals: %w", err)
		}
		c.OpenSignals[sev] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return OpsCounts{}, fmt.Errorf("count signals: %w", err)
	}
	if c.Health, err = s.HealthCounts(ctx); err != nil {
		return OpsCounts{}, err
	}
	return c, nil
}
