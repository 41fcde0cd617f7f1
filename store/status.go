package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CheckObservation is one probe result for the entity it observed.
type CheckObservation struct {
	TargetID string
	Health   string
	Detail   string
	Metrics  map[string]float64
	At       time.Time
}

// RecordCheck sets the target's health and appends its metric samples. An
// observation older than the one on record does not overwrite it.
func (s *Store) RecordCheck(ctx context.Context, o CheckObservation) error {
	id, err := uuid.Parse(o.TargetID)
	if err != nil {
		return fmt.Errorf("record check: bad target id %q", o.TargetID)
	}
	at := o.At
	if at.IsZero() {
		at = s.now()
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id, health, detail, last_check_at, updated_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT (entity_id) DO UPDATE SET health = excluded.health, detail = excluded.detail,
				last_check_at = excluded.last_check_at, updated_at = excluded.updated_at
			WHERE entity_status.last_check_at IS NULL OR entity_status.last_check_at <= excluded.last_check_at`,
			id, o.Health, o.Detail, at)
		if err != nil {
			return fmt.Errorf("record check for %s: %w", id, err)
		}
		for metric, v := range o.Metrics {
			_, err := tx.Exec(ctx, `INSERT INTO metric_samples (entity_id, metric, value, at) VALUES ($1, $2, $3, $4)
				ON CONFLICT DO NOTHING`, id, metric, v, at)
			if err != nil {
				return fmt.Errorf("record metric %s for %s: %w", metric, id, err)
			}
		}
		return nil
	})
}
