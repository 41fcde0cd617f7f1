package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
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
	detail, err := json.Marshal(nonNil(e.Detail))
	if err != nil {
		return fmt.Errorf("append audit %s: %w", e.Action, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO audit_log (actor, action, execution_id, entity_id, detail)
		VALUES ($1, $2, $3, $4, $5)`, e.Actor, e.Action, e.ExecutionID, e.EntityID, detail)
	if err != nil {
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
