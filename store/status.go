package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CheckObservation is one probe result for the entity it observed.
type CheckObservation struct {
	// CheckID names the check definition that produced the result; empty
	// for a one-off observation (a live status the agent asked for).
	CheckID  string
	TargetID string
	Health   string
	Detail   string
	Metrics  map[string]float64
	At       time.Time
}

// RecordCheck sets the target's health and appends its metric samples. An
// observation older than the one on record does not overwrite it.
//
// A result of a check definition is kept on the check, and the target's
// health becomes the worst latest result among its enabled checks. A
// check that turns unhealthy or degraded opens a signal named after it
// (critical or warning); one that is healthy again resolves it.
func (s *Store) RecordCheck(ctx context.Context, o CheckObservation) error {
	id, err := uuid.Parse(o.TargetID)
	if err != nil {
		return fmt.Errorf("record check: bad target id %q", o.TargetID)
	}
	var checkID *uuid.UUID
	if o.CheckID != "" {
		c, err := uuid.Parse(o.CheckID)
		if err != nil {
			return fmt.Errorf("record check: bad check id %q", o.CheckID)
		}
		checkID = &c
	}
	at := o.At
	if at.IsZero() {
		at = s.now()
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		health, detail := o.Health, o.Detail
		if checkID != nil {
			var err error
			if health, detail, err = recordCheckResult(ctx, tx, *checkID, id, o.Health, o.Detail, at); err != nil {
				return err
			}
		}
		// A check's result always sets the aggregate (keeping the newest
		// time seen); a one-off observation only overwrites an older one.
		_, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id, health, detail, last_check_at, updated_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT (entity_id) DO UPDATE SET health = excluded.health, detail = excluded.detail,
				last_check_at = greatest(entity_status.last_check_at, excluded.last_check_at),
				updated_at = greatest(entity_status.updated_at, excluded.updated_at)
			WHERE $5 OR entity_status.last_check_at IS NULL OR entity_status.last_check_at <= excluded.last_check_at`,
			id, health, detail, at, checkID != nil)
		if err != nil {
			return fmt.Errorf("record check for %s: %w", id, err)
		}
		if checkID != nil {
			// A container's health rolls up its own checks and those of
			// the services inside it.
			ids, err := containersOf(ctx, tx, id)
			if err != nil {
				return err
			}
			if _, err := rollUp(ctx, tx, ids, s.now()); err != nil {
				return err
			}
		}
		for metric, v := range o.Metrics {
			_, err := tx.Exec(ctx, `INSERT INTO metric_samples (entity_id, metric, value, at) VALUES ($1, $2, $3, $4)
				ON CONFLICT DO NOTHING`, id, metric, v, at)
			if err != nil {
				return fmt.Errorf("record metric %s for %s: %w", metric, id, err)
			}
		}
		return nil
	})
}

// recordCheckResult keeps a check definition's latest result, opens or
// resolves its signal, and returns the target's aggregate health and the
// detail of its worst check.
func recordCheckResult(ctx context.Context, tx pgx.Tx, checkID, targetID uuid.UUID, health, detail string, at time.Time) (string, string, error) {
	var slug string
	var newer bool
	err := tx.QueryRow(ctx, `UPDATE check_defs SET
			last_health = CASE WHEN last_result_at IS NULL OR last_result_at <= $3 THEN $4 ELSE last_health END,
			last_detail = CASE WHEN last_result_at IS NULL OR last_result_at <= $3 THEN $5 ELSE last_detail END,
			last_result_at = greatest(last_result_at, $3)
		WHERE id = $1 AND target_id = $2
		RETURNING slug, last_result_at = $3`, checkID, targetID, at, health, detail).Scan(&slug, &newer)
	if err != nil {
		err = interpretError(err)
		if errors.Is(err, ErrNotFound) {
			return "", "", fmt.Errorf("record check %s: %w: no such check observes %s", checkID, ErrNotFound, targetID)
		}
		return "", "", fmt.Errorf("record check %s: %w", checkID, err)
	}
	if newer {
		if err := checkSignal(ctx, tx, checkID, targetID, slug, health, detail, at); err != nil {
			return "", "", err
		}
	}
	var aggHealth, aggDetail, worst string
	err = tx.QueryRow(ctx, `SELECT last_health, last_detail, slug FROM check_defs
		WHERE target_id = $1 AND enabled AND last_health IS NOT NULL
		ORDER BY array_position(ARRAY['unhealthy', 'degraded', 'healthy'], last_health), last_result_at DESC
		LIMIT 1`, targetID).Scan(&aggHealth, &aggDetail, &worst)
	if err != nil {
		err = interpretError(err)
		if errors.Is(err, ErrNotFound) { // the check is disabled: it speaks for itself
			return health, slug + ": " + detail, nil
		}
		return "", "", fmt.Errorf("record check %s: %w", checkID, err)
	}
	return aggHealth, worst + ": " + aggDetail, nil
}

// checkSignal opens, updates or resolves the signal of one check.
func checkSignal(ctx context.Context, tx pgx.Tx, checkID, targetID uuid.UUID, slug, health, detail string, at time.Time) error {
	kind := "check:" + slug
	severity := map[string]string{"unhealthy": "critical", "degraded": "warning"}[health]
	if severity == "" {
		_, err := tx.Exec(ctx, `UPDATE signals SET state = 'resolved', resolved_at = $3
			WHERE entity_id = $1 AND kind = $2 AND state IN ('raised', 'acknowledged', 'acting')`, targetID, kind, at)
		if err != nil {
			return fmt.Errorf("resolve signal %s: %w", kind, err)
		}
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO signals (id, entity_id, check_id, kind, severity, summary, raised_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (entity_id, kind) WHERE state IN ('raised', 'acknowledged', 'acting')
		DO UPDATE SET severity = excluded.severity, summary = excluded.summary`,
		newID(), targetID, checkID, kind, severity, slug+": "+detail, at)
	if err != nil {
		return fmt.Errorf("raise signal %s: %w", kind, err)
	}
	return nil
}

// containersOf returns the container id itself, or the containers that run
// the service id.
func containersOf(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]uuid.UUID, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM entities WHERE id = $1 AND type = 'lxc'
		UNION SELECT from_id FROM relationships WHERE to_id = $1 AND type = 'runs'`, id)
	if err != nil {
		return nil, fmt.Errorf("containers of %s: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("containers of %s: %w", id, err)
	}
	return ids, nil
}

// rollUpSQL sets each container's health ($1, at $2) to the worst of:
//
//   - its run state, as the last inventory saw it: running is healthy,
//     stopped unhealthy, anything else (paused, ...) degraded, and stale
//     once run_state_until has passed;
//   - the latest result of each of its own enabled checks, stale once
//     it is older than $3 of the check's intervals;
//   - the health of each service it runs, where that is known.
//
// Worst is unhealthy, then degraded, stale, healthy; among equals the
// run state speaks first, then the container's checks, then the newest
// service. A container with none of these is unknown. last_check_at is
// the newest of them. Only rows whose health, detail or time change are
// written; the ones that are come back with their new health.
const rollUpSQL = `WITH ids AS (SELECT DISTINCT unnest($1::uuid[]) AS id),
parts AS (
	SELECT st.entity_id AS id, 0 AS prio,
		CASE WHEN st.run_state_until < $2 THEN 'stale'
		     WHEN st.run_state = 'running' THEN 'healthy'
		     WHEN st.run_state = 'stopped' THEN 'unhealthy'
		     ELSE 'degraded' END AS health,
		CASE WHEN st.run_state_until < $2
		     THEN 'no inventory since ' || to_char(st.run_state_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen ' || st.run_state
		     ELSE 'container ' || coalesce(e.attrs->>'vmid', '?') || ' is ' || st.run_state END AS detail,
		st.run_state_at AS at
	FROM entity_status st JOIN ids ON ids.id = st.entity_id JOIN entities e ON e.id = st.entity_id
	WHERE st.run_state IS NOT NULL
	UNION ALL
	SELECT cd.target_id, 1,
		CASE WHEN cd.last_result_at < $2::timestamptz - make_interval(secs => $3 * cd.interval_seconds) THEN 'stale' ELSE cd.last_health END,
		CASE WHEN cd.last_result_at < $2::timestamptz - make_interval(secs => $3 * cd.interval_seconds)
		     THEN cd.slug || ': no result since ' || to_char(cd.last_result_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen: ' || cd.last_health
		     ELSE cd.slug || ': ' || cd.last_detail END,
		cd.last_result_at
	FROM check_defs cd JOIN ids ON ids.id = cd.target_id
	WHERE cd.enabled AND cd.last_health IS NOT NULL
	UNION ALL
	SELECT r.from_id, 2, ss.health, sv.name || ': ' || ss.detail, ss.last_check_at
	FROM relationships r JOIN ids ON ids.id = r.from_id
	JOIN entities sv ON sv.id = r.to_id AND sv.lifecycle <> 'destroyed'
	JOIN entity_status ss ON ss.entity_id = sv.id
	WHERE r.type = 'runs' AND ss.health <> 'unknown'
),
worst AS (
	SELECT DISTINCT ON (id) id, health, detail FROM parts
	ORDER BY id, array_position(ARRAY['unhealthy', 'degraded', 'stale', 'healthy'], health), prio, at DESC NULLS LAST
),
newest AS (SELECT id, max(at) AS at FROM parts GROUP BY id)
INSERT INTO entity_status (entity_id, health, detail, last_check_at, updated_at)
SELECT e.id, coalesce(w.health, 'unknown'), coalesce(w.detail, ''), n.at, $2
FROM entities e JOIN ids ON ids.id = e.id
LEFT JOIN worst w ON w.id = e.id LEFT JOIN newest n ON n.id = e.id
WHERE e.type = 'lxc'
ON CONFLICT (entity_id) DO UPDATE SET health = excluded.health, detail = excluded.detail,
	last_check_at = excluded.last_check_at, updated_at = excluded.updated_at
WHERE (entity_status.health, entity_status.detail, entity_status.last_check_at)
	IS DISTINCT FROM (excluded.health, excluded.detail, excluded.last_check_at)
RETURNING entity_id, health`

// rollUp recomputes the health of the containers among ids at now and
// returns the new health of each one that changed.
func rollUp(ctx context.Context, q pgx.Tx, ids []uuid.UUID, now time.Time) (map[uuid.UUID]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, rollUpSQL, ids, now, StaleAfter)
	if err != nil {
		return nil, fmt.Errorf("roll up container health: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var health string
		if err := rows.Scan(&id, &health); err != nil {
			return nil, fmt.Errorf("roll up container health: %w", err)
		}
		out[id] = health
	}
	return out, rows.Err()
}
