package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A scheduled job's slots: the cron times at which it falls due. The
// leading bot claims each slot before it runs it (see migration
// schedule_runs), so a slot runs once across every bot.

// RegisterScheduleJob records job as seen at at, unless it is known
// already, and returns its last claimed slot: at for a new job, so that it
// never runs a slot from before it existed.
func (s *Store) RegisterScheduleJob(ctx context.Context, job string, at time.Time) (time.Time, error) {
	var last time.Time
	err := s.pool.QueryRow(ctx, `WITH ins AS (INSERT INTO schedule_runs (job, slot, claimed_at) VALUES ($1, $2, $3)
			ON CONFLICT (job) DO NOTHING RETURNING slot)
		SELECT slot FROM ins UNION ALL SELECT slot FROM schedule_runs WHERE job = $1 LIMIT 1`, job, at, s.now()).Scan(&last)
	if err != nil {
		return time.Time{}, fmt.Errorf("register scheduled job %s: %w", job, err)
	}
	return last, nil
}

// ClaimScheduleSlot claims slot for job in one conditional write: it wins
// only when slot is later than the job's last claimed slot, so of two
// bots, or of a bot and a late retry, exactly one runs it.
func (s *Store) ClaimScheduleSlot(ctx context.Context, job string, slot time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE schedule_runs SET prev_slot = slot, slot = $2, claimed_at = $3
		WHERE job = $1 AND slot < $2`, job, slot, s.now())
	if err != nil {
		return false, fmt.Errorf("claim slot %s of %s: %w", slot.UTC().Format(time.RFC3339), job, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseScheduleSlot gives back a claimed slot whose run is to be tried
// again: the job's last slot goes back to the one before it.
func (s *Store) ReleaseScheduleSlot(ctx context.Context, job string, slot time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE schedule_runs SET slot = prev_slot, prev_slot = NULL
		WHERE job = $1 AND slot = $2 AND prev_slot IS NOT NULL`, job, slot)
	if err != nil {
		return fmt.Errorf("release slot %s of %s: %w", slot.UTC().Format(time.RFC3339), job, err)
	}
	return nil
}

// LastScheduleSlot is job's last claimed slot; ErrNotFound for a job
// never registered.
func (s *Store) LastScheduleSlot(ctx context.Context, job string) (time.Time, error) {
	var last time.Time
	err := s.pool.QueryRow(ctx, `SELECT slot FROM schedule_runs WHERE job = $1`, job).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last slot of %s: %w", job, err)
	}
	return last, nil
}
