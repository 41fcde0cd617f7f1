package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/inventory"
)

// The daily brief and the weekly report read these: what happened in a
// window, and what needs attention now. Each query bounds its answer.

// StateCount is how many executions ended up in one state.
type StateCount struct {
	State ExecutionState
	Count int
}

// ExecutionStatesSince counts the executions created at or after since by
// state, most first.
func (s *Store) ExecutionStatesSince(ctx context.Context, since time.Time) ([]StateCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM executions WHERE created_at >= $1
		GROUP BY state ORDER BY count(*) DESC, state`, since)
	if err != nil {
		return nil, fmt.Errorf("executions by state since %s: %w", since, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StateCount, error) {
		var c StateCount
		err := r.Scan(&c.State, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("executions by state since %s: %w", since, err)
	}
	return out, nil
}

// PlansSince lists the plans asked for at or after since, newest first:
// each single step, and the first step of a plan of several (which
// carries its decision). Up to limit.
func (s *Store) PlansSince(ctx context.Context, since time.Time, limit int) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE x.created_at >= $1 AND (x.plan_id IS NULL OR x.plan_id = x.id)
		ORDER BY x.created_at DESC, x.id DESC LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("plans since %s: %w", since, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("plans since %s: %w", since, err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// InventoryChangesSince lists what inventories applied at or after since
// changed that the room hears of (containers new, back, changed or
// gone), oldest first, up to 100 runs.
func (s *Store) InventoryChangesSince(ctx context.Context, since time.Time) ([]InventoryChanges, error) {
	rows, err := s.pool.Query(ctx, `SELECT changes FROM inventory_runs
		WHERE applied_at >= $1 AND announce AND changes IS NOT NULL ORDER BY applied_at, id LIMIT 100`, since)
	if err != nil {
		return nil, fmt.Errorf("inventory changes since %s: %w", since, err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("inventory changes since %s: %w", since, err)
	}
	out := make([]InventoryChanges, 0, len(raws))
	for _, raw := range raws {
		var c InventoryChanges
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("decode inventory changes: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// SignalFlap is a signal that opened and resolved more than once in a
// window: a check going up and down.
type SignalFlap struct {
	EntitySlug string
	Kind       string
	// Times is how often it opened and resolved again.
	Times int
}

// FlappingSignals lists the entity and kind of each signal that was
// raised and resolved more than once at or after since, most first, up
// to limit.
func (s *Store) FlappingSignals(ctx context.Context, since time.Time, limit int) ([]SignalFlap, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, g.kind, count(*) FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.raised_at >= $1 AND g.resolved_at IS NOT NULL
		GROUP BY e.slug, g.kind HAVING count(*) > 1
		ORDER BY count(*) DESC, e.slug, g.kind LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("flapping signals since %s: %w", since, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SignalFlap, error) {
		var f SignalFlap
		err := r.Scan(&f.EntitySlug, &f.Kind, &f.Times)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("flapping signals since %s: %w", since, err)
	}
	return out, nil
}

// HealthProblem is a live entity whose health is not healthy or unknown.
type HealthProblem struct {
	Slug   string
	Health string // unhealthy, degraded, stale or stopped
	Detail string
}

// HealthProblems lists every live host, container and service that is
// unhealthy, degraded, stale or stopped, worst first, then by slug.
func (s *Store) HealthProblems(ctx context.Context) ([]HealthProblem, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, st.health, st.detail FROM entity_status st
		JOIN entities e ON e.id = st.entity_id
		WHERE e.lifecycle <> 'destroyed' AND e.type IN ('host', 'lxc', 'service')
		  AND st.health IN ('unhealthy', 'degraded', 'stale', 'stopped')
		ORDER BY array_position(ARRAY['unhealthy', 'degraded', 'stale', 'stopped'], st.health), e.slug`)
	if err != nil {
		return nil, fmt.Errorf("health problems: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HealthProblem, error) {
		var p HealthProblem
		err := r.Scan(&p.Slug, &p.Health, &p.Detail)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("health problems: %w", err)
	}
	return out, nil
}

// TargetCount is a count per target: restarts of a service, flips of a
// check.
type TargetCount struct {
	Slug  string
	Count int
}

// RestartsSince counts the service restarts that succeeded at or after
// since (restart, and systemctl restart), per service, most first, up to
// limit.
func (s *Store) RestartsSince(ctx context.Context, since time.Time, limit int) ([]TargetCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT target_slug, count(*) FROM executions
		WHERE created_at >= $1 AND state = 'succeeded' AND target_slug LIKE 'service:%'
		  AND (action = 'restart' OR (action = 'systemctl' AND params->>'verb' = 'restart'))
		GROUP BY target_slug ORDER BY count(*) DESC, target_slug LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("restarts since %s: %w", since, err)
	}
	return collectTargetCounts(rows, "restarts")
}

// CheckFlipsSince counts how often each check's result flipped (its
// signal opened or resolved) at or after since, most first, leaving out
// checks that flipped less than twice; up to limit.
func (s *Store) CheckFlipsSince(ctx context.Context, since time.Time, limit int) ([]TargetCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT substr(kind, 7), sum((raised_at >= $1)::int + coalesce((resolved_at >= $1)::int, 0))::int AS flips
		FROM signals WHERE starts_with(kind, 'check:') AND (raised_at >= $1 OR resolved_at >= $1)
		GROUP BY kind HAVING sum((raised_at >= $1)::int + coalesce((resolved_at >= $1)::int, 0)) > 1
		ORDER BY flips DESC, kind LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("check flips since %s: %w", since, err)
	}
	return collectTargetCounts(rows, "check flips")
}

func collectTargetCounts(rows pgx.Rows, what string) ([]TargetCount, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TargetCount, error) {
		var c TargetCount
		err := r.Scan(&c.Slug, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Recovery is how quickly an entity's signals resolved in a window.
type Recovery struct {
	EntitySlug string
	// Recovered is how many of its signals resolved; Mean is the mean
	// time from raised to resolved.
	Recovered int
	Mean      time.Duration
}

// RecoveriesSince gives, per entity, the mean time to recover of its
// signals resolved at or after since, slowest first, up to limit.
func (s *Store) RecoveriesSince(ctx context.Context, since time.Time, limit int) ([]Recovery, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, count(*), avg(extract(epoch FROM g.resolved_at - g.raised_at))::float8
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.resolved_at >= $1
		GROUP BY e.slug ORDER BY 3 DESC, e.slug LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("recoveries since %s: %w", since, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Recovery, error) {
		var x Recovery
		var secs float64
		err := r.Scan(&x.EntitySlug, &x.Recovered, &secs)
		x.Mean = time.Duration(secs * float64(time.Second)).Round(time.Second)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("recoveries since %s: %w", since, err)
	}
	return out, nil
}

// ClaimBrief takes the right to post the brief of kind (daily, weekly)
// for period; only the first caller, on any bot, gets true. Claim before
// posting, so a failover never posts one twice.
func (s *Store) ClaimBrief(ctx context.Context, kind, period string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO report_briefs (kind, period, claimed_at) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, kind, period, s.now())
	if err != nil {
		return false, fmt.Errorf("claim %s brief %s: %w", kind, period, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UnclaimBrief gives back a claim whose brief could not be posted, so a
// later pass tries again. A brief already posted keeps its claim.
func (s *Store) UnclaimBrief(ctx context.Context, kind, period string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM report_briefs WHERE kind = $1 AND period = $2 AND event_id IS NULL`, kind, period); err != nil {
		return fmt.Errorf("unclaim %s brief %s: %w", kind, period, err)
	}
	return nil
}

// SetBriefEvent records the message that posted a claimed brief.
func (s *Store) SetBriefEvent(ctx context.Context, kind, period, roomID, eventID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE report_briefs SET room_id = $3, event_id = $4 WHERE kind = $1 AND period = $2`,
		kind, period, roomID, eventID)
	if err != nil {
		return fmt.Errorf("record %s brief %s: %w", kind, period, err)
	}
	return nil
}

// GuestBackup is what the last inventory of a guest's host read of its
// backups.
type GuestBackup struct {
	// Slug is the guest's: lxc:… or vm:….
	Slug   string
	Name   string
	Backup inventory.Backup
}

// GuestBackups lists every guest, container or VM, not destroyed and not
// a template, whose backups an inventory read, by slug: the brief counts
// them all, and the fleet bounds them. A guest whose host's backup jobs
// could not be read last time is not listed.
func (s *Store) GuestBackups(ctx context.Context) ([]GuestBackup, error) {
	rows, err := s.pool.Query(ctx, `SELECT slug, name, attrs->'backup' FROM entities
		WHERE lifecycle <> 'destroyed' AND type IN ('lxc', 'vm') AND jsonb_typeof(attrs->'backup') = 'object'
		  AND attrs->'template' IS DISTINCT FROM 'true'::jsonb
		ORDER BY slug`)
	if err != nil {
		return nil, fmt.Errorf("guests' backups: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (GuestBackup, error) {
		var g GuestBackup
		var raw []byte
		if err := r.Scan(&g.Slug, &g.Name, &raw); err != nil {
			return g, err
		}
		if err := json.Unmarshal(raw, &g.Backup); err != nil {
			return g, fmt.Errorf("%s: backup: %w", g.Slug, err)
		}
		return g, nil
	})
	if err != nil {
		return nil, fmt.Errorf("guests' backups: %w", err)
	}
	return out, nil
}
