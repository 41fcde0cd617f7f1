package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SessionDeletedAction is the audit action that records a deleted agent
// session; the audit log keeps it, and every entry it had before.
const SessionDeletedAction = "agent.session_deleted"

// ForgottenSession is what deleting an agent session removed.
type ForgottenSession struct {
	ID     uuid.UUID
	RoomID string
	Title  string
	// Messages is how many stored messages (the transcript) went.
	Messages int
	// Blobs is how many stored tool outputs went: those no other
	// session's messages name.
	Blobs int
}

// DeleteAgentSession deletes an agent session's transcript: the session,
// its messages, the stored tool outputs only it referred to, and the
// links that would have continued it when an execution ends. The
// executions it asked for stay, and so does the audit log, which gains one
// entry naming who deleted it and why (reason: "operator", "mcp",
// "retention"). ErrNotFound means there is no such session.
func (s *Store) DeleteAgentSession(ctx context.Context, id uuid.UUID, actor, reason string) (ForgottenSession, error) {
	var f ForgottenSession
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		f, err = deleteAgentSession(ctx, tx, id, actor, reason)
		return err
	})
	if err != nil {
		return ForgottenSession{}, fmt.Errorf("delete agent session %s: %w", id, err)
	}
	return f, nil
}

// PruneAgentSessions deletes, as DeleteAgentSession does, every agent
// session untouched since before, at most limit of them, oldest first, and
// returns how many went. A session a turn is still writing to has just
// been touched, so it is never among them.
func (s *Store) PruneAgentSessions(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM agent_sessions WHERE updated_at < $1
			ORDER BY updated_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, before, limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := deleteAgentSession(ctx, tx, id, "nomos", "retention"); err != nil {
				return fmt.Errorf("session %s: %w", id, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune agent sessions before %s: %w", before.Format(time.RFC3339), err)
	}
	return n, nil
}

func deleteAgentSession(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string) (ForgottenSession, error) {
	f := ForgottenSession{ID: id}
	err := tx.QueryRow(ctx, `SELECT room_id, title, (SELECT count(*) FROM agent_messages WHERE session_id = $1)
		FROM agent_sessions WHERE id = $1 FOR UPDATE`, id).Scan(&f.RoomID, &f.Title, &f.Messages)
	if err != nil {
		return ForgottenSession{}, interpretError(err)
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT blob_sha256 FROM agent_messages WHERE session_id = $1 AND blob_sha256 IS NOT NULL`, id)
	if err != nil {
		return ForgottenSession{}, err
	}
	blobs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return ForgottenSession{}, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM plan_executions WHERE session_id = $1`, id); err != nil {
		return ForgottenSession{}, err
	}
	// The messages go with their session (ON DELETE CASCADE).
	if _, err := tx.Exec(ctx, `DELETE FROM agent_sessions WHERE id = $1`, id); err != nil {
		return ForgottenSession{}, err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM agent_blobs b WHERE b.sha256 = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.blob_sha256 = b.sha256)`, blobs)
	if err != nil {
		return ForgottenSession{}, err
	}
	f.Blobs = int(tag.RowsAffected())
	err = audit(ctx, tx, AuditEntry{Actor: actor, Action: SessionDeletedAction, Detail: map[string]any{
		"session_id": id.String(), "room_id": f.RoomID, "reason": reason, "messages": f.Messages, "blobs": f.Blobs,
	}})
	return f, err
}
