package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SnapshotOrigin is the execution that took one of Nomos's snapshots of a
// container, before the change it approved.
type SnapshotOrigin struct {
	Name        string
	ExecutionID uuid.UUID
	Action      string
	TargetSlug  string
	RequestedBy string
	// ApprovedBy is who approved the plan; empty if nobody recorded did.
	ApprovedBy string
	At         time.Time
}

// SnapshotOrigins finds, by name, the executions that took the snapshots
// names of the container container: those on the container itself and
// those on a service it runs, whose result names the snapshot.
func (s *Store) SnapshotOrigins(ctx context.Context, container string, names []string) (map[string]SnapshotOrigin, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.result->>'snapshot', x.id, x.action, x.target_slug, x.requested_by,
			coalesce(a.decided_by, ''), x.created_at
		FROM executions x LEFT JOIN approvals a ON a.execution_id = coalesce(x.plan_id, x.id) AND a.decision = 'approved'
		WHERE x.result->>'snapshot' = ANY($2)
		  AND (x.target_slug = $1 OR x.target_slug IN (
		       SELECT sv.slug FROM relationships r JOIN entities c ON c.id = r.from_id JOIN entities sv ON sv.id = r.to_id
		       WHERE c.slug = $1 AND r.type = 'runs'))
		ORDER BY x.created_at`, container, names)
	if err != nil {
		return nil, fmt.Errorf("snapshot origins of %s: %w", container, err)
	}
	origins, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SnapshotOrigin, error) {
		var o SnapshotOrigin
		err := r.Scan(&o.Name, &o.ExecutionID, &o.Action, &o.TargetSlug, &o.RequestedBy, &o.ApprovedBy, &o.At)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot origins of %s: %w", container, err)
	}
	out := map[string]SnapshotOrigin{}
	for _, o := range origins {
		out[o.Name] = o
	}
	return out, nil
}
