package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Signal is something about an entity that needs attention: a failing
// check, drift from the inventory, a full disk.
type Signal struct {
	ID         uuid.UUID
	EntitySlug string
	Kind       string
	Severity   string // info, warning or critical
	State      string // raised, acknowledged, acting, resolved or muted
	Summary    string
	RaisedAt   time.Time
	ResolvedAt *time.Time
}

// Open reports whether the signal still needs attention.
func (s Signal) Open() bool {
	return s.State == "raised" || s.State == "acknowledged" || s.State == "acting"
}

const signalColumns = `g.id, e.slug, g.kind, g.severity, g.state, g.summary, g.raised_at, g.resolved_at`

func scanSignal(row pgx.Row) (Signal, error) {
	var g Signal
	err := row.Scan(&g.ID, &g.EntitySlug, &g.Kind, &g.Severity, &g.State, &g.Summary, &g.RaisedAt, &g.ResolvedAt)
	return g, interpretError(err)
}

// SignalFilter selects signals for ListSignals.
type SignalFilter struct {
	// EntityID keeps one entity's signals; nil means every entity.
	EntityID *uuid.UUID
	// Since also keeps closed signals raised or resolved at or after it;
	// zero keeps open signals only.
	Since time.Time
	// Limit bounds the result; 0 means 100.
	Limit int
}

// ListSignals returns the open signals, then the closed ones the filter
// keeps: open first, then by severity (critical first), newest first.
func (s *Store) ListSignals(ctx context.Context, f SignalFilter) ([]Signal, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var since *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	rows, err := s.pool.Query(ctx, `SELECT `+signalColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE ($1::uuid IS NULL OR g.entity_id = $1)
		  AND (g.state IN ('raised', 'acknowledged', 'acting')
		       OR ($2::timestamptz IS NOT NULL AND (g.raised_at >= $2 OR g.resolved_at >= $2)))
		ORDER BY g.state IN ('raised', 'acknowledged', 'acting') DESC,
		         array_position(ARRAY['critical', 'warning', 'info'], g.severity),
		         g.raised_at DESC
		LIMIT $3`, f.EntityID, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list signals: %w", err)
	}
	defer rows.Close()
	var out []Signal
	for rows.Next() {
		g, err := scanSignal(rows)
		if err != nil {
			return nil, fmt.Errorf("list signals: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// NewSignal is a signal to raise.
type NewSignal struct {
	EntityID uuid.UUID
	Kind     string
	Severity string
	Summary  string
	// At is when it was observed; zero means now.
	At time.Time
}

// RaiseSignal opens a signal. An entity has at most one open signal of a
// kind: raising it again returns the open one and false.
func (s *Store) RaiseSignal(ctx context.Context, n NewSignal) (Signal, bool, error) {
	at := n.At
	if at.IsZero() {
		at = s.now()
	}
	id := newID()
	tag, err := s.pool.Exec(ctx, `INSERT INTO signals (id, entity_id, kind, severity, summary, raised_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (entity_id, kind) WHERE state IN ('raised', 'acknowledged', 'acting') DO NOTHING`,
		id, n.EntityID, n.Kind, n.Severity, n.Summary, at)
	if err != nil {
		return Signal{}, false, fmt.Errorf("raise %s signal on %s: %w", n.Kind, n.EntityID, err)
	}
	g, err := scanSignal(s.pool.QueryRow(ctx, `SELECT `+signalColumns+`
		FROM signals g JOIN entities e ON e.id = g.entity_id
		WHERE g.entity_id = $1 AND g.kind = $2 AND g.state IN ('raised', 'acknowledged', 'acting')`, n.EntityID, n.Kind))
	if err != nil {
		return Signal{}, false, fmt.Errorf("raise %s signal on %s: %w", n.Kind, n.EntityID, err)
	}
	return g, tag.RowsAffected() == 1, nil
}

// ResolveSignal closes an entity's open signal of a kind. It returns
// ErrNotFound when none is open.
func (s *Store) ResolveSignal(ctx context.Context, entityID uuid.UUID, kind string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	tag, err := s.pool.Exec(ctx, `UPDATE signals SET state = 'resolved', resolved_at = $3
		WHERE entity_id = $1 AND kind = $2 AND state IN ('raised', 'acknowledged', 'acting')`, entityID, kind, at)
	if err != nil {
		return fmt.Errorf("resolve %s signal on %s: %w", kind, entityID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("resolve %s signal on %s: %w", kind, entityID, ErrNotFound)
	}
	return nil
}
