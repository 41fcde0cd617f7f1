package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// Runbook is a named plan with the phrases that trigger it, one type from
// the seed file through the database to the bot's command parser. A
// trigger holds "{target}" where the entity's name goes.
type Runbook struct {
	Slug        string   `yaml:"slug"`
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Triggers    []string `yaml:"triggers"`
	// TargetType is host, lxc or service; a trigger's target of another
	// type does not match.
	TargetType string        `yaml:"target_type"`
	Steps      []RunbookStep `yaml:"steps"`
	// Line and File locate the runbook in its seed file; they are zero for
	// one read from the database.
	Line int    `yaml:"-"`
	File string `yaml:"-"`
}

// RunbookStep is one gated action of a runbook, stored as JSON. String
// params may name the runbook's target as "{{target}}".
type RunbookStep struct {
	Action string         `yaml:"action" json:"action"`
	Params map[string]any `yaml:"params" json:"params,omitempty"`
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
