package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AgentSession is one conversation of the agent: a room, or a thread in it.
type AgentSession struct {
	ID uuid.UUID
	// RoomID is the Matrix room the session speaks in.
	RoomID string
	// ThreadID is the thread's root event, or "" for the room's main
	// timeline.
	ThreadID string
	Title    string
	// Summary stands in for the messages marked summarized.
	Summary string
	// LastOperatorApprovalAt is when an operator last approved a step this
	// session asked for; auto-continuation only runs shortly after one.
	LastOperatorApprovalAt *time.Time
	CreatedAt              time.Time
	UpdatedAt              time.Time
}

// AgentRole is who a stored agent message is from.
type AgentRole string

// The agent message roles. RoleNote is a message the system injects after
// the replayed history, such as an execution's result; it is not the
// operator speaking.
const (
	AgentRoleSystem    AgentRole = "system"
	AgentRoleUser      AgentRole = "user"
	AgentRoleAssistant AgentRole = "assistant"
	AgentRoleTool      AgentRole = "tool"
	AgentRoleNote      AgentRole = "note"
)

func (r AgentRole) valid() bool {
	switch r {
	case AgentRoleSystem, AgentRoleUser, AgentRoleAssistant, AgentRoleTool, AgentRoleNote:
		return true
	}
	return false
}

// AgentMessageCap is the most bytes of content a stored agent message
// holds. Longer content is stored once as a blob and the message keeps an
// excerpt that names it.
const AgentMessageCap = 16 << 10

// Sizes of the excerpt kept in a message whose content went to a blob. The
// tail gets more room: that is where a failing command says why.
const (
	excerptHead = 4 << 10
	excerptTail = 8 << 10
)

// AgentMessage is one stored message of a session.
type AgentMessage struct {
	// ID orders the messages of a session; 0 until stored.
	ID        int64
	SessionID uuid.UUID
	Role      AgentRole
	// Content is at most AgentMessageCap bytes once stored. When the
	// original was longer, it is a reference line and an excerpt, and
	// BlobSHA256 names the full text (see AgentBlob).
	Content string
	// ToolCalls is the assistant's tool calls as JSON, or nil. Postgres
	// stores it as jsonb, so it reads back normalised, not byte for byte.
	ToolCalls json.RawMessage
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	BlobSHA256 string
	CreatedAt  time.Time
}

// ExecutionLink ties an execution to the agent session that asked for it.
type ExecutionLink struct {
	ExecutionID uuid.UUID
	SessionID   uuid.UUID
	// ChainDepth counts the automatic continuations that led to the
	// request: 0 when an operator's message started it.
	ChainDepth int
	// ContinuedAt is when the execution's result re-invoked the session;
	// nil until then.
	ContinuedAt *time.Time
	CreatedAt   time.Time
}

const agentSessionColumns = `id, room_id, thread_id, title, summary, last_operator_approval_at, created_at, updated_at`

func scanAgentSession(row pgx.Row) (AgentSession, error) {
	var a AgentSession
	err := row.Scan(&a.ID, &a.RoomID, &a.ThreadID, &a.Title, &a.Summary, &a.LastOperatorApprovalAt, &a.CreatedAt, &a.UpdatedAt)
	return a, interpretError(err)
}

// EnsureAgentSession returns the session of a room, or of a thread in it
// when threadID is not empty, creating it on first use. Concurrent callers
// get the same session.
func (s *Store) EnsureAgentSession(ctx context.Context, roomID, threadID string) (AgentSession, error) {
	if roomID == "" {
		return AgentSession{}, errors.New("ensure agent session: room id is empty")
	}
	now := s.now()
	_, err := s.pool.Exec(ctx, `INSERT INTO agent_sessions (id, room_id, thread_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (room_id, thread_id) DO NOTHING`, newID(), roomID, threadID, now)
	if err != nil {
		return AgentSession{}, fmt.Errorf("ensure agent session for %s: %w", roomID, err)
	}
	a, err := scanAgentSession(s.pool.QueryRow(ctx, `SELECT `+agentSessionColumns+` FROM agent_sessions
		WHERE room_id = $1 AND thread_id = $2`, roomID, threadID))
	if err != nil {
		return AgentSession{}, fmt.Errorf("ensure agent session for %s: %w", roomID, err)
	}
	return a, nil
}

// AgentSession loads a session by id.
func (s *Store) AgentSession(ctx context.Context, id uuid.UUID) (AgentSession, error) {
	a, err := scanAgentSession(s.pool.QueryRow(ctx, `SELECT `+agentSessionColumns+` FROM agent_sessions WHERE id = $1`, id))
	if err != nil {
		return AgentSession{}, fmt.Errorf("load agent session %s: %w", id, err)
	}
	return a, nil
}

// SetAgentSessionTitle names a session.
func (s *Store) SetAgentSessionTitle(ctx context.Context, id uuid.UUID, title string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE agent_sessions SET title = $2, updated_at = $3 WHERE id = $1`,
		id, sanitizeText(title), s.now())
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set title of agent session %s: %w", id, err)
	}
	return nil
}

// SummarizeAgentSession replaces the session's summary and marks every
// message up to and including throughID as summarized, in one transaction,
// so AgentMessages stops returning them. The caller picks throughID so that
// no tool call is separated from its result.
func (s *Store) SummarizeAgentSession(ctx context.Context, id uuid.UUID, summary string, throughID int64) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE agent_sessions SET summary = $2, updated_at = $3 WHERE id = $1`,
			id, sanitizeText(summary), s.now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		_, err = tx.Exec(ctx, `UPDATE agent_messages SET summarized = true
			WHERE session_id = $1 AND id <= $2 AND NOT summarized`, id, throughID)
		return err
	})
	if err != nil {
		return fmt.Errorf("summarize agent session %s: %w", id, err)
	}
	return nil
}

// RecordOperatorApproval notes that an operator approved a step of the
// session at the given time. The recorded time never moves backwards.
func (s *Store) RecordOperatorApproval(ctx context.Context, id uuid.UUID, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE agent_sessions
		SET last_operator_approval_at = greatest(last_operator_approval_at, $2), updated_at = $3
		WHERE id = $1`, id, at, s.now())
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record operator approval in agent session %s: %w", id, err)
	}
	return nil
}

// AppendAgentMessages stores messages at the end of a session, in order and
// in one transaction, and returns them as stored. Content longer than
// AgentMessageCap is kept once in agent_blobs, keyed by its sha256, and
// the message holds a reference line with the head and tail of it.
// Invalid UTF-8 and NUL bytes, which Postgres text refuses, are replaced
// with U+FFFD first.
func (s *Store) AppendAgentMessages(ctx context.Context, sessionID uuid.UUID, msgs ...AgentMessage) ([]AgentMessage, error) {
	out := make([]AgentMessage, len(msgs))
	for i, m := range msgs {
		if !m.Role.valid() {
			return nil, fmt.Errorf("append agent messages to %s: message %d has unknown role %q", sessionID, i, m.Role)
		}
		if len(m.ToolCalls) > 0 && !json.Valid(m.ToolCalls) {
			return nil, fmt.Errorf("append agent messages to %s: message %d has tool calls that are not JSON", sessionID, i)
		}
		m.SessionID = sessionID
		m.ToolCallID = sanitizeText(m.ToolCallID)
		m.Content = sanitizeText(m.Content)
		m.BlobSHA256 = ""
		out[i] = m
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		tag, err := tx.Exec(ctx, `UPDATE agent_sessions SET updated_at = $2 WHERE id = $1`, sessionID, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		for i := range out {
			m := &out[i]
			if len(m.Content) > AgentMessageCap {
				sum := sha256.Sum256([]byte(m.Content))
				m.BlobSHA256 = hex.EncodeToString(sum[:])
				if _, err := tx.Exec(ctx, `INSERT INTO agent_blobs (sha256, content, created_at) VALUES ($1, $2, $3)
					ON CONFLICT (sha256) DO NOTHING`, m.BlobSHA256, m.Content, now); err != nil {
					return err
				}
				m.Content = excerpt(m.Content, m.BlobSHA256)
			}
			err := tx.QueryRow(ctx, `INSERT INTO agent_messages (session_id, role, content, tool_calls, tool_call_id, blob_sha256, created_at)
				VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7) RETURNING id, created_at`,
				sessionID, m.Role, m.Content, nullJSON(m.ToolCalls), m.ToolCallID, m.BlobSHA256, now).Scan(&m.ID, &m.CreatedAt)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append agent messages to %s: %w", sessionID, err)
	}
	return out, nil
}

// AgentMessages returns the session's messages that no summary covers yet,
// oldest first.
func (s *Store) AgentMessages(ctx context.Context, sessionID uuid.UUID) ([]AgentMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, session_id, role, content, tool_calls, coalesce(tool_call_id, ''),
			coalesce(blob_sha256, ''), created_at
		FROM agent_messages WHERE session_id = $1 AND NOT summarized ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list agent messages of %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []AgentMessage
	for rows.Next() {
		var m AgentMessage
		var calls []byte
		if err := rows.Scan(&m.ID, &m.SessionID, &m.Role, &m.Content, &calls, &m.ToolCallID, &m.BlobSHA256, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("list agent messages of %s: %w", sessionID, err)
		}
		if calls != nil {
			m.ToolCalls = json.RawMessage(calls)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent messages of %s: %w", sessionID, err)
	}
	return out, nil
}

// AgentBlob returns the full content stored under a sha256 (hex).
func (s *Store) AgentBlob(ctx context.Context, sha string) (string, error) {
	var content string
	err := s.pool.QueryRow(ctx, `SELECT content FROM agent_blobs WHERE sha256 = $1`, strings.ToLower(sha)).Scan(&content)
	if err != nil {
		return "", fmt.Errorf("load agent blob %s: %w", sha, interpretError(err))
	}
	return content, nil
}

const executionLinkColumns = `execution_id, session_id, chain_depth, continued_at, created_at`

func scanExecutionLink(row pgx.Row) (ExecutionLink, error) {
	var l ExecutionLink
	err := row.Scan(&l.ExecutionID, &l.SessionID, &l.ChainDepth, &l.ContinuedAt, &l.CreatedAt)
	return l, interpretError(err)
}

// LinkExecution records that a session asked for an existing execution,
// so its result can re-invoke the session. Linking an execution again
// changes nothing and returns the first link. ErrNotFound means the
// execution or the session does not exist. A new execution is better
// linked as it is created, through NewExecution.Session.
func (s *Store) LinkExecution(ctx context.Context, executionID, sessionID uuid.UUID, chainDepth int) (ExecutionLink, error) {
	if err := linkExecution(ctx, s.pool, executionID, SessionLink{SessionID: sessionID, ChainDepth: chainDepth}, s.now()); err != nil {
		return ExecutionLink{}, fmt.Errorf("link execution %s to agent session %s: %w", executionID, sessionID, err)
	}
	return s.ExecutionLink(ctx, executionID)
}

// querier is what a pool and a transaction share.
type querier interface {
	rowQuerier
	execer
}

// linkExecution inserts the plan_executions row. ErrNotFound means the
// execution or the session does not exist.
func linkExecution(ctx context.Context, q querier, executionID uuid.UUID, l SessionLink, now time.Time) error {
	tag, err := q.Exec(ctx, `INSERT INTO plan_executions (execution_id, session_id, chain_depth, created_at)
		SELECT $1, id, $3, $4 FROM agent_sessions WHERE id = $2
		ON CONFLICT (execution_id) DO NOTHING`, executionID, l.SessionID, l.ChainDepth, now)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23503": // foreign_key_violation: no such execution
		return ErrNotFound
	case err != nil:
		return err
	case tag.RowsAffected() == 0:
		// Either the link exists already or the session does not.
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_sessions WHERE id = $1)`, l.SessionID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
	}
	return nil
}

// ExecutionLink finds the session that asked for an execution;
// ErrNotFound when no session did.
func (s *Store) ExecutionLink(ctx context.Context, executionID uuid.UUID) (ExecutionLink, error) {
	l, err := scanExecutionLink(s.pool.QueryRow(ctx, `SELECT `+executionLinkColumns+` FROM plan_executions
		WHERE execution_id = $1`, executionID))
	if err != nil {
		return ExecutionLink{}, fmt.Errorf("agent session of execution %s: %w", executionID, err)
	}
	return l, nil
}

// ClaimContinuation marks an execution's result as continued and returns
// its link. Only the first caller gets true; a later caller, or one for an
// execution no session asked for, gets false. Claim before re-invoking the
// agent: a result that is delivered twice must not run the session twice.
func (s *Store) ClaimContinuation(ctx context.Context, executionID uuid.UUID) (ExecutionLink, bool, error) {
	l, err := scanExecutionLink(s.pool.QueryRow(ctx, `UPDATE plan_executions SET continued_at = $2
		WHERE execution_id = $1 AND continued_at IS NULL
		RETURNING `+executionLinkColumns, executionID, s.now()))
	if errors.Is(err, ErrNotFound) {
		return ExecutionLink{}, false, nil
	}
	if err != nil {
		return ExecutionLink{}, false, fmt.Errorf("claim continuation of execution %s: %w", executionID, err)
	}
	return l, true, nil
}

// sanitizeText makes s storable as Postgres text: valid UTF-8 without NUL.
func sanitizeText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// excerpt keeps the head and the tail of content, cut at line ends where
// one is near, under a line that names the blob holding all of it. The
// result is well under AgentMessageCap.
func excerpt(content, sha string) string {
	head := content[:runeFloor(content, excerptHead)]
	if i := strings.LastIndexByte(head, '\n'); i >= len(head)/2 {
		head = head[:i+1]
	}
	tail := content[runeCeil(content, len(content)-excerptTail):]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%d bytes in full, stored once as blob sha256:%s; only the head and the tail are kept here]\n", len(content), sha)
	b.WriteString(head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "[… %d bytes left out …]\n", len(content)-len(head)-len(tail))
	b.WriteString(tail)
	return b.String()
}

// runeFloor returns the largest i <= n that starts a rune of s.
func runeFloor(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// runeCeil returns the smallest i >= n that starts a rune of s.
func runeCeil(s string, n int) int {
	if n <= 0 {
		return 0
	}
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return n
}
