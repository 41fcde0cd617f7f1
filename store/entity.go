package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Entity is a node of the fleet graph: a host, an LXC, a service or a check.
type Entity struct {
	ID          uuid.UUID
	Slug        string
	Type        string
	Name        string
	Attrs       map[string]any
	Lifecycle   string
	Health      string
	Detail      string
	LastCheckAt *time.Time
	// RunState is a container's run state (running, stopped) as the last
	// inventory saw it, and RunStateAt when; empty and nil when no
	// inventory has seen it.
	RunState   string
	RunStateAt *time.Time
	// Site is a host's site (see migrations/009_sites.sql); empty for
	// every other type, which belongs to its host's.
	Site string
}

// Relationship is a typed edge of the fleet graph, named by slugs.
type Relationship struct {
	From string
	To   string
	Type string
}

const entityColumns = `e.id, e.slug, e.type, e.name, e.attrs, e.lifecycle,
	coalesce(s.health, 'unknown'), coalesce(s.detail, ''), s.last_check_at,
	coalesce(s.run_state, ''), s.run_state_at, coalesce(e.site, '')`

const entityFrom = `entities e LEFT JOIN entity_status s ON s.entity_id = e.id`

// hostCluster is the cluster of the host h: attrs.cluster, else the host's
// own name (a standalone node is a cluster of one). Container slugs carry
// it (policy.ContainerSlug).
const hostCluster = `coalesce(nullif(h.attrs->>'cluster', ''), h.name)`

func scanEntity(row pgx.Row) (Entity, error) {
	var e Entity
	var attrs []byte
	err := row.Scan(&e.ID, &e.Slug, &e.Type, &e.Name, &attrs, &e.Lifecycle, &e.Health, &e.Detail, &e.LastCheckAt, &e.RunState, &e.RunStateAt, &e.Site)
	if err != nil {
		return Entity{}, interpretError(err)
	}
	if err := json.Unmarshal(attrs, &e.Attrs); err != nil {
		return Entity{}, fmt.Errorf("decode attrs of %s: %w", e.Slug, err)
	}
	return e, nil
}

// EntityBySlug loads one entity with its status.
func (s *Store) EntityBySlug(ctx context.Context, slug string) (Entity, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+` WHERE e.slug = $1`, slug)
	e, err := scanEntity(row)
	if err != nil {
		return Entity{}, fmt.Errorf("load entity %s: %w", slug, err)
	}
	return e, nil
}

// ListEntities returns entities of one type, or of every type but checks
// when typ is empty, ordered by slug.
func (s *Store) ListEntities(ctx context.Context, typ string) ([]Entity, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+`
		WHERE ($1 = '' AND e.type <> 'check') OR e.type = $1
		ORDER BY e.type, e.slug`, typ)
	if err != nil {
		return nil, fmt.Errorf("list entities: %w", err)
	}
	defer rows.Close()
	var out []Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, fmt.Errorf("list entities: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list entities: %w", err)
	}
	return out, nil
}

// Relationships returns every edge of the graph, ordered for stable output.
func (s *Store) Relationships(ctx context.Context) ([]Relationship, error) {
	rows, err := s.pool.Query(ctx, `SELECT f.slug, t.slug, r.type
		FROM relationships r
		JOIN entities f ON f.id = r.from_id
		JOIN entities t ON t.id = r.to_id
		ORDER BY f.slug, r.type, t.slug`)
	if err != nil {
		return nil, fmt.Errorf("list relationships: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Relationship, error) {
		var r Relationship
		err := row.Scan(&r.From, &r.To, &r.Type)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list relationships: %w", err)
	}
	return out, nil
}

// Neighbourhood returns the entity id, every entity one edge away from
// it and the entity named alsoSlug (its host, say), checks aside as in
// ListEntities, with the edges that touch id: what an order for id needs
// of the graph, without reading the whole fleet for it. Both reads go in
// one round trip: every dispatch makes them.
func (s *Store) Neighbourhood(ctx context.Context, id uuid.UUID, alsoSlug string) ([]Entity, []Relationship, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+entityColumns+` FROM `+entityFrom+`
		WHERE e.type <> 'check' AND (e.id = $1 OR e.slug = $2
			OR e.id IN (SELECT to_id FROM relationships WHERE from_id = $1)
			OR e.id IN (SELECT from_id FROM relationships WHERE to_id = $1))
		ORDER BY e.type, e.slug`, id, alsoSlug)
	b.Queue(`SELECT f.slug, t.slug, r.type
		FROM relationships r
		JOIN entities f ON f.id = r.from_id
		JOIN entities t ON t.id = r.to_id
		WHERE r.from_id = $1 OR r.to_id = $1
		ORDER BY f.slug, r.type, t.slug`, id)
	br := s.pool.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // the error paths; the last step checks it
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("entity neighbourhood: %w", err)
	}
	ents, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entity, error) { return scanEntity(row) })
	if err != nil {
		return nil, nil, fmt.Errorf("entity neighbourhood: %w", err)
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("entity neighbourhood: %w", err)
	}
	rels, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Relationship, error) {
		var r Relationship
		err := row.Scan(&r.From, &r.To, &r.Type)
		return r, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("entity neighbourhood: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("entity neighbourhood: %w", err)
	}
	return ents, rels, nil
}

// AttrString returns attribute key when it holds a string, else "".
func (e Entity) AttrString(key string) string {
	s, _ := e.Attrs[key].(string)
	return s
}

// AttrInt returns attribute key as an integer: a JSON number, a Go integer
// or a decimal string; 0 when it is unset or anything else.
func (e Entity) AttrInt(key string) int {
	switch n := e.Attrs[key].(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}
