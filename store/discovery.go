package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/policy"
)

// Fleet discovery: the runs the bot sends to take each host's inventory,
// and the diff of an inventory against the fleet, by the rules of package
// inventory.

// Errors of ApplyInventory.
var (
	// ErrInventoryApplied: the run's inventory was applied already.
	ErrInventoryApplied = errors.New("inventory already applied")
	// ErrInventoryNotSent: no such run was sent for that host.
	ErrInventoryNotSent = errors.New("inventory was not requested")
)

// ScheduledBy is the requested_by of a run the schedule sent.
const ScheduledBy = "schedule"

// InventoryRun is one request for a host's inventory and what came of it.
type InventoryRun struct {
	ID     uuid.UUID
	HostID uuid.UUID
	// Host is the host's name, Node its Proxmox node name (attrs.node,
	// else the name) and SSH its address; empty when it has none.
	Host     string
	Node     string
	SSH      string
	HostLive bool
	// Site is the host's site, whose actuator takes the request.
	Site        string
	RequestedBy string
	RequestedAt time.Time
	SentAt      *time.Time
	ExpiresAt   *time.Time
	AppliedAt   *time.Time
	// Error says why the inventory could not be taken.
	Error string
	// Changes is what applying it found; nil until it is applied.
	Changes *InventoryChanges
}

// ContainerRef names a container in a summary.
type ContainerRef struct {
	VMID int    `json:"vmid"`
	Name string `json:"name"`
}

// ContainerChange is a discovered container whose values changed.
type ContainerChange struct {
	ContainerRef
	Keys []string `json:"keys"`
}

// RunStateChange is a container that started or stopped.
type RunStateChange struct {
	ContainerRef
	From string `json:"from"`
	To   string `json:"to"`
}

// InventoryChanges is what applying one host's inventory found.
type InventoryChanges struct {
	Host string `json:"host"`
	// Seen is how many containers the host listed.
	Seen    int               `json:"seen"`
	New     []ContainerRef    `json:"new,omitempty"`
	Back    []ContainerRef    `json:"back,omitempty"`
	Changed []ContainerChange `json:"changed,omitempty"`
	Gone    []ContainerRef    `json:"gone,omitempty"`
	// RunStates are containers that started or stopped: health, which
	// status and the checks show, so not announced.
	RunStates []RunStateChange `json:"run_states,omitempty"`
	// Skipped lists containers left alone: being created or destroyed by
	// an execution, or in the seeds on another host.
	Skipped []ContainerRef `json:"skipped,omitempty"`
	// Superseded: a newer inventory of the host was applied first, so
	// this one changed nothing.
	Superseded bool `json:"superseded,omitempty"`
}

// Announced reports whether the ops room is to hear of the changes:
// containers new, back, changed or gone.
func (c InventoryChanges) Announced() bool {
	return len(c.New)+len(c.Back)+len(c.Changed)+len(c.Gone) > 0
}

// InventoryObservation is a verified inventory of one host.
type InventoryObservation struct {
	RunID  uuid.UUID
	HostID uuid.UUID
	// At is when the actuator took it.
	At         time.Time
	Containers []inventory.Container
	// VMs are the host's QEMU VMs; nil when the actuator did not list
	// them, which marks none gone.
	VMs []inventory.VM
	// Elsewhere are vmids the cluster places on other nodes.
	Elsewhere []int
	// Horizon is how long the run states stay current; past it the
	// containers' health is stale.
	Horizon time.Duration
	// Actor is recorded in the audit log.
	Actor string
}

const inventoryRunColumns = `r.id, r.host_id, h.name, coalesce(nullif(h.attrs->>'node', ''), h.name), coalesce(h.attrs->>'ssh', ''),
	h.lifecycle <> 'destroyed', r.requested_by, r.requested_at, r.sent_at, r.expires_at, r.applied_at, r.error, r.changes,
	coalesce(h.site, 'default')`

func scanInventoryRun(row pgx.Row) (InventoryRun, error) {
	var r InventoryRun
	var changes []byte
	err := row.Scan(&r.ID, &r.HostID, &r.Host, &r.Node, &r.SSH, &r.HostLive, &r.RequestedBy, &r.RequestedAt,
		&r.SentAt, &r.ExpiresAt, &r.AppliedAt, &r.Error, &changes, &r.Site)
	if err != nil {
		return InventoryRun{}, interpretError(err)
	}
	if changes != nil {
		r.Changes = &InventoryChanges{}
		if err := json.Unmarshal(changes, r.Changes); err != nil {
			return InventoryRun{}, fmt.Errorf("decode changes of inventory run %s: %w", r.ID, err)
		}
	}
	return r, nil
}

// inventoryLock serialises scheduling, so two bots never schedule a host
// twice.
const inventoryLock = 72300106

// RequestInventory asks for an inventory of every live host, to be sent
// by the bot's next discovery pass, and returns the runs.
func (s *Store) RequestInventory(ctx context.Context, by string) ([]InventoryRun, error) {
	now := s.now()
	var ids []uuid.UUID
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM entities WHERE type = 'host' AND lifecycle <> 'destroyed' ORDER BY name`)
		if err != nil {
			return err
		}
		hosts, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		for _, h := range hosts {
			id := newID()
			if _, err := tx.Exec(ctx, `INSERT INTO inventory_runs (id, host_id, requested_by, requested_at) VALUES ($1, $2, $3, $4)`,
				id, h, by, now); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("request inventory: %w", err)
	}
	return s.InventoryRuns(ctx, ids)
}

// ClaimInventoryRuns schedules a run for each live host that has had none
// requested within interval, then takes up to limit runs not yet sent,
// oldest first, and marks them sent at now with an expiry an interval on.
// Each is taken once, whoever else is claiming.
func (s *Store) ClaimInventoryRuns(ctx context.Context, now time.Time, interval time.Duration, limit int) ([]InventoryRun, error) {
	var ids []uuid.UUID
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, inventoryLock); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT h.id FROM entities h
			WHERE h.type = 'host' AND h.lifecycle <> 'destroyed'
			  AND NOT EXISTS (SELECT 1 FROM inventory_runs r WHERE r.host_id = h.id
			                  AND (r.sent_at IS NULL OR r.requested_at > $1::timestamptz - make_interval(secs => $2)))
			ORDER BY h.name`, now, interval.Seconds())
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		for _, h := range due {
			if _, err := tx.Exec(ctx, `INSERT INTO inventory_runs (id, host_id, requested_by, requested_at) VALUES ($1, $2, $3, $4)`,
				newID(), h, ScheduledBy, now); err != nil {
				return err
			}
		}
		rows, err = tx.Query(ctx, `UPDATE inventory_runs r SET sent_at = $1, expires_at = $1::timestamptz + make_interval(secs => $2)
			FROM (SELECT id FROM inventory_runs WHERE sent_at IS NULL ORDER BY requested_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
			WHERE r.id = due.id
			RETURNING r.id`, now, interval.Seconds(), limit)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim inventory runs: %w", err)
	}
	return s.InventoryRuns(ctx, ids)
}

// InventoryRun loads one run.
func (s *Store) InventoryRun(ctx context.Context, id uuid.UUID) (InventoryRun, error) {
	r, err := scanInventoryRun(s.pool.QueryRow(ctx, `SELECT `+inventoryRunColumns+`
		FROM inventory_runs r JOIN entities h ON h.id = r.host_id WHERE r.id = $1`, id))
	if err != nil {
		return InventoryRun{}, fmt.Errorf("load inventory run %s: %w", id, err)
	}
	return r, nil
}

// InventoryRuns loads runs by id, by host name.
func (s *Store) InventoryRuns(ctx context.Context, ids []uuid.UUID) ([]InventoryRun, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+inventoryRunColumns+`
		FROM inventory_runs r JOIN entities h ON h.id = r.host_id WHERE r.id = ANY($1) ORDER BY h.name, r.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("load inventory runs: %w", err)
	}
	defer rows.Close()
	var out []InventoryRun
	for rows.Next() {
		r, err := scanInventoryRun(rows)
		if err != nil {
			return nil, fmt.Errorf("load inventory runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// FailInventoryRun records that a run's inventory could not be taken: it
// changes nothing else. ErrInventoryApplied means the run already has an
// outcome.
func (s *Store) FailInventoryRun(ctx context.Context, id uuid.UUID, reason string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE inventory_runs SET applied_at = $2, error = $3, sent_at = coalesce(sent_at, $2)
		WHERE id = $1 AND applied_at IS NULL`, id, s.now(), reason)
	if err != nil {
		return fmt.Errorf("fail inventory run %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("fail inventory run %s: %w", id, ErrInventoryApplied)
	}
	return nil
}

// fleetContainer is a container entity as the diff sees it.
type fleetContainer struct {
	id        uuid.UUID
	slug      string
	vmid      int
	name      string
	attrs     map[string]any
	lifecycle string
	runState  string
}

func (c fleetContainer) ref() ContainerRef { return ContainerRef{VMID: c.vmid, Name: c.name} }

func (c fleetContainer) discovered() bool { d, _ := c.attrs["discovered"].(bool); return d }

func (c fleetContainer) host() string { h, _ := c.attrs["host"].(string); return h }

// liveLifecycles are the lifecycles of a container that may be gone.
var liveLifecycles = []string{"active", "deprecated", "provisioning"}

// ApplyInventory diffs a verified inventory of one host against the fleet
// and applies it in one transaction, auditing each change (see the rules
// at the top of this file). The run must have been sent for that host and
// not applied yet: ErrNotFound, ErrInventoryNotSent and
// ErrInventoryApplied say otherwise. An inventory no newer than the last
// one applied for the host changes nothing and comes back Superseded.
func (s *Store) ApplyInventory(ctx context.Context, o InventoryObservation) (InventoryChanges, error) {
	var ch InventoryChanges
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var hostID uuid.UUID
		var sent, applied *time.Time
		err := tx.QueryRow(ctx, `SELECT host_id, sent_at, applied_at FROM inventory_runs WHERE id = $1 FOR UPDATE`, o.RunID).
			Scan(&hostID, &sent, &applied)
		switch {
		case err != nil:
			return interpretError(err)
		case hostID != o.HostID || sent == nil:
			return ErrInventoryNotSent
		case applied != nil:
			return ErrInventoryApplied
		}
		a := &inventoryApplier{tx: tx, o: o, now: s.now(), ch: &ch}
		if err := a.apply(ctx); err != nil {
			return err
		}
		raw, err := json.Marshal(ch)
		if err != nil {
			return err
		}
		reason := ""
		if ch.Superseded {
			reason = "a newer inventory of the host was applied first"
		}
		_, err = tx.Exec(ctx, `UPDATE inventory_runs SET applied_at = $2, observed_at = $3, changes = $4, announce = $5, error = $6 WHERE id = $1`,
			o.RunID, a.now, o.At, raw, ch.Announced(), reason)
		return err
	})
	if err != nil {
		return InventoryChanges{}, fmt.Errorf("apply inventory %s: %w", o.RunID, err)
	}
	return ch, nil
}

type inventoryApplier struct {
	tx  pgx.Tx
	o   InventoryObservation
	now time.Time
	ch  *InventoryChanges

	hostID   uuid.UUID
	host     string
	cluster  string          // the host's cluster, which its containers' slugs name
	creating map[string]bool // "vmid:N" and "hostname:X" of in-flight pct_creates on the host
	removing map[string]bool // slugs of in-flight pct_destroys
}

func (a *inventoryApplier) apply(ctx context.Context) error {
	tx, o := a.tx, a.o
	var newest *time.Time
	if err := tx.QueryRow(ctx, `SELECT max(observed_at) FROM inventory_runs WHERE host_id = $1 AND applied_at IS NOT NULL`, o.HostID).
		Scan(&newest); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, `SELECT h.id, h.name, `+hostCluster+` FROM entities h WHERE h.id = $1 AND h.type = 'host'`, o.HostID).
		Scan(&a.hostID, &a.host, &a.cluster); err != nil {
		return fmt.Errorf("host %s: %w", o.HostID, interpretError(err))
	}
	a.ch.Host, a.ch.Seen = a.host, len(o.Containers)
	if newest != nil && !o.At.Truncate(time.Microsecond).After(*newest) {
		a.ch.Superseded = true
		return nil
	}
	if err := a.loadInFlight(ctx); err != nil {
		return err
	}
	slugs := make([]string, len(o.Containers))
	for i, c := range o.Containers {
		slugs[i] = policy.ContainerSlug(a.cluster, c.VMID)
	}
	fleet, err := a.loadFleet(ctx, slugs)
	if err != nil {
		return err
	}
	onHost := map[int]fleetContainer{}
	for _, e := range fleet {
		if e.host() == a.host {
			onHost[e.vmid] = e
		}
	}
	var touched []uuid.UUID
	seen := map[string]bool{}
	for _, c := range o.Containers {
		slug := policy.ContainerSlug(a.cluster, c.VMID)
		seen[slug] = true
		e, ok := fleet[slug]
		if old, named := onHost[c.VMID]; !ok && named && old.slug != slug {
			// Its host's cluster was named since it was last seen.
			if err := renameContainer(ctx, a.tx, a.host, c.VMID, slug); err != nil {
				return err
			}
			seen[old.slug] = true
			e, ok = old, true
			e.slug = slug
		}
		var id uuid.UUID
		switch {
		case !ok && c.Template:
			continue // a template is no workload
		case !ok && (a.creating["vmid:"+strconv.Itoa(c.VMID)] || a.creating["hostname:"+c.Hostname]):
			a.ch.Skipped = append(a.ch.Skipped, ContainerRef{VMID: c.VMID, Name: inventory.ContainerName(c)})
			continue
		case !ok:
			if id, err = a.create(ctx, c); err != nil {
				return err
			}
		case !e.discovered() && e.host() != a.host:
			// The seeds place it on another host; they win, and this
			// host's word on it waits until they agree.
			a.ch.Skipped = append(a.ch.Skipped, e.ref())
			continue
		default:
			id = e.id
			if err := a.update(ctx, e, c); err != nil {
				return err
			}
		}
		if err := a.recordLive(ctx, id, e, c); err != nil {
			return err
		}
		if err := a.runState(ctx, id, e, c); err != nil {
			return err
		}
		touched = append(touched, id)
	}
	elsewhere := map[int]bool{}
	for _, v := range o.Elsewhere {
		elsewhere[v] = true
	}
	for _, slug := range slices.Sorted(maps.Keys(fleet)) {
		e := fleet[slug]
		if seen[slug] || e.host() != a.host || !slices.Contains(liveLifecycles, e.lifecycle) || elsewhere[e.vmid] || a.removing[slug] {
			continue
		}
		if err := a.gone(ctx, e); err != nil {
			return err
		}
	}
	vms, err := a.applyVMs(ctx)
	if err != nil {
		return err
	}
	_, err = rollUp(ctx, tx, append(touched, vms...), a.now)
	return err
}

// applyVMs records the run state and live facts (agent, lock, template)
// of the host's VMs, and adds a VM the fleet does not know yet, as
// discovered. A template is kept as a template, never added as a
// workload. A VM no longer listed is not marked gone yet.
func (a *inventoryApplier) applyVMs(ctx context.Context) ([]uuid.UUID, error) {
	if len(a.o.VMs) == 0 {
		return nil, nil
	}
	slugs := make([]string, len(a.o.VMs))
	for i, v := range a.o.VMs {
		slugs[i] = policy.GuestSlug(policy.TargetVM, a.cluster, v.VMID)
	}
	fleet, err := a.loadFleetOf(ctx, "vm", slugs)
	if err != nil {
		return nil, err
	}
	var touched []uuid.UUID
	for i, v := range a.o.VMs {
		slug := slugs[i]
		e, ok := fleet[slug]
		name := cmp.Or(v.Name, fmt.Sprintf("vm%d", v.VMID))
		switch {
		case !ok && v.Template:
			continue
		case !ok:
			e = fleetContainer{id: newID(), slug: slug, vmid: v.VMID, name: name}
			attrs, err := json.Marshal(map[string]any{"vmid": v.VMID, "host": a.host, "discovered": true})
			if err != nil {
				return nil, err
			}
			if _, err := a.tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, attrs, lifecycle, created_at, updated_at)
				VALUES ($1, $2, 'vm', $3, $4, 'active', $5, $5)`, e.id, slug, name, attrs, a.now); err != nil {
				return nil, fmt.Errorf("add %s: %w", slug, err)
			}
			if _, err := a.tx.Exec(ctx, `INSERT INTO relationships (id, from_id, to_id, type) VALUES ($1, $2, $3, 'hosts')`,
				newID(), a.hostID, e.id); err != nil {
				return nil, fmt.Errorf("add %s to %s: %w", slug, a.host, err)
			}
			ref := ContainerRef{VMID: v.VMID, Name: name}
			a.ch.New = append(a.ch.New, ref)
			if err := a.audit(ctx, "discovery.found", e.id, ref, map[string]any{"attrs": json.RawMessage(attrs)}); err != nil {
				return nil, err
			}
		case e.host() != a.host:
			a.ch.Skipped = append(a.ch.Skipped, e.ref())
			continue
		}
		live, err := json.Marshal(map[string]any{"agent": v.Agent, "lock": v.Lock, "template": v.Template, "backup": v.Backup})
		if err != nil {
			return nil, err
		}
		if _, err := a.tx.Exec(ctx, `UPDATE entities SET attrs = attrs || $2 WHERE id = $1`, e.id, live); err != nil {
			return nil, fmt.Errorf("record the live facts of %s: %w", slug, err)
		}
		if err := a.runState(ctx, e.id, e, inventory.Container{VMID: v.VMID, Status: v.Status, Hostname: name}); err != nil {
			return nil, err
		}
		touched = append(touched, e.id)
	}
	return touched, nil
}

func (a *inventoryApplier) loadInFlight(ctx context.Context) error {
	a.creating, a.removing = map[string]bool{}, map[string]bool{}
	rows, err := a.tx.Query(ctx, `SELECT action, target_slug, coalesce(params->>'vmid', ''), coalesce(params->>'hostname', '')
		FROM executions WHERE state IN ('approved', 'dispatched', 'running') AND action IN ('pct_create', 'pct_destroy')`)
	if err != nil {
		return fmt.Errorf("in-flight executions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var action, target, vmid, hostname string
		if err := rows.Scan(&action, &target, &vmid, &hostname); err != nil {
			return err
		}
		switch {
		case action == "pct_destroy":
			a.removing[target] = true
		case target == "host:"+a.host:
			if vmid != "" && vmid != "0" {
				a.creating["vmid:"+vmid] = true
			}
			if hostname != "" {
				a.creating["hostname:"+hostname] = true
			}
		}
	}
	return rows.Err()
}

// loadFleet loads the containers on the host and those the inventory
// names, by slug.
func (a *inventoryApplier) loadFleet(ctx context.Context, slugs []string) (map[string]fleetContainer, error) {
	return a.loadFleetOf(ctx, "lxc", slugs)
}

// loadFleetOf loads the guests of kind (lxc or vm) on the host or with
// the given slugs, locked for the diff.
func (a *inventoryApplier) loadFleetOf(ctx context.Context, kind string, slugs []string) (map[string]fleetContainer, error) {
	rows, err := a.tx.Query(ctx, `SELECT e.id, e.slug, e.name, e.attrs, e.lifecycle, coalesce(st.run_state, '')
		FROM entities e LEFT JOIN entity_status st ON st.entity_id = e.id
		WHERE e.type = $3 AND (e.attrs->>'host' = $1 OR e.slug = ANY($2))
		FOR UPDATE OF e`, a.host, slugs, kind)
	if err != nil {
		return nil, fmt.Errorf("load the host's containers: %w", err)
	}
	defer rows.Close()
	out := map[string]fleetContainer{}
	for rows.Next() {
		var c fleetContainer
		var attrs []byte
		if err := rows.Scan(&c.id, &c.slug, &c.name, &attrs, &c.lifecycle, &c.runState); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(attrs, &c.attrs); err != nil {
			return nil, fmt.Errorf("decode attrs of %s: %w", c.slug, err)
		}
		_, c.vmid, _ = policy.ParseContainerName(strings.TrimPrefix(c.slug, kind+":"))
		out[c.slug] = c
	}
	return out, rows.Err()
}

func (a *inventoryApplier) audit(ctx context.Context, action string, id uuid.UUID, ref ContainerRef, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["run_id"], detail["host"], detail["vmid"], detail["name"] = a.o.RunID.String(), a.host, ref.VMID, ref.Name
	return audit(ctx, a.tx, AuditEntry{Actor: cmp.Or(a.o.Actor, "nomos"), Action: action, EntityID: &id, Detail: detail})
}

func (a *inventoryApplier) create(ctx context.Context, c inventory.Container) (uuid.UUID, error) {
	id, slug, name := newID(), policy.ContainerSlug(a.cluster, c.VMID), inventory.ContainerName(c)
	attrs, err := json.Marshal(inventory.DiscoveredAttrs(a.host, c, nil))
	if err != nil {
		return id, err
	}
	if _, err := a.tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, attrs, lifecycle, created_at, updated_at)
		VALUES ($1, $2, 'lxc', $3, $4, 'active', $5, $5)`, id, slug, name, attrs, a.now); err != nil {
		return id, fmt.Errorf("add %s: %w", slug, err)
	}
	if _, err := a.tx.Exec(ctx, `INSERT INTO relationships (id, from_id, to_id, type) VALUES ($1, $2, $3, 'hosts')`,
		newID(), a.hostID, id); err != nil {
		return id, fmt.Errorf("add %s to %s: %w", slug, a.host, err)
	}
	ref := ContainerRef{VMID: c.VMID, Name: name}
	a.ch.New = append(a.ch.New, ref)
	return id, a.audit(ctx, "discovery.found", id, ref, map[string]any{"attrs": json.RawMessage(attrs)})
}

// update brings a container back if it was gone, and a discovered one's
// values up to date.
func (a *inventoryApplier) update(ctx context.Context, e fleetContainer, c inventory.Container) error {
	if e.lifecycle == "destroyed" {
		if _, err := a.tx.Exec(ctx, `UPDATE entities SET lifecycle = 'active', updated_at = $2 WHERE id = $1`, e.id, a.now); err != nil {
			return fmt.Errorf("bring back %s: %w", e.slug, err)
		}
		a.ch.Back = append(a.ch.Back, e.ref())
		if err := a.audit(ctx, "discovery.back", e.id, e.ref(), nil); err != nil {
			return err
		}
	}
	if !e.discovered() {
		return nil
	}
	next := inventory.DiscoveredAttrs(a.host, c, e.attrs)
	name := cmp.Or(c.Hostname, e.name)
	var keys []string
	before, after := map[string]any{}, map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(e.attrs, next))) {
		if !reflect.DeepEqual(e.attrs[k], next[k]) {
			keys = append(keys, k)
			before[k], after[k] = e.attrs[k], next[k]
		}
	}
	if len(keys) == 0 && name == e.name {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if _, err := a.tx.Exec(ctx, `UPDATE entities SET name = $2, attrs = $3, updated_at = $4 WHERE id = $1`, e.id, name, raw, a.now); err != nil {
		return fmt.Errorf("update %s: %w", e.slug, err)
	}
	if e.host() != a.host {
		// Moved within the cluster: this host has it now.
		if _, err := a.tx.Exec(ctx, `DELETE FROM relationships WHERE to_id = $1 AND type = 'hosts' AND from_id <> $2`, e.id, a.hostID); err != nil {
			return fmt.Errorf("move %s: %w", e.slug, err)
		}
		if _, err := a.tx.Exec(ctx, `INSERT INTO relationships (id, from_id, to_id, type) VALUES ($1, $2, $3, 'hosts')
			ON CONFLICT (from_id, to_id, type) DO NOTHING`, newID(), a.hostID, e.id); err != nil {
			return fmt.Errorf("move %s: %w", e.slug, err)
		}
	}
	ref := ContainerRef{VMID: e.vmid, Name: name}
	if len(keys) == 0 {
		keys = []string{"name"}
	}
	a.ch.Changed = append(a.ch.Changed, ContainerChange{ContainerRef: ref, Keys: keys})
	return a.audit(ctx, "discovery.changed", e.id, ref, map[string]any{"before": before, "after": after})
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// recordLive writes the container's live facts over its attrs, and
// audits a change of those in inventory.AuditedLiveKeys. A container seen for the
// first time, or a key not recorded before, is no change.
func (a *inventoryApplier) recordLive(ctx context.Context, id uuid.UUID, e fleetContainer, c inventory.Container) error {
	old := e.attrs
	next := inventory.LiveAttrs(c, old)
	var changed bool
	before, after := map[string]any{}, map[string]any{}
	for k, v := range next {
		prev, had := old[k]
		if had && reflect.DeepEqual(prev, v) {
			continue
		}
		changed = true
		if had && slices.Contains(inventory.AuditedLiveKeys, k) {
			before[k], after[k] = prev, v
		}
	}
	if !changed {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if _, err := a.tx.Exec(ctx, `UPDATE entities SET attrs = attrs || $2 WHERE id = $1`, id, raw); err != nil {
		return fmt.Errorf("record the live facts of lxc:%d: %w", c.VMID, err)
	}
	if len(after) == 0 {
		return nil
	}
	ref := ContainerRef{VMID: c.VMID, Name: cmp.Or(e.name, inventory.ContainerName(c))}
	return a.audit(ctx, "discovery.changed", id, ref, map[string]any{"before": before, "after": after, "live": true})
}

// runState records what the inventory saw the container doing, and
// audits a start or a stop.
func (a *inventoryApplier) runState(ctx context.Context, id uuid.UUID, e fleetContainer, c inventory.Container) error {
	_, err := a.tx.Exec(ctx, `INSERT INTO entity_status (entity_id, run_state, run_state_at, run_state_until, updated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (entity_id) DO UPDATE SET run_state = excluded.run_state, run_state_at = excluded.run_state_at,
			run_state_until = excluded.run_state_until, updated_at = excluded.updated_at`,
		id, c.Status, a.o.At, a.o.At.Add(a.o.Horizon), a.now)
	if err != nil {
		return fmt.Errorf("record the run state of %s: %w", policy.ContainerSlug(a.cluster, c.VMID), err)
	}
	if e.runState == "" || e.runState == c.Status {
		return nil // a first sighting is not a change
	}
	ref := ContainerRef{VMID: c.VMID, Name: cmp.Or(e.name, inventory.ContainerName(c))}
	a.ch.RunStates = append(a.ch.RunStates, RunStateChange{ContainerRef: ref, From: e.runState, To: c.Status})
	return a.audit(ctx, "discovery.run_state", id, ref, map[string]any{"from": e.runState, "to": c.Status})
}

func (a *inventoryApplier) gone(ctx context.Context, e fleetContainer) error {
	if _, err := a.tx.Exec(ctx, `UPDATE entities SET lifecycle = 'destroyed', updated_at = $2 WHERE id = $1`, e.id, a.now); err != nil {
		return fmt.Errorf("mark %s gone: %w", e.slug, err)
	}
	a.ch.Gone = append(a.ch.Gone, e.ref())
	return a.audit(ctx, "discovery.gone", e.id, e.ref(), map[string]any{"lifecycle": e.lifecycle})
}

// InventoryNotice is an applied run the ops room has not heard of.
type InventoryNotice struct {
	RunID     uuid.UUID
	Changes   InventoryChanges
	AppliedAt time.Time
}

// InventoryNotices lists the applied runs that changed what the room is
// told of and were not announced yet, oldest first.
func (s *Store) InventoryNotices(ctx context.Context) ([]InventoryNotice, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, changes, applied_at FROM inventory_runs
		WHERE announce AND noticed_at IS NULL ORDER BY applied_at, id LIMIT 50`)
	if err != nil {
		return nil, fmt.Errorf("list inventory notices: %w", err)
	}
	defer rows.Close()
	var out []InventoryNotice
	for rows.Next() {
		var n InventoryNotice
		var raw []byte
		if err := rows.Scan(&n.RunID, &raw, &n.AppliedAt); err != nil {
			return nil, fmt.Errorf("list inventory notices: %w", err)
		}
		if err := json.Unmarshal(raw, &n.Changes); err != nil {
			return nil, fmt.Errorf("decode inventory notice %s: %w", n.RunID, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// ClaimInventoryNotice takes the right to announce a run; false means
// another pass or bot has it.
func (s *Store) ClaimInventoryNotice(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE inventory_runs SET noticed_at = $2 WHERE id = $1 AND announce AND noticed_at IS NULL`, id, s.now())
	if err != nil {
		return false, fmt.Errorf("claim inventory notice %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UnclaimInventoryNotice gives a claimed notice back when it could not be
// posted, so a later pass tries again.
func (s *Store) UnclaimInventoryNotice(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE inventory_runs SET noticed_at = NULL WHERE id = $1`, id); err != nil {
		return fmt.Errorf("unclaim inventory notice %s: %w", id, err)
	}
	return nil
}

// PruneInventoryRuns deletes runs requested before before, except ones
// still to be announced. The audit log keeps what they changed.
func (s *Store) PruneInventoryRuns(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM inventory_runs WHERE requested_at < $1 AND NOT (announce AND noticed_at IS NULL)`, before)
	if err != nil {
		return 0, fmt.Errorf("prune inventory runs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ClusterMismatch says why the nodes a host's Proxmox cluster lists
// disagree with the clusters the fleet gives its hosts, or "" when they
// agree (or nodes is empty: an actuator too old to say). A fleet whose
// clusters are wrong would take two containers for one or one for two,
// so such an inventory is not applied.
//
//   - A host the fleet puts in this host's cluster must be listed: two
//     standalone nodes named as one cluster share each other's vmids.
//   - A node of a cluster of several that the fleet has, once, as a host
//     of another cluster is in this one: its guests would be read as
//     appearing and vanishing as they migrate.
func (s *Store) ClusterMismatch(ctx context.Context, hostID uuid.UUID, nodes []string) (string, error) {
	if len(nodes) == 0 {
		return "", nil
	}
	rows, err := s.pool.Query(ctx, `SELECT h.id, h.name, coalesce(nullif(h.attrs->>'node', ''), h.name), `+hostCluster+`
		FROM entities h WHERE h.type = 'host' AND h.lifecycle <> 'destroyed' ORDER BY h.name`)
	if err != nil {
		return "", fmt.Errorf("clusters of the fleet: %w", err)
	}
	type host struct {
		id                  uuid.UUID
		name, node, cluster string
	}
	hosts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (host, error) {
		var h host
		err := r.Scan(&h.id, &h.name, &h.node, &h.cluster)
		return h, err
	})
	if err != nil {
		return "", fmt.Errorf("clusters of the fleet: %w", err)
	}
	var self host
	byNode := map[string][]host{}
	for _, h := range hosts {
		if h.id == hostID {
			self = h
		}
		byNode[h.node] = append(byNode[h.node], h)
	}
	if self.name == "" {
		return "", nil
	}
	var why []string
	for _, h := range hosts {
		if h.id != hostID && h.cluster == self.cluster && !slices.Contains(nodes, h.node) {
			why = append(why, fmt.Sprintf("the fleet puts host %s (node %s) in cluster %s with %s, but %s's Proxmox cluster lists only %s: give %s a cluster of its own (or none), or set node: to its Proxmox node name",
				h.name, h.node, self.cluster, self.name, self.name, strings.Join(nodes, ", "), h.name))
		}
	}
	if len(nodes) > 1 {
		for _, n := range nodes {
			if hs := byNode[n]; len(hs) == 1 && hs[0].cluster != self.cluster {
				why = append(why, fmt.Sprintf("%s's Proxmox cluster has node %s, which the fleet has as host %s in cluster %s: nodes of one cluster must name the same cluster: in the seeds",
					self.name, n, hs[0].name, hs[0].cluster))
			}
		}
	}
	return strings.Join(why, "; "), nil
}
