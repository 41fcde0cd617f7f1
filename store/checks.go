package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
// stopped answering must not leave an old "healthy" on show. A container
// is not marked directly: its health rolls up again, with each of its
// own checks that went quiet counting as stale, and so does that of each
// container whose service was just marked. It returns how many targets
// went stale.
func (s *Store) MarkStale(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE entity_status st
			SET health = 'stale', updated_at = $1,
			    detail = 'no check result since ' || to_char(st.last_check_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen: ' || st.health
			FROM (SELECT target_id, min(interval_seconds) AS secs FROM check_defs WHERE enabled GROUP BY target_id) c,
			     entities e
			WHERE st.entity_id = c.target_id AND e.id = st.entity_id AND e.type <> 'lxc' AND st.health <> 'stale'
			  AND st.last_check_at < $1::timestamptz - make_interval(secs => $2 * c.secs)
			RETURNING st.entity_id`, now, StaleAfter)
		if err != nil {
			return err
		}
		marked, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		n = len(marked)
		rows, err = tx.Query(ctx, `SELECT r.from_id FROM relationships r
			WHERE r.type = 'runs' AND r.to_id = ANY($1)
			UNION
			SELECT cd.target_id FROM check_defs cd
			JOIN entities e ON e.id = cd.target_id AND e.type = 'lxc'
			JOIN entity_status st ON st.entity_id = cd.target_id AND st.health <> 'stale'
			WHERE cd.enabled AND cd.last_result_at < $2::timestamptz - make_interval(secs => $3 * cd.interval_seconds)`,
			marked, now, StaleAfter)
		if err != nil {
			return err
		}
		containers, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		changed, err := rollUp(ctx, tx, containers, now)
		for _, h := range changed {
			if h == "stale" {
				n++
			}
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mark stale: %w", err)
	}
	return n, nil
}

// ExpireRunStates rolls up the health of every live container whose run
// state is past its run_state_until, so one whose inventory stopped
// answering shows stale rather than its last run state. It returns how
// many containers went stale.
func (s *Store) ExpireRunStates(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT st.entity_id FROM entity_status st
			JOIN entities e ON e.id = st.entity_id AND e.type = 'lxc' AND e.lifecycle <> 'destroyed'
			WHERE st.run_state_until < $1 AND st.health <> 'stale'`, now)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		changed, err := rollUp(ctx, tx, ids, now)
		for _, h := range changed {
			if h == "stale" {
				n++
			}
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire run states: %w", err)
	}
	return n, nil
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

// ChecksByID loads what the store knows of the results of each check
// definition named, in one query. A check that does not exist is left
// out.
func (s *Store) ChecksByID(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]CheckRecord, error) {
	out := make(map[uuid.UUID]CheckRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, slug, target_id, last_result_at FROM check_defs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load %d checks: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var c CheckRecord
		if err := rows.Scan(&c.ID, &c.Slug, &c.TargetID, &c.LastResultAt); err != nil {
			return nil, fmt.Errorf("load %d checks: %w", len(ids), err)
		}
		out[c.ID] = c
	}
	return out, rows.Err()
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
