package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/policy"
)

// SeedStats counts the rows a seed run inserted or changed. A second run of
// the same seed reports zero.
type SeedStats struct {
	Entities      int
	Relationships int
	Checks        int
	Policy        int
	Knowledge     int
	Runbooks      int
}

// Total is the number of rows written.
func (st SeedStats) Total() int {
	return st.Entities + st.Relationships + st.Checks + st.Policy + st.Knowledge + st.Runbooks
}

// ApplySeed upserts the seed in one transaction, keyed by slug. Rows whose
// values are unchanged are not touched, so running it twice is a no-op and an
// edited value is updated in place with its id kept.
func (s *Store) ApplySeed(ctx context.Context, seed *fleetseed.Seed) (SeedStats, error) {
	var st SeedStats
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		a := seedApplier{tx: tx, ids: map[string]uuid.UUID{}}
		return a.apply(ctx, seed, &st)
	})
	if err != nil {
		return SeedStats{}, fmt.Errorf("apply seed: %w", err)
	}
	return st, nil
}

type seedApplier struct {
	tx  pgx.Tx
	ids map[string]uuid.UUID
}

func (a *seedApplier) apply(ctx context.Context, seed *fleetseed.Seed, st *SeedStats) error {
	for _, h := range seed.Hosts {
		if err := a.host(ctx, st, h); err != nil {
			return err
		}
	}
	for _, r := range seed.Relationships {
		if err := a.edge(ctx, st, r.From, r.To, r.Type); err != nil {
			return err
		}
	}
	for _, c := range seed.Checks {
		if err := a.check(ctx, st, c); err != nil {
			return err
		}
	}
	for _, p := range seed.Policy {
		if err := a.policy(ctx, st, p); err != nil {
			return err
		}
	}
	for _, d := range seed.Knowledge {
		if err := a.doc(ctx, st, d); err != nil {
			return err
		}
	}
	for _, r := range seed.Runbooks {
		if err := a.runbook(ctx, st, r); err != nil {
			return err
		}
	}
	return nil
}

// host upserts a host, its containers and their services, and the edges
// between them.
func (a *seedApplier) host(ctx context.Context, st *SeedStats, h fleetseed.Host) error {
	hostSlug := "host:" + h.Name
	err := a.entity(ctx, st, hostSlug, h.Name, map[string]any{
		"ssh": h.SSH, "node": cmp.Or(h.Node, h.Name), "cluster": h.ClusterName(), "cores": h.Cores,
		"memory_mb": h.MemoryMB, "storage": cmp.Or(h.Storage, "local-lvm"),
	})
	if err != nil {
		return err
	}
	if err := a.hostSite(ctx, st, hostSlug, cmp.Or(h.Site, defaultSite)); err != nil {
		return err
	}
	for _, c := range h.Containers {
		lxcSlug := policy.ContainerSlug(h.ClusterName(), c.VMID)
		if err := renameContainer(ctx, a.tx, h.Name, c.VMID, lxcSlug); err != nil {
			return err
		}
		err := a.entity(ctx, st, lxcSlug, c.Hostname, map[string]any{
			"vmid": c.VMID, "host": h.Name, "hostname": c.Hostname, "ip": c.IP,
			"gateway": c.Gateway, "cores": c.Cores, "memory_mb": c.MemoryMB, "disk_gb": c.DiskGB,
		})
		if err != nil {
			return err
		}
		if err := a.edge(ctx, st, hostSlug, lxcSlug, "hosts"); err != nil {
			return err
		}
		for _, svc := range c.Services {
			svcSlug := "service:" + svc.Name
			// Without a unit, the service's name (a DNS label) names it.
			err := a.entity(ctx, st, svcSlug, svc.Name, map[string]any{
				"unit": policy.NormalizeUnit(cmp.Or(svc.Unit, svc.Name)), "port": svc.Port,
				"health_path": svc.HealthPath, "vmid": c.VMID, "host": h.Name, "container": lxcSlug,
			})
			if err != nil {
				return err
			}
			if err := a.edge(ctx, st, lxcSlug, svcSlug, "runs"); err != nil {
				return err
			}
		}
	}
	for _, vm := range h.VMs {
		vmSlug := policy.GuestSlug(policy.TargetVM, h.ClusterName(), vm.VMID)
		attrs := map[string]any{
			"vmid": vm.VMID, "host": h.Name, "cores": vm.Cores, "memory_mb": vm.MemoryMB, "disk_gb": vm.DiskGB, "agent": vm.Agent,
		}
		if vm.IP != "" {
			attrs["ip"] = vm.IP
		}
		if err := a.entity(ctx, st, vmSlug, vm.Name, attrs); err != nil {
			return err
		}
		if err := a.edge(ctx, st, hostSlug, vmSlug, "hosts"); err != nil {
			return err
		}
	}
	return nil
}

func (a *seedApplier) policy(ctx context.Context, st *SeedStats, p fleetseed.Policy) error {
	tag, err := a.tx.Exec(ctx, `INSERT INTO policy_overrides (id, entity_id, action, risk_class, reason)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (entity_id, action) DO UPDATE
		SET risk_class = excluded.risk_class, reason = excluded.reason
		WHERE (policy_overrides.risk_class, policy_overrides.reason) IS DISTINCT FROM (excluded.risk_class, excluded.reason)`,
		newID(), a.ids[p.Target], cmp.Or(p.Action, "*"), p.RiskClass, p.Reason)
	if err != nil {
		return fmt.Errorf("policy for %s: %w", p.Target, err)
	}
	st.Policy += int(tag.RowsAffected())
	return nil
}

func (a *seedApplier) doc(ctx context.Context, st *SeedStats, d fleetseed.Doc) error {
	ids := make([]uuid.UUID, 0, len(d.Entities))
	for _, slug := range d.Entities {
		ids = append(ids, a.ids[slug])
	}
	tags := d.Tags
	if tags == nil {
		tags = []string{}
	}
	tag, err := a.tx.Exec(ctx, `INSERT INTO knowledge_docs (id, slug, title, kind, body, entity_ids, tags)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (slug) DO UPDATE
		SET title = excluded.title, kind = excluded.kind, body = excluded.body,
			entity_ids = excluded.entity_ids, tags = excluded.tags, updated_at = now()
		WHERE (knowledge_docs.title, knowledge_docs.kind, knowledge_docs.body, knowledge_docs.entity_ids, knowledge_docs.tags)
			IS DISTINCT FROM (excluded.title, excluded.kind, excluded.body, excluded.entity_ids, excluded.tags)`,
		newID(), d.Slug, d.Title, cmp.Or(d.Kind, "doc"), d.Body, ids, tags)
	if err != nil {
		return fmt.Errorf("knowledge %s: %w", d.Slug, err)
	}
	st.Knowledge += int(tag.RowsAffected())
	return nil
}

func (a *seedApplier) runbook(ctx context.Context, st *SeedStats, r Runbook) error {
	steps, err := json.Marshal(r.Steps)
	if err != nil {
		return fmt.Errorf("runbook %s: %w", r.Slug, err)
	}
	tag, err := a.tx.Exec(ctx, `INSERT INTO runbooks (id, slug, title, description, triggers, target_type, steps)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (slug) DO UPDATE
		SET title = excluded.title, description = excluded.description, triggers = excluded.triggers,
			target_type = excluded.target_type, steps = excluded.steps, updated_at = now()
		WHERE (runbooks.title, runbooks.description, runbooks.triggers, runbooks.target_type, runbooks.steps)
			IS DISTINCT FROM (excluded.title, excluded.description, excluded.triggers, excluded.target_type, excluded.steps)`,
		newID(), r.Slug, r.Title, r.Description, r.Triggers, r.TargetType, steps)
	if err != nil {
		return fmt.Errorf("runbook %s: %w", r.Slug, err)
	}
	st.Runbooks += int(tag.RowsAffected())
	return nil
}

// entity upserts one entity and its status row and remembers its id.
func (a *seedApplier) entity(ctx context.Context, st *SeedStats, slug, name string, attrs map[string]any) error {
	typ, _, _ := strings.Cut(slug, ":")
	raw, err := json.Marshal(attrs)
	if err != nil {
		return fmt.Errorf("entity %s: %w", slug, err)
	}
	// The node's live facts (inventory.LiveKeys) are the inventory's, not the
	// seeds': re-seeding keeps them.
	const kept = `coalesce((SELECT jsonb_object_agg(k, v) FROM jsonb_each(entities.attrs) AS j(k, v) WHERE k = ANY($6)), '{}'::jsonb)`
	tag, err := a.tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, attrs)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (slug) DO UPDATE
		SET type = excluded.type, name = excluded.name, attrs = excluded.attrs || `+kept+`, updated_at = now()
		WHERE (entities.type, entities.name, entities.attrs) IS DISTINCT FROM (excluded.type, excluded.name, excluded.attrs || `+kept+`)`,
		newID(), slug, typ, name, raw, inventory.LiveKeys)
	if err != nil {
		return fmt.Errorf("entity %s: %w", slug, err)
	}
	st.Entities += int(tag.RowsAffected())
	var id uuid.UUID
	if err := a.tx.QueryRow(ctx, `SELECT id FROM entities WHERE slug = $1`, slug).Scan(&id); err != nil {
		return fmt.Errorf("entity %s: %w", slug, err)
	}
	a.ids[slug] = id
	if _, err := a.tx.Exec(ctx, `INSERT INTO entity_status (entity_id) VALUES ($1) ON CONFLICT DO NOTHING`, id); err != nil {
		return fmt.Errorf("entity status %s: %w", slug, err)
	}
	return nil
}

// renameContainer gives the container vmid on host the slug it has now,
// when the fleet has it under another: its host's cluster was named since.
// The container keeps its id, so its history, checks and links follow it.
// Nothing happens when the slug is taken already.
func renameContainer(ctx context.Context, tx pgx.Tx, host string, vmid int, slug string) error {
	_, err := tx.Exec(ctx, `UPDATE entities SET slug = $3, updated_at = now()
		WHERE id = (SELECT id FROM entities
		            WHERE type = 'lxc' AND attrs->>'host' = $1 AND attrs->>'vmid' = $2 AND slug <> $3
		            ORDER BY lifecycle = 'destroyed', updated_at DESC LIMIT 1)
		  AND NOT EXISTS (SELECT 1 FROM entities WHERE slug = $3)`, host, strconv.Itoa(vmid), slug)
	if err != nil {
		return fmt.Errorf("rename container %d on %s to %s: %w", vmid, host, slug, err)
	}
	return nil
}

// hostSite puts a host in its site, creating the site on first mention.
func (a *seedApplier) hostSite(ctx context.Context, st *SeedStats, slug, site string) error {
	if _, err := a.tx.Exec(ctx, `INSERT INTO sites (name) VALUES ($1) ON CONFLICT DO NOTHING`, site); err != nil {
		return fmt.Errorf("site %s of %s: %w", site, slug, err)
	}
	tag, err := a.tx.Exec(ctx, `UPDATE entities SET site = $2, updated_at = now()
		WHERE slug = $1 AND site IS DISTINCT FROM $2`, slug, site)
	if err != nil {
		return fmt.Errorf("site %s of %s: %w", site, slug, err)
	}
	st.Entities += int(tag.RowsAffected())
	return nil
}

func (a *seedApplier) edge(ctx context.Context, st *SeedStats, from, to, typ string) error {
	tag, err := a.tx.Exec(ctx, `INSERT INTO relationships (id, from_id, to_id, type)
		VALUES ($1, $2, $3, $4) ON CONFLICT (from_id, to_id, type) DO NOTHING`,
		newID(), a.ids[from], a.ids[to], typ)
	if err != nil {
		return fmt.Errorf("relationship %s %s %s: %w", from, typ, to, err)
	}
	st.Relationships += int(tag.RowsAffected())
	return nil
}

// check upserts a check definition with its own bookkeeping entity
// (check:<slug>), which is never the entity it observes.
func (a *seedApplier) check(ctx context.Context, st *SeedStats, c fleetseed.Check) error {
	checkSlug := "check:" + c.Slug
	if err := a.entity(ctx, st, checkSlug, c.Slug, map[string]any{"kind": c.Kind, "target": c.Target}); err != nil {
		return err
	}
	spec, err := json.Marshal(nonNil(c.Spec))
	if err != nil {
		return fmt.Errorf("check %s: %w", c.Slug, err)
	}
	enabled := c.Enabled == nil || *c.Enabled
	interval := c.Interval
	if interval == 0 {
		interval = 60
	}
	tag, err := a.tx.Exec(ctx, `INSERT INTO check_defs (id, slug, check_entity_id, target_id, kind, spec, interval_seconds, enabled)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (slug) DO UPDATE
		SET check_entity_id = excluded.check_entity_id, target_id = excluded.target_id, kind = excluded.kind,
			spec = excluded.spec, interval_seconds = excluded.interval_seconds, enabled = excluded.enabled, updated_at = now()
		WHERE (check_defs.check_entity_id, check_defs.target_id, check_defs.kind, check_defs.spec, check_defs.interval_seconds, check_defs.enabled)
			IS DISTINCT FROM (excluded.check_entity_id, excluded.target_id, excluded.kind, excluded.spec, excluded.interval_seconds, excluded.enabled)`,
		newID(), c.Slug, a.ids[checkSlug], a.ids[c.Target], c.Kind, spec, interval, enabled)
	if err != nil {
		return fmt.Errorf("check %s: %w", c.Slug, err)
	}
	st.Checks += int(tag.RowsAffected())
	return nil
}

// RegisterContainer adds a container that Nomos created to the fleet: the
// lxc entity, its status row and the host's hosts edge. Lifecycle is
// "active" for a container that provisioned cleanly, "provisioning" for one
// left half-done.
func (s *Store) RegisterContainer(ctx context.Context, host string, vmid int, hostname, ip, lifecycle string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		a := seedApplier{tx: tx, ids: map[string]uuid.UUID{}}
		var st SeedStats
		hostSlug := "host:" + host
		var hostID uuid.UUID
		var cluster string
		if err := tx.QueryRow(ctx, `SELECT h.id, `+hostCluster+` FROM entities h WHERE h.slug = $1`, hostSlug).Scan(&hostID, &cluster); err != nil {
			return fmt.Errorf("register container %d: host %s: %w", vmid, host, interpretError(err))
		}
		a.ids[hostSlug] = hostID
		slug := policy.ContainerSlug(cluster, vmid)
		if err := a.entity(ctx, &st, slug, hostname, map[string]any{
			"vmid": vmid, "host": host, "hostname": hostname, "ip": ip,
		}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE entities SET lifecycle = $2 WHERE slug = $1`, slug, lifecycle); err != nil {
			return fmt.Errorf("register container %d: %w", vmid, err)
		}
		return a.edge(ctx, &st, hostSlug, slug, "hosts")
	})
}

// ContainerSlugOn is the slug the container vmid has on host: its
// cluster's and that vmid's.
func (s *Store) ContainerSlugOn(ctx context.Context, host string, vmid int) (string, error) {
	var cluster string
	if err := s.pool.QueryRow(ctx, `SELECT `+hostCluster+` FROM entities h WHERE h.type = 'host' AND h.name = $1`, host).Scan(&cluster); err != nil {
		return "", fmt.Errorf("cluster of host %s: %w", host, interpretError(err))
	}
	return policy.ContainerSlug(cluster, vmid), nil
}

// SetLifecycle moves an entity along its lifecycle, e.g. to destroyed once
// its container is gone.
func (s *Store) SetLifecycle(ctx context.Context, id uuid.UUID, lifecycle string) error {
	_, err := s.pool.Exec(ctx, `UPDATE entities SET lifecycle = $2, updated_at = $3 WHERE id = $1`, id, lifecycle, s.now())
	if err != nil {
		return fmt.Errorf("set lifecycle of %s: %w", id, err)
	}
	return nil
}
