package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// defaultSite is the site of a host that names none.
const defaultSite = "default"

// Sites returns the name of every site, in order. There is always at
// least the default one.
func (s *Store) Sites(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM sites ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	return names, nil
}

// SiteHosts returns the names of the live hosts of one site, in order;
// none when the site does not exist or has no host.
func (s *Store) SiteHosts(ctx context.Context, site string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM entities
		WHERE type = 'host' AND site = $1 AND lifecycle <> 'destroyed' ORDER BY name`, site)
	if err != nil {
		return nil, fmt.Errorf("list hosts of site %s: %w", site, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list hosts of site %s: %w", site, err)
	}
	return names, nil
}
