package executions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// DiscoveryReport counts what one pass of fleet discovery did.
type DiscoveryReport struct {
	// Sent is how many inventory requests went to the actuator.
	Sent int
	// Skipped is how many runs could not be sent: the host has no SSH
	// address or a node name the actuator would refuse. Each is recorded
	// as failed.
	Skipped int
	// Stale is how many containers went stale because their inventory
	// stopped answering.
	Stale int
}

// inventoryBatch bounds the runs one pass sends; the rest wait a tick.
const inventoryBatch = 100

// inventoryRetention is how long finished runs are kept; the audit log
// keeps what they changed.
const inventoryRetention = 24 * time.Hour

// DiscoverDue marks stale the containers whose inventory stopped
// answering, then sends an inventory request, signed with the order key,
// for each host due (one every InventoryInterval) and each run asked for
// with `nomos discover`. The answers come back on the results queue
// (ApplyReport). Each run is claimed in the database, so a restart or a
// second bot never sends one twice.
func (s *Service) DiscoverDue(ctx context.Context) (DiscoveryReport, error) {
	var rep DiscoveryReport
	now := s.now()
	stale, err := s.store.ExpireRunStates(ctx, now)
	if err != nil {
		return rep, err
	}
	rep.Stale = stale
	runs, err := s.store.ClaimInventoryRuns(ctx, now, s.cfg.InventoryInterval, inventoryBatch)
	if err != nil || len(runs) == 0 {
		return rep, err
	}
	var errs []error
	fail := func(r store.InventoryRun, reason string) {
		rep.Skipped++
		s.logger.Warn("inventory not sent", "host", r.Host, "run_id", r.ID, "reason", reason)
		if err := s.store.FailInventoryRun(ctx, r.ID, reason); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range runs {
		if !r.HostLive || r.SSH == "" {
			fail(r, "the host has no ssh address in the fleet data")
			continue
		}
		if err := tasks.ValidateNode(r.Node); err != nil {
			fail(r, "the host's node name cannot be asked about: "+err.Error())
			continue
		}
		task, err := tasks.NewInventoryRunTask(s.cfg.SigningKey, tasks.InventoryRun{
			RunID: r.ID.String(), HostID: r.HostID.String(), Actuator: s.cfg.Actuator, Site: r.Site,
			Host: r.Host, Node: r.Node, HostAddr: r.SSH, IssuedAt: now, ExpiresAt: *r.ExpiresAt,
		})
		if err != nil {
			fail(r, "the request cannot be signed: "+err.Error())
			continue
		}
		if _, err := s.cfg.Queue.EnqueueContext(ctx, task); err != nil {
			// This run is lost; the host's next one comes an interval on.
			fail(r, "the request could not be queued")
			errs = append(errs, fmt.Errorf("send inventory of %s: %w", r.Host, err))
			continue
		}
		rep.Sent++
	}
	return rep, errors.Join(errs...)
}

// RunDiscovery runs DiscoverDue at once and then every InventoryTick
// until ctx ends, and prunes finished runs now and then.
func (s *Service) RunDiscovery(ctx context.Context) {
	var pruned time.Time
	loop.Every(ctx, s.cfg.InventoryTick, func(ctx context.Context) {
		rep, err := s.DiscoverDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Error("fleet discovery", "err", err)
		}
		if rep.Stale > 0 || rep.Skipped > 0 {
			s.logger.Info("fleet discovery", "sent", rep.Sent, "skipped", rep.Skipped, "stale", rep.Stale)
		}
		if now := s.now(); now.Sub(pruned) > time.Hour {
			pruned = now
			if _, err := s.store.PruneInventoryRuns(ctx, now.Add(-max(inventoryRetention, 2*s.cfg.InventoryInterval))); err != nil && ctx.Err() == nil {
				s.logger.Warn("prune inventory runs", "err", err)
			}
		}
	})
}

// applyInventory applies a verified inventory: it must answer a run the
// bot sent for that host and node, once. An inventory that could not be
// taken is recorded and changes nothing else.
func (s *Service) applyInventory(ctx context.Context, r tasks.InventoryResult) error {
	ref := RefusedReportError{Type: tasks.TypeInventoryResult, RunID: r.RunID, TargetID: r.HostID, Actuator: r.Actuator}
	runID, err1 := uuid.Parse(r.RunID)
	hostID, err2 := uuid.Parse(r.HostID)
	if err1 != nil || err2 != nil {
		ref.Reason, ref.Detail = RefusedMalformed, "the run id or host id is not a uuid"
		return s.refuse(ctx, ref)
	}
	run, err := s.store.InventoryRun(ctx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		ref.Reason, ref.Detail = RefusedNotDispatched, "there is no such inventory run"
		return s.refuse(ctx, ref)
	case err != nil:
		return err
	case run.HostID != hostID || run.SentAt == nil:
		ref.Reason, ref.Detail = RefusedNotDispatched, fmt.Sprintf("inventory run %s was not sent for host %s", run.ID, hostID)
		return s.refuse(ctx, ref)
	case run.AppliedAt != nil:
		ref.Reason, ref.Detail = RefusedReplayed, fmt.Sprintf("inventory run %s was applied at %s", run.ID, run.AppliedAt.UTC().Format(time.RFC3339))
		return s.refuse(ctx, ref)
	case r.Node != run.Node:
		ref.Reason, ref.Detail = RefusedNotDispatched, fmt.Sprintf("an inventory of node %q; the run asked about %q", r.Node, run.Node)
		return s.refuse(ctx, ref)
	}
	log := s.logger.With("host", run.Host, "run_id", run.ID)
	if r.Error != "" {
		err := s.store.FailInventoryRun(ctx, run.ID, r.Error)
		if errors.Is(err, store.ErrInventoryApplied) {
			ref.Reason, ref.Detail = RefusedReplayed, "the run has an outcome already"
			return s.refuse(ctx, ref)
		}
		log.Warn("the host's inventory could not be taken; nothing changes", "err", r.Error)
		return err
	}
	mismatch, err := s.store.ClusterMismatch(ctx, hostID, r.Nodes)
	if err != nil {
		return err
	}
	if mismatch != "" {
		err := s.store.FailInventoryRun(ctx, run.ID, mismatch)
		if errors.Is(err, store.ErrInventoryApplied) {
			ref.Reason, ref.Detail = RefusedReplayed, "the run has an outcome already"
			return s.refuse(ctx, ref)
		}
		log.Warn("the host's cluster disagrees with the fleet's clusters; nothing changes", "why", mismatch)
		return err
	}
	obs := store.InventoryObservation{
		RunID: runID, HostID: hostID, At: r.At, Elsewhere: r.Elsewhere,
		Horizon: store.StaleAfter * s.cfg.InventoryInterval, Actor: s.cfg.Actor,
	}
	for _, c := range r.Containers {
		obs.Containers = append(obs.Containers, inventory.Container{
			VMID: c.VMID, Status: c.Status, Hostname: c.Hostname, IP: c.IP, Gateway: c.Gateway,
			Cores: c.Cores, MemoryMB: c.MemoryMB, DiskGB: c.DiskGB, Partial: c.Partial,
			Onboot: c.Onboot, Lock: c.Lock, Tags: c.Tags, HAState: c.HAState, Template: c.Template, Protection: c.Protection,
			Addresses: c.Addresses, Snapshots: c.Snapshots, RootStorage: c.RootStorage, StorageType: c.StorageType,
			SnapshotBlocker: c.SnapshotBlocker, Backup: guestBackup(c.Backup), Replication: c.Replication,
		})
	}
	obs.VMsListed = r.VMsListed
	for _, v := range r.VMs {
		obs.VMs = append(obs.VMs, inventory.VM{VMID: v.VMID, Status: v.Status, Name: v.Name, Agent: v.Agent, Lock: v.Lock, Template: v.Template,
			HAState: v.HAState, MemoryMB: v.MemoryMB, Snapshots: v.Snapshots, StorageType: v.StorageType,
			VMStateStorage: v.VMStateStorage, VMStateFreeMB: v.VMStateFreeMB,
			Backup: guestBackup(v.Backup), Replication: v.Replication})
	}
	ch, err := s.store.ApplyInventory(ctx, obs)
	switch {
	case errors.Is(err, store.ErrInventoryApplied):
		ref.Reason, ref.Detail = RefusedReplayed, "another delivery of the run was applied first"
		return s.refuse(ctx, ref)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInventoryNotSent):
		ref.Reason, ref.Detail = RefusedNotDispatched, err.Error()
		return s.refuse(ctx, ref)
	case err != nil:
		return err
	}
	if ch.Announced() || len(ch.RunStates) > 0 || len(ch.Skipped) > 0 {
		log.Info("inventory applied", "seen", ch.Seen, "new", len(ch.New), "back", len(ch.Back), "changed", len(ch.Changed),
			"gone", len(ch.Gone), "run_states", len(ch.RunStates), "skipped", len(ch.Skipped))
	}
	return nil
}

// guestBackup is what the fleet keeps of a guest's backups: the enabled
// jobs that select it, the jobs it may be in by pool, the storages not
// read and its newest backup's time.
func guestBackup(b *tasks.BackupStatus) *inventory.Backup {
	if b == nil {
		return nil
	}
	out := &inventory.Backup{Jobs: []string{}, ByPool: b.ByPool, Unread: b.Unread, Last: b.Last}
	for _, j := range b.Jobs {
		if j.Enabled {
			out.Jobs = append(out.Jobs, j.ID)
		}
	}
	return out
}
