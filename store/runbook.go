package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nomoshq/nomos/internal/fleetseed"
)

// Runbook and RunbookStep are a runbook as the seed files define it and
// the database keeps it: one type from the seed file through the database
// to the bot's command parser.
type (
	Runbook     = fleetseed.Runbook
	RunbookStep = fleetseed.RunbookStep
)

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
