package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Samples written against check entities are probes' bookkeeping from
// before results were written to their targets; every query here leaves
// them out, so a metric always describes a real part of the fleet.

// MetricAggregate summarises one metric of one entity over a window.
type MetricAggregate struct {
	Slug     string
	Type     string
	Name     string
	Metric   string
	Latest   float64
	LatestAt time.Time
	Avg      float64
	Min      float64
	Max      float64
	Count    int
}

// MetricQuery selects samples for AggregateMetrics.
type MetricQuery struct {
	// Metric names the metric; empty means every metric.
	Metric string
	// Since keeps samples taken at or after it.
	Since time.Time
	// EntityType keeps one type of entity (host, lxc, service); empty
	// means every type.
	EntityType string
}

// AggregateMetrics returns, per entity and metric, the latest value and the
// average, minimum and maximum over the window, ordered by metric and slug.
func (s *Store) AggregateMetrics(ctx context.Context, q MetricQuery) ([]MetricAggregate, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, e.type, e.name, m.metric,
			(array_agg(m.value ORDER BY m.at DESC))[1], max(m.at),
			avg(m.value), min(m.value), max(m.value), count(*)
		FROM metric_samples m JOIN entities e ON e.id = m.entity_id
		WHERE e.type <> 'check' AND m.at >= $1
		  AND ($2 = '' OR m.metric = $2)
		  AND ($3 = '' OR e.type = $3)
		GROUP BY e.id, m.metric
		ORDER BY m.metric, e.slug`, q.Since, q.Metric, q.EntityType)
	if err != nil {
		return nil, fmt.Errorf("aggregate metrics: %w", err)
	}
	defer rows.Close()
	var out []MetricAggregate
	for rows.Next() {
		var a MetricAggregate
		if err := rows.Scan(&a.Slug, &a.Type, &a.Name, &a.Metric, &a.Latest, &a.LatestAt, &a.Avg, &a.Min, &a.Max, &a.Count); err != nil {
			return nil, fmt.Errorf("aggregate metrics: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// MetricName is a metric that has samples, and how many.
type MetricName struct {
	Name     string
	Entities int
	Samples  int
	LatestAt time.Time
}

// MetricNames lists the metrics sampled since a time, by name.
func (s *Store) MetricNames(ctx context.Context, since time.Time) ([]MetricName, error) {
	rows, err := s.pool.Query(ctx, `SELECT m.metric, count(DISTINCT m.entity_id), count(*), max(m.at)
		FROM metric_samples m JOIN entities e ON e.id = m.entity_id
		WHERE e.type <> 'check' AND m.at >= $1
		GROUP BY m.metric ORDER BY m.metric`, since)
	if err != nil {
		return nil, fmt.Errorf("list metric names: %w", err)
	}
	defer rows.Close()
	var out []MetricName
	for rows.Next() {
		var n MetricName
		if err := rows.Scan(&n.Name, &n.Entities, &n.Samples, &n.LatestAt); err != nil {
			return nil, fmt.Errorf("list metric names: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// MetricSample is one value of one metric of one entity.
type MetricSample struct {
	Slug   string
	Type   string
	Name   string
	Metric string
	Value  float64
	At     time.Time
}

// LatestSamples returns the newest sample of a metric for every entity
// that has one, highest value first. It reads one index entry per entity,
// whatever the history.
func (s *Store) LatestSamples(ctx context.Context, metric string) ([]MetricSample, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, e.type, e.name, l.value, l.at
		FROM entities e
		CROSS JOIN LATERAL (SELECT m.value, m.at FROM metric_samples m
			WHERE m.entity_id = e.id AND m.metric = $1 ORDER BY m.at DESC LIMIT 1) l
		WHERE e.type <> 'check' AND e.lifecycle <> 'destroyed'
		ORDER BY l.value DESC, e.slug`, metric)
	if err != nil {
		return nil, fmt.Errorf("latest %s samples: %w", metric, err)
	}
	defer rows.Close()
	var out []MetricSample
	for rows.Next() {
		m := MetricSample{Metric: metric}
		if err := rows.Scan(&m.Slug, &m.Type, &m.Name, &m.Value, &m.At); err != nil {
			return nil, fmt.Errorf("latest %s samples: %w", metric, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// EntityLatestMetrics returns the newest sample of every metric of one
// entity, by metric name.
func (s *Store) EntityLatestMetrics(ctx context.Context, entityID uuid.UUID) ([]MetricSample, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (m.metric) e.slug, e.type, e.name, m.metric, m.value, m.at
		FROM metric_samples m JOIN entities e ON e.id = m.entity_id
		WHERE m.entity_id = $1
		ORDER BY m.metric, m.at DESC`, entityID)
	if err != nil {
		return nil, fmt.Errorf("latest metrics of %s: %w", entityID, err)
	}
	defer rows.Close()
	var out []MetricSample
	for rows.Next() {
		var m MetricSample
		if err := rows.Scan(&m.Slug, &m.Type, &m.Name, &m.Metric, &m.Value, &m.At); err != nil {
			return nil, fmt.Errorf("latest metrics of %s: %w", entityID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MetricBucket aggregates the samples of one time bucket.
type MetricBucket struct {
	Start time.Time
	Avg   float64
	Min   float64
	Max   float64
	Count int
}

// MetricTrend returns one entity's metric since a time in buckets of the
// given width, oldest first; empty buckets are left out.
func (s *Store) MetricTrend(ctx context.Context, entityID uuid.UUID, metric string, since time.Time, bucket time.Duration) ([]MetricBucket, error) {
	if bucket < time.Second {
		bucket = time.Second
	}
	rows, err := s.pool.Query(ctx, `SELECT to_timestamp(floor(extract(epoch FROM at) / $4) * $4) AS b,
			avg(value), min(value), max(value), count(*)
		FROM metric_samples
		WHERE entity_id = $1 AND metric = $2 AND at >= $3
		GROUP BY b ORDER BY b`, entityID, metric, since, bucket.Seconds())
	if err != nil {
		return nil, fmt.Errorf("trend of %s for %s: %w", metric, entityID, err)
	}
	defer rows.Close()
	var out []MetricBucket
	for rows.Next() {
		var b MetricBucket
		if err := rows.Scan(&b.Start, &b.Avg, &b.Min, &b.Max, &b.Count); err != nil {
			return nil, fmt.Errorf("trend of %s for %s: %w", metric, entityID, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
