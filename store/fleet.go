package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// HealthCount is how many live entities of one type have one health.
type HealthCount struct {
	Type   string
	Health string
	Count  int
}

// HealthCounts counts entities by type and health in one query. Check
// entities are probes' bookkeeping, not part of the fleet, and destroyed
// entities are gone; neither is counted.
func (s *Store) HealthCounts(ctx context.Context) ([]HealthCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.type, coalesce(s.health, 'unknown') AS health, count(*)
		FROM `+entityFrom+`
		WHERE e.type <> 'check' AND e.lifecycle <> 'destroyed'
		GROUP BY e.type, health
		ORDER BY e.type, health`)
	if err != nil {
		return nil, fmt.Errorf("count health: %w", err)
	}
	defer rows.Close()
	var out []HealthCount
	for rows.Next() {
		var c HealthCount
		if err := rows.Scan(&c.Type, &c.Health, &c.Count); err != nil {
			return nil, fmt.Errorf("count health: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ServiceState names a service and its health.
type ServiceState struct {
	Name   string `json:"name"`
	Health string `json:"health"`
}

// Container is an LXC with the services it runs.
type Container struct {
	Entity
	Services []ServiceState
}

// ListContainers returns every LXC that is not destroyed, with its status
// and the services it runs, ordered by vmid, in one query.
func (s *Store) ListContainers(ctx context.Context) ([]Container, error) {
	return s.ListGuests(ctx, "lxc")
}

// ListGuests is ListContainers for the given guest kinds, lxc and vm, in
// vmid order; a VM has no services.
func (s *Store) ListGuests(ctx context.Context, kinds ...string) ([]Container, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+`,
			coalesce(jsonb_agg(jsonb_build_object('name', sv.name, 'health', coalesce(ss.health, 'unknown'))
				ORDER BY sv.name) FILTER (WHERE sv.id IS NOT NULL), '[]'::jsonb)
		FROM `+entityFrom+`
		LEFT JOIN relationships r ON r.from_id = e.id AND r.type = 'runs'
		LEFT JOIN entities sv ON sv.id = r.to_id
		LEFT JOIN entity_status ss ON ss.entity_id = sv.id
		WHERE e.type = ANY($1) AND e.lifecycle <> 'destroyed'
		GROUP BY e.id, s.entity_id
		ORDER BY (e.attrs->>'vmid')::int NULLS LAST, e.slug`, kinds)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	defer rows.Close()
	var out []Container
	for rows.Next() {
		var c Container
		var attrs, services []byte
		err := rows.Scan(&c.ID, &c.Slug, &c.Type, &c.Name, &attrs, &c.Lifecycle, &c.Health, &c.Detail, &c.LastCheckAt,
			&c.RunState, &c.RunStateAt, &c.Site, &services)
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		if err := json.Unmarshal(attrs, &c.Attrs); err != nil {
			return nil, fmt.Errorf("decode attrs of %s: %w", c.Slug, err)
		}
		if err := json.Unmarshal(services, &c.Services); err != nil {
			return nil, fmt.Errorf("decode services of %s: %w", c.Slug, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
