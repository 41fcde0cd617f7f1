package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// MarkEventHandled records that the bot handled a Matrix event. It returns
// false when the event was already recorded, so the caller skips it.
func (s *Store) MarkEventHandled(ctx context.Context, roomID, eventID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO bot_handled_events (event_id, room_id, handled_at, done_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT DO NOTHING`, eventID, roomID, s.now())
	if err != nil {
		return false, fmt.Errorf("mark event %s handled: %w", eventID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimEvent claims an event whose handling may safely run again, such
// as a decision: it reports true for an event never claimed, and for one
// claimed by a handler that never finished (the bot died mid-way), so
// that a replayed sync handles it again. FinishEvent ends the claim.
func (s *Store) ClaimEvent(ctx context.Context, roomID, eventID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO bot_handled_events (event_id, room_id, handled_at) VALUES ($1, $2, $3)
		ON CONFLICT (event_id) DO UPDATE SET handled_at = EXCLUDED.handled_at WHERE bot_handled_events.done_at IS NULL`,
		eventID, roomID, s.now())
	if err != nil {
		return false, fmt.Errorf("claim event %s: %w", eventID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FinishEvent records that a claimed event's handling ended.
func (s *Store) FinishEvent(ctx context.Context, eventID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE bot_handled_events SET done_at = $2 WHERE event_id = $1`, eventID, s.now()); err != nil {
		return fmt.Errorf("finish event %s: %w", eventID, err)
	}
	return nil
}

// EventHandled reports whether the bot already handled an event.
func (s *Store) EventHandled(ctx context.Context, eventID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM bot_handled_events WHERE event_id = $1)`, eventID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("event %s handled: %w", eventID, err)
	}
	return ok, nil
}

// BotState reads a bot setting; ErrNotFound when unset.
func (s *Store) BotState(ctx context.Context, key string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT value FROM bot_state WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("bot state %s: %w", key, err)
	}
	return v, nil
}

// SetBotStateOnce stores value under key unless the key is set, and returns
// the value that is stored.
func (s *Store) SetBotStateOnce(ctx context.Context, key, value string) (string, error) {
	_, err := s.pool.Exec(ctx, `INSERT INTO bot_state (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`, key, value)
	if err != nil {
		return "", fmt.Errorf("bot state %s: %w", key, err)
	}
	return s.BotState(ctx, key)
}

// ClaimNotice records that a notice of kind is being sent for an execution.
// Only the first caller gets true.
func (s *Store) ClaimNotice(ctx context.Context, executionID uuid.UUID, kind string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO bot_notices (execution_id, kind, sent_at) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, executionID, kind, s.now())
	if err != nil {
		return false, fmt.Errorf("claim %s notice for %s: %w", kind, executionID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetNoticeEvent records the event a claimed notice was sent as, for a
// notice that is edited later (the ops room's copy of a card).
func (s *Store) SetNoticeEvent(ctx context.Context, executionID uuid.UUID, kind, eventID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE bot_notices SET event_id = $3 WHERE execution_id = $1 AND kind = $2`, executionID, kind, eventID); err != nil {
		return fmt.Errorf("record %s notice for %s: %w", kind, executionID, err)
	}
	return nil
}

// NoticeEvent returns the event a notice was sent as, or "" when it was
// not sent or its event was not recorded.
func (s *Store) NoticeEvent(ctx context.Context, executionID uuid.UUID, kind string) (string, error) {
	var eventID *string
	err := s.pool.QueryRow(ctx, `SELECT event_id FROM bot_notices WHERE execution_id = $1 AND kind = $2`, executionID, kind).Scan(&eventID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && eventID == nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s notice for %s: %w", kind, executionID, err)
	}
	return *eventID, nil
}

// ReleaseNotice gives back a claim whose notice could not be sent, so that
// a later try may claim it again.
func (s *Store) ReleaseNotice(ctx context.Context, executionID uuid.UUID, kind string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM bot_notices WHERE execution_id = $1 AND kind = $2`, executionID, kind); err != nil {
		return fmt.Errorf("release %s notice for %s: %w", kind, executionID, err)
	}
	return nil
}
