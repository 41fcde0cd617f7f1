package store

import (
	"context"
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
// (critical or warning); one that is healthy again resolves it. It is
// RecordChecks for one result.
func (s *Store) RecordCheck(ctx context.Context, o CheckObservation) error {
	id, err := uuid.Parse(o.TargetID)
	if err != nil {
		return fmt.Errorf("record check: bad target id %q", o.TargetID)
	}
	if o.CheckID != "" {
		n, err := s.RecordChecks(ctx, []CheckObservation{o})
		if err == nil && n == 0 {
			err = fmt.Errorf("record check %s: %w: no such check observes %s", o.CheckID, ErrNotFound, o.TargetID)
		}
		return err
	}
	at := o.At
	if at.IsZero() {
		at = s.now()
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// A one-off observation only overwrites an older one.
		_, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id, health, detail, last_check_at, updated_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT (entity_id) DO UPDATE SET health = excluded.health, detail = excluded.detail,
				last_check_at = greatest(entity_status.last_check_at, excluded.last_check_at),
				updated_at = greatest(entity_status.updated_at, excluded.updated_at)
			WHERE entity_status.last_check_at IS NULL OR entity_status.last_check_at <= excluded.last_check_at`,
			id, o.Health, o.Detail, at)
		if err != nil {
			return fmt.Errorf("record check for %s: %w", id, err)
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

// stoppedOnPurpose is true of a container (e) that its node does not
// start on boot, or that is a template: stopped is its rest state. onboot
// unset is Proxmox's default, off.
const stoppedOnPurpose = `(coalesce(e.attrs->>'onboot', 'false') <> 'true' OR e.attrs->>'template' = 'true')`

// rollUpSQL sets each container's health ($1, at $2) to the worst of:
//
//   - its run state, as the last inventory saw it: running is healthy,
//     stopped unhealthy, anything else (paused, ...) degraded, and stale
//     once run_state_until has passed. A container stopped on purpose
//     (stoppedOnPurpose) is "stopped", which outranks everything else:
//     its checks fail because it is off, and nobody is to be paged;
//   - the latest result of each of its own enabled checks, stale once
//     it is older than the check's StaleAge;
//   - the health of each service it runs, where that is known.
//
// Worst is stopped, then unhealthy, degraded, stale, healthy; among equals the
// run state speaks first, then the container's checks, then the newest
// service. A container with none of these is unknown. last_check_at is
// the newest of them. Only rows whose health, detail or time change are
// written; the ones that are come back with their new health.
var rollUpSQL = `WITH ids AS (SELECT DISTINCT unnest($1::uuid[]) AS id),
parts AS (
	SELECT st.entity_id AS id, 0 AS prio,
		CASE WHEN st.run_state_until < $2 THEN 'stale'
		     WHEN st.run_state = 'running' THEN 'healthy'
		     WHEN st.run_state = 'stopped' AND ` + stoppedOnPurpose + ` THEN 'stopped'
		     WHEN st.run_state = 'stopped' THEN 'unhealthy'
		     ELSE 'degraded' END AS health,
		CASE WHEN st.run_state_until < $2
		     THEN 'no inventory since ' || to_char(st.run_state_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen ' || st.run_state
		     WHEN st.run_state = 'stopped' AND e.attrs->>'template' = 'true'
		     THEN 'container ' || coalesce(e.attrs->>'vmid', '?') || ' is a template'
		     WHEN st.run_state = 'stopped' AND ` + stoppedOnPurpose + `
		     THEN 'container ' || coalesce(e.attrs->>'vmid', '?') || ' is stopped, and does not start on boot'
		     ELSE 'container ' || coalesce(e.attrs->>'vmid', '?') || ' is ' || st.run_state END AS detail,
		st.run_state_at AS at
	FROM entity_status st JOIN ids ON ids.id = st.entity_id JOIN entities e ON e.id = st.entity_id
	WHERE st.run_state IS NOT NULL
	UNION ALL
	SELECT cd.target_id, 1,
		` + checkHealth("$2") + `,
		CASE WHEN ` + checkQuiet("$2") + `
		     THEN ` + quietDetail() + `
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
	ORDER BY id, array_position(ARRAY['stopped', 'unhealthy', 'degraded', 'stale', 'healthy'], health), prio, at DESC NULLS LAST
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
	rows, err := q.Query(ctx, rollUpSQL, ids, now)
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
