package store

import (
	"context"
	"fmt"
	"time"
)

// HostProbe is what the checks say about whether the actuator reaches a
// host: every probe of the host, its containers and their services runs
// over SSH to the host, so the newest result among them is the newest
// word on the connection.
type HostProbe struct {
	Slug string
	Name string
	// SSH is the host's ssh address from the fleet data; empty when it has
	// none, and then no probe can reach it.
	SSH string
	// Checks counts the enabled checks that run through the host.
	Checks int
	// MinInterval is the shortest interval among those checks.
	MinInterval time.Duration
	// Check, Health, Detail and At are the newest result among them;
	// At is nil when none has reported.
	Check  string
	Health string
	Detail string
	At     *time.Time
}

// HostProbes lists every host that is not destroyed, with the newest
// result of the checks that run through it, by name.
func (s *Store) HostProbes(ctx context.Context) ([]HostProbe, error) {
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE under (host_id, entity_id) AS (
			SELECT id, id FROM entities WHERE type = 'host'
			UNION
			SELECT u.host_id, r.to_id FROM under u
			JOIN relationships r ON r.from_id = u.entity_id AND r.type IN ('hosts', 'runs')
		)
		SELECT h.slug, h.name, coalesce(h.attrs->>'ssh', ''),
		       coalesce(n.checks, 0), coalesce(n.min_secs, 0),
		       coalesce(c.slug, ''), coalesce(c.last_health, ''), coalesce(c.last_detail, ''), c.last_result_at
		FROM entities h
		LEFT JOIN LATERAL (
			SELECT count(*) AS checks, min(cd.interval_seconds) AS min_secs
			FROM check_defs cd JOIN under u ON u.entity_id = cd.target_id
			WHERE u.host_id = h.id AND cd.enabled
		) n ON true
		LEFT JOIN LATERAL (
			SELECT cd.slug, cd.last_health, cd.last_detail, cd.last_result_at
			FROM check_defs cd JOIN under u ON u.entity_id = cd.target_id
			WHERE u.host_id = h.id AND cd.enabled AND cd.last_result_at IS NOT NULL
			ORDER BY cd.last_result_at DESC LIMIT 1
		) c ON true
		WHERE h.type = 'host' AND h.lifecycle <> 'destroyed'
		ORDER BY h.name`)
	if err != nil {
		return nil, fmt.Errorf("list host probes: %w", err)
	}
	defer rows.Close()
	var out []HostProbe
	for rows.Next() {
		var h HostProbe
		var secs int
		if err := rows.Scan(&h.Slug, &h.Name, &h.SSH, &h.Checks, &secs, &h.Check, &h.Health, &h.Detail, &h.At); err != nil {
			return nil, fmt.Errorf("list host probes: %w", err)
		}
		h.MinInterval = time.Duration(secs) * time.Second
		out = append(out, h)
	}
	return out, rows.Err()
}
