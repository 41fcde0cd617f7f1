package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	// Slot is when the check is to run: its claimed next run, or the
	// claim's now when that has passed.
	Slot time.Time
}

// ClaimDueChecks takes up to limit enabled checks that are due at now and
// moves each one's next run an interval on, in one statement, so two
// schedulers never send the same check for the same slot. A check never
// run before is due at once.
func (s *Store) ClaimDueChecks(ctx context.Context, now time.Time, limit int) ([]DueCheck, error) {
	return s.ClaimChecksDueBy(ctx, now, now, limit)
}

// ClaimChecksDueBy is ClaimDueChecks for the checks due by until, a moment
// after now, in the order of their slots: a prober that claims a tick
// ahead can send each at its slot rather than at its next tick. A check's
// next run is an interval after its slot (or after now, for one overdue).
func (s *Store) ClaimChecksDueBy(ctx context.Context, now, until time.Time, limit int) ([]DueCheck, error) {
	rows, err := s.pool.Query(ctx, `UPDATE check_defs c
		SET next_run_at = greatest(c.next_run_at, $1::timestamptz) + make_interval(secs => c.interval_seconds),
		    last_run_at = greatest(c.next_run_at, $1::timestamptz)
		FROM (SELECT id FROM check_defs
		      WHERE enabled AND (next_run_at IS NULL OR next_run_at <= $3)
		      ORDER BY next_run_at NULLS FIRST, slug
		      LIMIT $2 FOR UPDATE SKIP LOCKED) due
		WHERE c.id = due.id
		RETURNING c.id, c.slug, c.target_id, c.kind, c.spec, c.interval_seconds, c.last_run_at`, now, limit, until)
	if err != nil {
		return nil, fmt.Errorf("claim due checks: %w", err)
	}
	defer rows.Close()
	var out []DueCheck
	for rows.Next() {
		var c DueCheck
		var spec []byte
		var secs int
		if err := rows.Scan(&c.ID, &c.Slug, &c.TargetID, &c.Kind, &spec, &secs, &c.Slot); err != nil {
			return nil, fmt.Errorf("claim due checks: %w", err)
		}
		if err := json.Unmarshal(spec, &c.Spec); err != nil {
			return nil, fmt.Errorf("claim due checks: spec of %s: %w", c.Slug, err)
		}
		c.Interval = time.Duration(secs) * time.Second
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b DueCheck) int { return a.Slot.Compare(b.Slot) })
	return out, nil
}

// StaleAfter is how many of its interval a check may go without a result
// before it counts as stale, and StaleFloor the least time it may: a
// check every 10 s is stale after 5 minutes, not 30 seconds, so a short
// hiccup of the actuator or the queue is not news.
const (
	StaleAfter = 3
	StaleFloor = 5 * time.Minute
)

// StaleSignalKind is the signal a target raises when it goes stale; it is
// resolved once the target is no longer stale.
const StaleSignalKind = "health.stale"

// StaleAge is how long a check of the given interval may go without a
// result before it counts as stale.
func StaleAge(interval time.Duration) time.Duration {
	return max(StaleAfter*interval, StaleFloor)
}

// checkQuiet is true of the check cd whose last result is older than its
// StaleAge at the time held by the parameter it is given.
func checkQuiet(now string) string {
	return fmt.Sprintf("cd.last_result_at < %s::timestamptz - make_interval(secs => greatest(%d * cd.interval_seconds, %d))",
		now, StaleAfter, int(StaleFloor/time.Second))
}

// checkHealth is the health the check cd contributes at now: its last
// result's, or stale once it is quiet.
func checkHealth(now string) string {
	return "CASE WHEN " + checkQuiet(now) + " THEN 'stale' ELSE cd.last_health END"
}

// quietDetail says which check of a stale target went quiet, since when,
// and what it last saw.
func quietDetail() string {
	return `'no result from ' || cd.slug || ' since ' || to_char(cd.last_result_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC; last seen: ' || cd.last_health`
}

// staleWorstSQL is, for each checked target other than a container, its
// worst check at $1 (a quiet one counting as stale) and what it says.
var staleWorstSQL = `SELECT DISTINCT ON (cd.target_id) cd.target_id AS id, ` + checkHealth("$1") + ` AS health,
		` + quietDetail() + ` AS detail
	FROM check_defs cd JOIN entities e ON e.id = cd.target_id AND e.type <> 'lxc' AND e.lifecycle <> 'destroyed'
	WHERE cd.enabled AND cd.last_result_at IS NOT NULL
	ORDER BY cd.target_id, array_position(ARRAY['unhealthy', 'degraded', 'stale', 'healthy'], ` + checkHealth("$1") + `),
		cd.last_result_at`

// MarkStale marks stale every checked target that a quiet check leaves
// with nothing worse to show: one of its enabled checks has had no result
// for its StaleAge, and none of the others that still answer says
// unhealthy or degraded. A probe that stopped answering must not leave an
// old "healthy" on show, nor may one check that answers hide another
// that went quiet. A container is not marked directly: its health rolls
// up again, with each of its own checks that went quiet counting as
// stale, and so does that of each container whose service was just
// marked.
//
// Every target stale through a quiet check has an open health.stale
// signal, announced like any other, whether this pass or a result
// recorded since marked it; so does a container whose own check went
// quiet (one stale only through a service it runs is told by that
// service's signal). Every open health.stale signal whose entity is no
// longer stale is resolved. It returns how many targets went stale.
func (s *Store) MarkStale(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE signals g SET state = 'resolved', resolved_at = $2
			FROM entity_status st
			WHERE g.kind = $1 AND g.state IN ('raised', 'acknowledged', 'acting')
			  AND st.entity_id = g.entity_id AND st.health <> 'stale'`, StaleSignalKind, now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `WITH worst AS (`+staleWorstSQL+`)
			UPDATE entity_status st SET health = 'stale', updated_at = $1, detail = w.detail
			FROM worst w
			WHERE st.entity_id = w.id AND w.health = 'stale' AND st.health <> 'stale'
			RETURNING st.entity_id`, now)
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
			WHERE cd.enabled AND `+checkQuiet("$2"), marked, now)
		if err != nil {
			return err
		}
		containers, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		changed, err := rollUp(ctx, tx, containers, now)
		if err != nil {
			return err
		}
		for _, h := range changed {
			if h == "stale" {
				n++
			}
		}
		_, err = tx.Exec(ctx, `WITH worst AS (`+staleWorstSQL+`),
			stale AS (
				SELECT w.id, w.detail FROM worst w JOIN entity_status st ON st.entity_id = w.id AND st.health = 'stale'
				WHERE w.health = 'stale'
				  -- a service of a container stopped on purpose pages nobody
				  AND NOT EXISTS (SELECT 1 FROM relationships r JOIN entity_status cs ON cs.entity_id = r.from_id
				                  WHERE r.to_id = w.id AND r.type = 'runs' AND cs.health = 'stopped')
				UNION
				SELECT st.entity_id, st.detail FROM entity_status st
				JOIN entities e ON e.id = st.entity_id AND e.type = 'lxc' AND e.lifecycle <> 'destroyed'
				WHERE st.health = 'stale' AND EXISTS (SELECT 1 FROM check_defs cd
					WHERE cd.target_id = st.entity_id AND cd.enabled AND `+checkQuiet("$1")+`)
			)
			INSERT INTO signals (id, entity_id, kind, severity, summary, raised_at)
			SELECT gen_random_uuid(), stale.id, $2, 'warning', stale.detail, $1 FROM stale
			ORDER BY stale.id
			ON CONFLICT (entity_id, kind) WHERE state IN ('raised', 'acknowledged', 'acting') DO NOTHING`, now, StaleSignalKind)
		if err != nil {
			return fmt.Errorf("raise %s signals: %w", StaleSignalKind, err)
		}
		return nil
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
