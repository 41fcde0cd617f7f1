package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// AuditEntry is one row of the append-only audit log.
type AuditEntry struct {
	ID          int64
	Actor       string
	Action      string
	ExecutionID *uuid.UUID
	EntityID    *uuid.UUID
	Detail      map[string]any
}

// AppendAudit writes one audit row. The table refuses updates and deletes,
// so what is written here stays.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) error {
	if err := audit(ctx, s.pool, e); err != nil {
		return fmt.Errorf("append audit %s: %w", e.Action, err)
	}
	return nil
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// AuditFor returns the audit rows of one execution, oldest first.
func (s *Store) AuditFor(ctx context.Context, executionID uuid.UUID) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, actor, action, execution_id, entity_id, detail
		FROM audit_log WHERE execution_id = $1 ORDER BY id`, executionID)
	if err != nil {
		return nil, fmt.Errorf("audit of %s: %w", executionID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := row.Scan(&e.ID, &e.Actor, &e.Action, &e.ExecutionID, &e.EntityID, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit of %s: %w", executionID, err)
	}
	return out, nil
}
