package executions

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// What Proxmox says of a container, as the inventory keeps it on the
// container's entity: the facts a plan is adapted to and its card shows
// before anyone approves it.
const (
	attrLock            = "lock"             // string: backup while vzdump runs
	attrHAState         = "hastate"          // string: set while HA manages it
	attrProtection      = "protection"       // bool
	attrSnapshots       = "snapshots"        // []string, newest last
	attrStorageType     = "storage_type"     // zfspool, lvmthin, dir, …
	attrSnapshotBlocker = "snapshot_blocker" // why it cannot be snapshotted, or ""
	attrReplication     = "replication"      // []string: its pvesr job ids
)

// RefusedError is a plan refused before approval for a reason known from
// the target itself: Proxmox would refuse it (a protected container), or
// policy does (snapshots.require). It matches policy.ErrInvalidTarget, so
// the front ends say "I can't plan that" with the reason.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return e.Reason }

// Unwrap makes a RefusedError match policy.ErrInvalidTarget.
func (e *RefusedError) Unwrap() error { return policy.ErrInvalidTarget }

// guestOf is the container an entity is or runs in, or a zero Entity for
// a host or a service on the host itself.
func (g *graph) guestOf(e store.Entity) store.Entity {
	switch e.Type {
	case "lxc", "vm":
		return e
	case "service":
		for _, edge := range g.edges {
			if edge.To == e.Slug && edge.Type == policy.EdgeRuns && strings.HasPrefix(edge.From, string(policy.TargetLXC)+":") {
				return g.entities[edge.From]
			}
		}
	}
	return store.Entity{}
}

func attrBool(e store.Entity, key string) bool {
	switch v := e.Attrs[key].(type) {
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v == "1" || v == "true"
	}
	return false
}

func attrStrings(e store.Entity, key string) []string {
	list, _ := e.Attrs[key].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// replicationJobs are the ids of the guest's storage replication jobs as
// the inventory last read them; an id not of Proxmox's form is left out.
func replicationJobs(guest store.Entity) []string {
	return slices.DeleteFunc(attrStrings(guest, attrReplication), func(id string) bool { return tasks.ValidateReplicationID(id) != nil })
}

// snapshotBlocker is why the container cannot be snapshotted, as a card
// may show it, or "".
func snapshotBlocker(guest store.Entity) string {
	s := strings.TrimSpace(guest.AttrString(attrSnapshotBlocker))
	if policy.ValidateSnapshotBlocker(s) != nil {
		// Not text a card or a hash should carry; still a blocker.
		return "the inventory found a reason it cannot be snapshotted"
	}
	return s
}

// adapt fits an action's parameters to the container as Proxmox has it,
// before the plan is rendered, or refuses the plan:
//
//   - a protected container is not destroyed: Proxmox refuses it
//     (pve-guest-common check_protection, called by destroy_vm), so the
//     plan is refused now rather than failing once approved;
//   - a container under HA, or with storage replication jobs, is
//     destroyed with --purge, which removes it from HA and from its
//     replication (and backup) jobs; without it Proxmox refuses
//     (pve-container API2/LXC.pm destroy_vm: service_is_configured,
//     check_for_existing_jobs);
//   - on ZFS a rollback goes only to the newest snapshot, so a rollback
//     past newer ones deletes them first, newest first, and says so.
func adapt(p policy.Params, target store.Entity, guest store.Entity) (policy.Params, error) {
	switch q := p.(type) {
	case policy.PctDestroyParams:
		if attrBool(guest, attrProtection) {
			return nil, &RefusedError{Reason: fmt.Sprintf("%s is protected (protection: 1), and Proxmox refuses to destroy a protected container. "+
				"Turn protection off on the node first (pct set %d --protection 0), then ask again.", target.Slug, guest.AttrInt("vmid"))}
		}
		if guest.AttrString(attrHAState) != "" || len(replicationJobs(guest)) > 0 {
			q.Purge = true
		}
		return q, nil
	case policy.PctRollbackParams:
		q.Discard = nil
		if guest.AttrString(attrStorageType) != "zfspool" {
			return q, nil
		}
		snaps := attrStrings(guest, attrSnapshots)
		i := slices.Index(snaps, q.Name)
		if i < 0 {
			return q, nil // Proxmox will say it does not exist
		}
		for j := len(snaps) - 1; j > i; j-- {
			if policy.ValidateSnapshotName(snaps[j]) == nil {
				q.Discard = append(q.Discard, snaps[j])
			}
		}
		if len(q.Discard) > policy.MaxDiscard {
			return nil, &RefusedError{Reason: fmt.Sprintf("rolling %s back to %s on ZFS would delete %d newer snapshots first, more than one plan may (%d); delete some of them first.",
				target.Slug, q.Name, len(q.Discard), policy.MaxDiscard)}
		}
		return q, nil
	}
	return p, nil
}

// planTarget is the target a plan is rendered and hashed for: the
// entity's, with the reason its container cannot be snapshotted when the
// step needs a snapshot first and cannot have one. The card says so before
// approval, and the approval covers going on without one for this reason
// only.
func (g *graph) planTarget(e store.Entity, p policy.Params, class policy.Class) policy.Target {
	t := g.policyTarget(e)
	if policy.NeedsSnapshot(p, t, class) {
		t.SnapshotBlocker = snapshotBlocker(g.guestOf(e))
	}
	return t
}

// checkSnapshot refuses a plan that needs a snapshot its container cannot
// have, when policy requires one (snapshots.require).
func (s *Service) checkSnapshot(t policy.Target) error {
	if s.cfg.RequireSnapshot && t.SnapshotBlocker != "" {
		return &RefusedError{Reason: fmt.Sprintf("%s cannot be snapshotted (%s), and snapshots.require says a change inside a container needs a snapshot first. "+
			"Remove what blocks it, or ask an admin to relax snapshots.require.", t.Slug, t.SnapshotBlocker)}
	}
	return nil
}

// GuestFacts are what Proxmox says of a plan's container that its card
// shows before approval.
type GuestFacts struct {
	// VMID is the container's.
	VMID int
	// Lock is the lock in its config (backup while a vzdump runs), as the
	// inventory last saw it; the actuator waits for it to clear, for at
	// most LockWait.
	Lock     string
	LockWait time.Duration
	// HA says Proxmox HA manages it: a destroy removes it from HA first,
	// and a start or stop succeeds once HA has done it.
	HA bool
	// Replication are its storage replication jobs (pvesr): a destroy
	// purges it from them.
	Replication []string
	// Discard are the snapshots a rollback deletes first, newest first.
	Discard []string
	// SnapshotBlocker is why the container cannot be snapshotted, when
	// the step needs a snapshot first: it runs without one.
	SnapshotBlocker string
	// VM says the guest is a QEMU VM, not a container.
	VM bool
	// VMState is the space a snapshot with the VM's RAM takes, when the
	// step is one and the inventory knows the VM's memory.
	VMState *VMStateSpace
}

// VMStateSpace is what `qm snapshot --vmstate 1` writes besides the
// disks' snapshots: a volume for the VM's RAM and device state, sized by
// qemu-server as twice the memory plus 500 MiB (src/PVE/QemuConfig.pm
// __snapshot_save_vmstate), on the storage find_vmstate_storage picks.
type VMStateSpace struct {
	Storage  string
	MemoryMB int
	NeedMB   int64
	// FreeMB is what Storage had available at the last inventory; nil
	// when unknown.
	FreeMB *int64
}

// Short reports whether the storage is known to have less free than the
// snapshot needs.
func (v VMStateSpace) Short() bool { return v.FreeMB != nil && *v.FreeMB < v.NeedMB }

// vmStateDriverMB is what qemu-server adds to twice the memory for the
// devices' state (__snapshot_save_vmstate's $driver_state_size).
const vmStateDriverMB = 500

// vmStateSpace is the space p needs for the VM's RAM, or nil when p is no
// snapshot with it or the VM's memory is unknown.
func vmStateSpace(guest store.Entity, p policy.Params) *VMStateSpace {
	snap, ok := p.(policy.PctSnapshotParams)
	mem := guest.AttrInt("memory_mb")
	if !ok || !snap.VMState || guest.Type != "vm" || mem <= 0 {
		return nil
	}
	v := &VMStateSpace{Storage: guest.AttrString("vmstate_storage"), MemoryMB: mem, NeedMB: 2*int64(mem) + vmStateDriverMB}
	if f, ok := guest.Attrs["vmstate_free_mb"].(float64); ok && f >= 0 {
		free := int64(f)
		v.FreeMB = &free
	}
	return v
}

// guestFacts gathers the facts of a step's container for its card.
func (s *Service) guestFacts(g *graph, e store.Entity, p policy.Params, t policy.Target) GuestFacts {
	guest := g.guestOf(e)
	f := GuestFacts{VMID: t.VMID, SnapshotBlocker: t.SnapshotBlocker, LockWait: s.cfg.LockWait}
	if guest.Slug == "" {
		return f
	}
	if l := guest.AttrString(attrLock); lockWordOK(l) {
		f.Lock = l
	}
	f.HA = guest.AttrString(attrHAState) != ""
	f.Replication = replicationJobs(guest)
	f.VM = guest.Type == "vm"
	f.VMState = vmStateSpace(guest, p)
	if r, ok := p.(policy.PctRollbackParams); ok {
		f.Discard = r.Discard
	}
	return f
}

// lockWordOK accepts a Proxmox lock name; anything else is not shown.
func lockWordOK(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '-' {
			return false
		}
	}
	return true
}
