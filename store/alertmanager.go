package store

import (
	"context"
	"errors"
	"fmt"
)

// ExternalKindPrefix marks signals raised from outside Nomos (Prometheus
// Alertmanager). Such a signal is not announced while its entity has an
// announced open signal of Nomos's own: the room hears of one outage once.
const ExternalKindPrefix = "alertmanager:"

// EntityByAddress finds the entity an address such as 10.40.0.101:8096
// names: the service listening on that port in the container with that
// IP, or the container itself when no service matches the port (or port is
// 0). It returns ErrNotFound when no live container has the IP, or when
// several do.
func (s *Store) EntityByAddress(ctx context.Context, ip string, port int) (Entity, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+`
		WHERE e.type = 'lxc' AND e.lifecycle <> 'destroyed' AND split_part(e.attrs->>'ip', '/', 1) = $1
		LIMIT 2`, ip)
	if err != nil {
		return Entity{}, fmt.Errorf("entity at %s: %w", ip, err)
	}
	var lxcs []Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			rows.Close()
			return Entity{}, fmt.Errorf("entity at %s: %w", ip, err)
		}
		lxcs = append(lxcs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Entity{}, fmt.Errorf("entity at %s: %w", ip, err)
	}
	if len(lxcs) != 1 {
		return Entity{}, fmt.Errorf("entity at %s: %d containers have it: %w", ip, len(lxcs), ErrNotFound)
	}
	if port > 0 {
		svc, err := scanEntity(s.pool.QueryRow(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+`
			JOIN relationships r ON r.to_id = e.id AND r.type = 'runs' AND r.from_id = $1
			WHERE e.type = 'service' AND e.lifecycle <> 'destroyed' AND (e.attrs->>'port')::int = $2
			ORDER BY e.slug LIMIT 1`, lxcs[0].ID, port))
		if err == nil {
			return svc, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Entity{}, fmt.Errorf("service at %s:%d: %w", ip, port, err)
		}
	}
	return lxcs[0], nil
}
