package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/policy"
)

// ResolveTargets finds the entities a name may mean, among the given types
// (all non-check types when none are given). An exact slug wins outright;
// otherwise the name is matched against entity names, guests' vmids and
// hostnames, case-insensitively. A guest's short forms, "lxc:101",
// "vm:200" and "strong/101", match every live guest of that kind (either
// kind for "strong/101") with that vmid (in that cluster), so on two
// standalone nodes that both have CT 101 they match both, and a name that
// is a VM on one node and a container on another matches both. The
// caller refuses anything but one match.
func (s *Store) ResolveTargets(ctx context.Context, ref string, types ...string) ([]Entity, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, nil
	}
	if kinds, cluster, vmid, ok := guestRef(ref); ok {
		if len(types) > 0 {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(types, k) })
		}
		switch {
		case len(kinds) == 0:
		case cluster == "":
			return s.guestsByVMID(ctx, kinds, vmid)
		case len(kinds) == 1:
			ref = policy.GuestSlug(policy.TargetType(kinds[0]), cluster, vmid)
		default:
			var out []Entity
			for _, k := range kinds {
				e, err := s.EntityBySlug(ctx, policy.GuestSlug(policy.TargetType(k), cluster, vmid))
				if errors.Is(err, ErrNotFound) || (err == nil && e.Lifecycle == "destroyed") {
					continue
				}
				if err != nil {
					return nil, err
				}
				out = append(out, e)
			}
			return out, nil
		}
	}
	if strings.Contains(ref, ":") {
		e, err := s.EntityBySlug(ctx, ref)
		if err == nil && (len(types) == 0 || slices.Contains(types, e.Type)) {
			return []Entity{e}, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	vmid := -1
	if n, err := strconv.Atoi(ref); err == nil {
		vmid = n
	}
	if types == nil {
		types = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+`
		WHERE e.type <> 'check' AND e.lifecycle <> 'destroyed'
		  AND (cardinality($2::text[]) = 0 OR e.type = ANY($2))
		  AND (lower(e.name) = lower($1)
		       OR lower(e.attrs->>'hostname') = lower($1)
		       OR (e.type IN ('lxc', 'vm') AND (e.attrs->>'vmid')::int = $3))
		ORDER BY e.slug`, ref, types, vmid)
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", ref, err)
	}
	defer rows.Close()
	var out []Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, fmt.Errorf("resolve %q: %w", ref, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// guestRef reads a guest's short forms: "lxc:101" or "vm:200" (cluster
// ""), "lxc:strong/101" or "vm:strong/200", which name their kind, and
// "strong/101", which may be either.
func guestRef(ref string) (kinds []string, cluster string, vmid int, ok bool) {
	name := strings.ToLower(ref)
	kinds = []string{string(policy.TargetLXC), string(policy.TargetVM)}
	for _, k := range kinds {
		if rest, prefixed := strings.CutPrefix(name, k+":"); prefixed {
			name, kinds = rest, []string{k}
			break
		}
	}
	if len(kinds) > 1 && !strings.Contains(name, "/") {
		return nil, "", 0, false
	}
	cluster, vmid, err := policy.ParseContainerName(name)
	return kinds, cluster, vmid, err == nil
}

// guestsByVMID lists the live guests of the given kinds with vmid, in
// every cluster.
func (s *Store) guestsByVMID(ctx context.Context, kinds []string, vmid int) ([]Entity, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+`
		WHERE e.type = ANY($2) AND e.lifecycle <> 'destroyed' AND (e.attrs->>'vmid')::int = $1
		ORDER BY e.slug`, vmid, kinds)
	if err != nil {
		return nil, fmt.Errorf("resolve %s:%d: %w", strings.Join(kinds, "|"), vmid, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entity, error) { return scanEntity(row) })
	if err != nil {
		return nil, fmt.Errorf("resolve %s:%d: %w", strings.Join(kinds, "|"), vmid, err)
	}
	return out, nil
}

// EntityByID loads one entity with its status.
func (s *Store) EntityByID(ctx context.Context, id uuid.UUID) (Entity, error) {
	e, err := scanEntity(s.pool.QueryRow(ctx, `SELECT `+entityColumns+` FROM `+entityFrom+` WHERE e.id = $1`, id))
	if err != nil {
		return Entity{}, fmt.Errorf("load entity %s: %w", id, err)
	}
	return e, nil
}

// PolicyOverride raises or lowers the class of an action on one entity.
type PolicyOverride struct {
	Slug      string
	Action    string // "*" for every action
	RiskClass string
	Reason    string
}

// PolicyOverrides returns every override, ordered by slug and action.
func (s *Store) PolicyOverrides(ctx context.Context) ([]PolicyOverride, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.slug, p.action, p.risk_class, p.reason
		FROM policy_overrides p JOIN entities e ON e.id = p.entity_id ORDER BY e.slug, p.action`)
	if err != nil {
		return nil, fmt.Errorf("list policy overrides: %w", err)
	}
	defer rows.Close()
	var out []PolicyOverride
	for rows.Next() {
		var p PolicyOverride
		if err := rows.Scan(&p.Slug, &p.Action, &p.RiskClass, &p.Reason); err != nil {
			return nil, fmt.Errorf("list policy overrides: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
