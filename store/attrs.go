package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// MergeEntityAttrs sets the given attributes of the entity slug, leaving
// its others as they are; a nil value removes one. The inventory keeps a
// container's Proxmox facts (lock, hastate, protection, snapshots,
// storage_type, snapshot_blocker) this way; tests and tools set them
// directly.
func (s *Store) MergeEntityAttrs(ctx context.Context, slug string, attrs map[string]any) error {
	set, drop := map[string]any{}, []string{}
	for k, v := range attrs {
		if v == nil {
			drop = append(drop, k)
		} else {
			set[k] = v
		}
	}
	data, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("merge attrs of %s: %w", slug, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE entities SET attrs = (attrs || $2::jsonb) - $3::text[] WHERE slug = $1`, slug, data, drop)
	if err != nil {
		return fmt.Errorf("merge attrs of %s: %w", slug, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("merge attrs of %s: %w", slug, ErrNotFound)
	}
	return nil
}
