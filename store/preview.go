package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrPreviewApplied is returned by ApplyPreview when the execution's
// preview was already recorded: a second answer is a replay.
var ErrPreviewApplied = errors.New("preview already applied")

// Preview is what a plan's card shows under "Will change:" from the
// actuator's read-only look-ahead.
type Preview struct {
	ExecutionID uuid.UUID
	RequestedAt time.Time
	// Result is the actuator's verified answer; nil while it is awaited.
	Result    json.RawMessage
	AppliedAt *time.Time
}

// RequestPreview records that a preview was asked for. Asking again
// keeps the first request's time.
func (s *Store) RequestPreview(ctx context.Context, id uuid.UUID, at time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO execution_previews (execution_id, requested_at) VALUES ($1, $2)
		ON CONFLICT (execution_id) DO NOTHING`, id, at)
	if err != nil {
		return fmt.Errorf("request preview of %s: %w", id, err)
	}
	return nil
}

// ExecutionPreview returns an execution's preview, or ErrNotFound when
// none was asked for.
func (s *Store) ExecutionPreview(ctx context.Context, id uuid.UUID) (Preview, error) {
	p := Preview{ExecutionID: id}
	err := s.pool.QueryRow(ctx, `SELECT requested_at, preview, applied_at FROM execution_previews WHERE execution_id = $1`, id).
		Scan(&p.RequestedAt, &p.Result, &p.AppliedAt)
	if err != nil {
		return Preview{}, interpretError(err)
	}
	return p, nil
}

// ApplyPreview records the actuator's answer once, with its audit row,
// and tells the execution's listeners so its card is edited. It returns
// ErrNotFound when no preview was asked for and ErrPreviewApplied when
// one was already recorded.
func (s *Store) ApplyPreview(ctx context.Context, id uuid.UUID, result json.RawMessage, a AuditEntry) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var applied *time.Time
		err := tx.QueryRow(ctx, `SELECT applied_at FROM execution_previews WHERE execution_id = $1 FOR UPDATE`, id).Scan(&applied)
		if err != nil {
			return interpretError(err)
		}
		if applied != nil {
			return ErrPreviewApplied
		}
		if _, err := tx.Exec(ctx, `UPDATE execution_previews SET preview = $2, applied_at = $3 WHERE execution_id = $1`,
			id, []byte(result), s.now()); err != nil {
			return fmt.Errorf("apply preview of %s: %w", id, err)
		}
		a.ExecutionID = &id
		if err := audit(ctx, tx, a); err != nil {
			return err
		}
		var state ExecutionState
		if err := tx.QueryRow(ctx, `SELECT state FROM executions WHERE id = $1`, id).Scan(&state); err != nil {
			return interpretError(err)
		}
		return notify(ctx, tx, id, state)
	})
}
