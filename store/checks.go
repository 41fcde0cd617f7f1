package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// DueCheck is a check definition whose time to run has come.
type DueCheck struct {
	ID       uuid.UUID
	Slug     string
	TargetID uuid.UUID
	Kind     string
	Spec     map[string]any
	Interval time.Duration
}

// ClaimDueChecks takes up to limit enabled checks that are due at now and
// moves each one's next run an interval on, in one statement, so two
// schedulers never send the same check for the same slot. A check never
// run before is due at once.
func (s *Store) ClaimDueChecks(ctx context.Context, now time.Time, limit int) ([]DueCheck, error) {
	rows, err := s.pool.Query(ctx, `UPDATE check_defs c
		SET next_run_at = $1::timestamptz + make_interval(secs => c.interval_seconds), last_run_at = $1
		FROM (SELECT id FROM check_defs
		      WHERE enabled AND (next_run_at IS NULL OR next_run_at <= $1)
		      ORDER BY next_run_at NULLS FIRST, slug
		      LIMIT $2 FOR UPDATE SKIP LOCKED) due
		WHERE c.id = due.id
		RETURNING c.id, c.slug, c.target_id, c.kind, c.spec, c.interval_seconds`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim due checks: %w", err)
	}
	defer rows.Close()
	var out []DueCheck
	for rows.Next() {
		var c DueCheck
		var spec []byte
		var secs int
		if err := rows.Scan(&c.ID, &c.Slug, &c.TargetID, &c.Kind, &spec, &secs); err != nil {
			return nil, fmt.Errorf("claim due checks: %w", err)
		}
		if err := json.Unmarshal(spec, &c.Spec); err != nil {
			return nil, fmt.Errorf("claim due checks: spec of %s: %w", c.Slug, err)
		}
		c.Interval = time.Duration(secs) * time.Second
		out = append(out, c)
	}
	return out, rows.Err()
}

// StaleAfter is how many of its shortest check interval a target may go
// without a result before its health is marked stale.
const StaleAfter = 3

// MarkStale marks stale every checked target whose last result is older
// than StaleAfter times its shortest enabled check interval: a probe that
// stopped answering must not leave an old "healthy" on show. It returns
// how many targets it marked.
func (s *Store) MarkStale(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE entity_status st
		SET health = 'stale', updated_at = $1,
		    detail = 'no check result since ' || to_char(st.last_check_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen: ' || st.health
		FROM (SELECT target_id, min(interval_seconds) AS secs FROM check_defs WHERE enabled GROUP BY target_id) c
		WHERE st.entity_id = c.target_id AND st.health <> 'stale'
		  AND st.last_check_at < $1::timestamptz - make_interval(secs => $2 * c.secs)`, now, StaleAfter)
	if err != nil {
		return 0, fmt.Errorf("mark stale: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// CheckRecord is what the store knows of a check definition's results.
type CheckRecord struct {
	ID       uuid.UUID
	Slug     string
	TargetID uuid.UUID
	// LastResultAt is the time of the newest result on record; nil when
	// the check never reported.
	LastResultAt *time.Time
}

// CheckByID loads what the store knows of one check definition's results.
func (s *Store) CheckByID(ctx context.Context, id uuid.UUID) (CheckRecord, error) {
	c := CheckRecord{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT slug, target_id, last_result_at FROM check_defs WHERE id = $1`, id).
		Scan(&c.Slug, &c.TargetID, &c.LastResultAt)
	if err != nil {
		return CheckRecord{}, fmt.Errorf("load check %s: %w", id, interpretError(err))
	}
	return c, nil
}
