package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// Runbook is a stored runbook.
type Runbook struct {
	Slug        string
	Title       string
	Description string
	Triggers    []string
	TargetType  string
	Steps       []SeedRunbookStep
}

// Runbooks returns every runbook, ordered by slug.
func (s *Store) Runbooks(ctx context.Context) ([]Runbook, error) {
	rows, err := s.pool.Query(ctx, `SELECT slug, title, description, triggers, target_type, steps FROM runbooks ORDER BY slug`)
	if err != nil {
		return nil, fmt.Errorf("list runbooks: %w", err)
	}
	defer rows.Close()
	var out []Runbook
	for rows.Next() {
		var r Runbook
		var steps []byte
		if err := rows.Scan(&r.Slug, &r.Title, &r.Description, &r.Triggers, &r.TargetType, &steps); err != nil {
			return nil, fmt.Errorf("list runbooks: %w", err)
		}
		if err := json.Unmarshal(steps, &r.Steps); err != nil {
			return nil, fmt.Errorf("runbook %s steps: %w", r.Slug, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
