package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/policy"
)

// The read-only views of the status page. Each answers one page region in
// one statement, whatever the size of the fleet.

// FleetNode is a host, an LXC or a service with its health and the node
// that holds it: the host of an LXC, the LXC (or host) that runs a service.
// Detail is kept only for a node that is not healthy.
type FleetNode struct {
	ID          uuid.UUID
	Slug        string
	Type        string
	Name        string
	Lifecycle   string
	Health      string
	Detail      string
	LastCheckAt *time.Time
	// Parent is the holding node; uuid.Nil for a host or an orphan.
	Parent uuid.UUID
}

// FleetNodes returns every host, LXC and service that is not destroyed,
// with its health and parent, hosts first, LXCs by vmid, in one query.
func (s *Store) FleetNodes(ctx context.Context) ([]FleetNode, error) {
	// Hash joins and a sort in Go: a lateral lookup per node and a sort
	// on a jsonb expression cost more than the rest of the overview.
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.slug, e.type, e.name, e.lifecycle,
			coalesce(st.health, 'unknown'), CASE WHEN st.health <> 'healthy' THEN st.detail ELSE '' END, st.last_check_at,
			coalesce(p.from_id, '00000000-0000-0000-0000-000000000000')
		FROM entities e
		LEFT JOIN entity_status st ON st.entity_id = e.id
		LEFT JOIN (SELECT DISTINCT ON (to_id) to_id, from_id FROM relationships
			WHERE type IN ('hosts', 'runs') ORDER BY to_id, type) p ON p.to_id = e.id
		WHERE e.type IN ('host', 'lxc', 'vm', 'service') AND e.lifecycle <> 'destroyed'`)
	if err != nil {
		return nil, fmt.Errorf("list fleet: %w", err)
	}
	defer rows.Close()
	var out []FleetNode
	var vmids []int
	for rows.Next() {
		var n FleetNode
		var detail *string
		if err := rows.Scan(&n.ID, &n.Slug, &n.Type, &n.Name, &n.Lifecycle, &n.Health, &detail, &n.LastCheckAt, &n.Parent); err != nil {
			return nil, fmt.Errorf("list fleet: %w", err)
		}
		if detail != nil {
			n.Detail = *detail
		}
		// A guest's slug is lxc:<cluster>/<vmid> or vm:<cluster>/<vmid>;
		// sort by the number, containers and VMs together.
		_, v, err := policy.ParseContainerName(strings.TrimPrefix(n.Slug, n.Type+":"))
		if err != nil || !policy.IsGuest(policy.TargetType(n.Type)) {
			v = math.MaxInt
		}
		out = append(out, n)
		vmids = append(vmids, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list fleet: %w", err)
	}
	order := map[string]int{"host": 0, "lxc": 1, "vm": 1, "service": 2}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(order[out[a].Type], order[out[b].Type]), cmp.Compare(vmids[a], vmids[b]),
			strings.Compare(out[a].Slug, out[b].Slug))
	})
	sorted := make([]FleetNode, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted, nil
}

// Edge is one relationship of an entity, seen from that entity.
type Edge struct {
	// Out is true for an edge from the entity (it hosts, runs or depends
	// on Other), false for one into it.
	Out    bool
	Type   string
	Other  string
	Name   string
	Health string
}

// EntityEdges returns an entity's relationships in both directions, with
// the health of the entity at the other end.
func (s *Store) EntityEdges(ctx context.Context, id uuid.UUID) ([]Edge, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.from_id = $1, r.type, o.slug, o.name, coalesce(st.health, 'unknown')
		FROM relationships r
		JOIN entities o ON o.id = CASE WHEN r.from_id = $1 THEN r.to_id ELSE r.from_id END
		LEFT JOIN entity_status st ON st.entity_id = o.id
		WHERE r.from_id = $1 OR r.to_id = $1
		ORDER BY r.from_id = $1 DESC, r.type, o.slug`, id)
	if err != nil {
		return nil, fmt.Errorf("edges of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Edge
	for rows.Next() {
		var e Edge
		if err := rows.Scan(&e.Out, &e.Type, &e.Other, &e.Name, &e.Health); err != nil {
			return nil, fmt.Errorf("edges of %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// CheckView is a check definition with its schedule and latest result.
type CheckView struct {
	Slug         string
	Kind         string
	Interval     time.Duration
	Enabled      bool
	LastHealth   string
	LastDetail   string
	LastResultAt *time.Time
	NextRunAt    *time.Time
}

// ChecksOf returns the checks that observe a target, by slug.
func (s *Store) ChecksOf(ctx context.Context, targetID uuid.UUID) ([]CheckView, error) {
	rows, err := s.pool.Query(ctx, `SELECT slug, kind, interval_seconds, enabled, coalesce(last_health, ''),
			last_detail, last_result_at, next_run_at
		FROM check_defs WHERE target_id = $1 ORDER BY slug`, targetID)
	if err != nil {
		return nil, fmt.Errorf("checks of %s: %w", targetID, err)
	}
	defer rows.Close()
	var out []CheckView
	for rows.Next() {
		var c CheckView
		var secs int
		if err := rows.Scan(&c.Slug, &c.Kind, &secs, &c.Enabled, &c.LastHealth, &c.LastDetail, &c.LastResultAt, &c.NextRunAt); err != nil {
			return nil, fmt.Errorf("checks of %s: %w", targetID, err)
		}
		c.Interval = time.Duration(secs) * time.Second
		out = append(out, c)
	}
	return out, rows.Err()
}

// MetricSeries is one metric of one entity over a window, averaged into
// at most a fixed number of points, oldest first.
type MetricSeries struct {
	Metric string
	Points []MetricPoint
}

// MetricPoint is the average of one bucket of samples.
type MetricPoint struct {
	At    time.Time
	Value float64
}

// EntitySeries returns every metric of an entity since a time, each
// averaged into at most points buckets, in one query.
func (s *Store) EntitySeries(ctx context.Context, entityID uuid.UUID, since, until time.Time, points int) ([]MetricSeries, error) {
	if points < 1 {
		points = 1
	}
	width := until.Sub(since).Seconds() / float64(points)
	if width < 1 {
		width = 1
	}
	rows, err := s.pool.Query(ctx, `SELECT metric, to_timestamp(floor(extract(epoch FROM at) / $4) * $4) AS b, avg(value)
		FROM metric_samples
		WHERE entity_id = $1 AND at >= $2 AND at <= $3
		GROUP BY metric, b ORDER BY metric, b`, entityID, since, until, width)
	if err != nil {
		return nil, fmt.Errorf("series of %s: %w", entityID, err)
	}
	defer rows.Close()
	var out []MetricSeries
	for rows.Next() {
		var m string
		var p MetricPoint
		if err := rows.Scan(&m, &p.At, &p.Value); err != nil {
			return nil, fmt.Errorf("series of %s: %w", entityID, err)
		}
		if len(out) == 0 || out[len(out)-1].Metric != m {
			out = append(out, MetricSeries{Metric: m})
		}
		out[len(out)-1].Points = append(out[len(out)-1].Points, p)
	}
	return out, rows.Err()
}

// FleetMark is a cheap fingerprint of the fleet's health and signals: it
// changes whenever a status, a signal or the inventory does, so a poller
// can tell the status page to refresh without reading the fleet.
func (s *Store) FleetMark(ctx context.Context) (string, error) {
	var mark string
	err := s.pool.QueryRow(ctx, `SELECT concat_ws('/',
			(SELECT max(updated_at) FROM entity_status),
			(SELECT max(greatest(raised_at, resolved_at)) FROM signals),
			(SELECT count(*) FROM signals WHERE state IN ('raised', 'acknowledged', 'acting')),
			(SELECT count(*) FROM entities), (SELECT max(updated_at) FROM entities))`).Scan(&mark)
	if err != nil {
		return "", fmt.Errorf("fleet mark: %w", err)
	}
	return mark, nil
}
