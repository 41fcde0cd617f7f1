package executions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// setAttrs puts what the inventory learns from Proxmox on a container.
func (b *bundle) setAttrs(t *testing.T, slug string, attrs map[string]any) {
	t.Helper()
	if err := b.store.MergeEntityAttrs(b.ctx, slug, attrs); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) tryRequest(action, target, params string) (executions.Planned, error) {
	return b.svc.Request(b.ctx, executions.Request{
		Action: action, Target: target, Params: json.RawMessage(params),
		RequestedBy: operator, Via: "chat", RoomID: "!ops:localhost",
	})
}

// TestDestroyOfAnHAContainerRemovesItFromHA: a container HA manages is
// destroyed with --purge, which Proxmox needs to remove it from HA first,
// and the plan says so.
func TestDestroyOfAnHAContainerRemovesItFromHA(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain := b.request(t, "pct_destroy", "lxc:hubris/131", "")
	pdiff(t, "steps without HA", []string{"pct destroy 131"}, plain.Execution.Steps)

	b.setAttrs(t, "lxc:hubris/114", map[string]any{"hastate": "started"})
	p := b.request(t, "pct_destroy", "lxc:hubris/114", "")
	pdiff(t, "steps under HA", []string{"pct destroy 114 --purge 1"}, p.Execution.Steps)
	if !p.Facts.HA {
		t.Error("the plan does not say HA manages the container")
	}
	described, err := b.svc.Describe(b.ctx, p.Execution)
	if err != nil {
		t.Fatal(err)
	}
	if !described.Facts.HA {
		t.Error("the card's later edits lose that HA manages the container")
	}
}

// TestDestroyOfAReplicatedContainerPurges: Proxmox refuses to destroy a
// guest with a storage replication job unless --purge (pve-container
// src/PVE/API2/LXC.pm destroy_vm: check_for_existing_jobs; qemu-server
// src/PVE/API2/Qemu.pm likewise), so a container the inventory found
// replicated is destroyed with --purge, the plan names the jobs, and the
// purge is part of what is approved. A job id that is not Proxmox's form
// is no reason to purge.
func TestDestroyOfAReplicatedContainerPurges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain := b.request(t, "pct_destroy", "lxc:hubris/131", "")
	pdiff(t, "steps without HA or replication", []string{"pct destroy 131"}, plain.Execution.Steps)
	if len(plain.Facts.Replication) != 0 {
		t.Errorf("replication facts without jobs: %q", plain.Facts.Replication)
	}

	b.setAttrs(t, "lxc:hubris/114", map[string]any{"replication": []any{"114-0", "114-1"}, "hastate": ""})
	p := b.request(t, "pct_destroy", "lxc:hubris/114", "")
	pdiff(t, "steps with replication", []string{"pct destroy 114 --purge 1"}, p.Execution.Steps)
	pdiff(t, "replication facts", []string{"114-0", "114-1"}, p.Facts.Replication)
	var params policy.PctDestroyParams
	if err := json.Unmarshal(p.Execution.Params, &params); err != nil {
		t.Fatal(err)
	}
	if !params.Purge {
		t.Errorf("the approved params %s do not purge", p.Execution.Params)
	}
	described, err := b.svc.Describe(b.ctx, p.Execution)
	if err != nil {
		t.Fatal(err)
	}
	pdiff(t, "the card's later edits", []string{"114-0", "114-1"}, described.Facts.Replication)

	// Text of a hostile writer's choosing in the attr is no job.
	b.setAttrs(t, "lxc:hubris/100", map[string]any{"replication": []any{"100-0; reboot", ""}, "hastate": ""})
	odd := b.request(t, "pct_destroy", "lxc:hubris/100", "")
	pdiff(t, "steps with no real job", []string{"pct destroy 100"}, odd.Execution.Steps)
	if len(odd.Facts.Replication) != 0 {
		t.Errorf("jobs named from a hostile attr: %q", odd.Facts.Replication)
	}
}

// TestProtectedContainerIsRefusedBeforeApproval: Proxmox refuses to
// destroy a protected container (check_protection), so Nomos refuses the
// plan, with the reason, and records nothing.
func TestProtectedContainerIsRefusedBeforeApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAttrs(t, "lxc:hubris/131", map[string]any{"protection": true})
	before, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.tryRequest("pct_destroy", "lxc:hubris/131", "")
	var refused *executions.RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, policy.ErrInvalidTarget) {
		t.Fatalf("err = %v, want a RefusedError that reads as an invalid target", err)
	}
	pcontains(t, "reason", err.Error(), "lxc:hubris/131 is protected", "pct set 131 --protection 0")
	// A plan of several steps with a destroy in it is refused whole.
	_, err = b.svc.Request(b.ctx, executions.Request{Target: "lxc:hubris/131", RequestedBy: operator, Via: "chat", RoomID: "!ops:localhost",
		Steps: []executions.Step{{Action: "pct_stop"}, {Action: "pct_destroy"}}})
	if !errors.As(err, &refused) {
		t.Fatalf("stop then destroy: err = %v, want refused", err)
	}
	after, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	pdiff(t, "executions recorded", len(before), len(after))
	// What protection does not forbid still plans.
	b.request(t, "pct_stop", "lxc:hubris/131", "")
}

// TestZFSRollbackDeletesWhatItMustAndSaysSo: on ZFS a rollback past newer
// snapshots deletes them first, newest first; the plan is destructive and
// names them. On LVM-thin it is a rollback alone, whatever was asked.
func TestZFSRollbackDeletesWhatItMustAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	snaps := []any{"nomos-20261201-101500", "before-upgrade", "nomos-20261202-093000"}
	b.setAttrs(t, "lxc:strong/104", map[string]any{"storage_type": "zfspool", "snapshots": snaps})
	p := b.request(t, "pct_rollback", "lxc:strong/104", `{"name":"nomos-20261201-101500"}`)
	pdiff(t, "steps", []string{
		"pct delsnapshot 104 nomos-20261202-093000",
		"pct delsnapshot 104 before-upgrade",
		"pct rollback 104 nomos-20261201-101500",
	}, p.Execution.Steps)
	pdiff(t, "class", policy.Destructive, p.Risk.Class)
	pcontains(t, "reasons", strings.Join(p.Risk.Reasons, "; "), "deletes the newer snapshots nomos-20261202-093000, before-upgrade first")
	pdiff(t, "facts", []string{"nomos-20261202-093000", "before-upgrade"}, p.Facts.Discard)

	newest := b.request(t, "pct_rollback", "lxc:strong/104", `{"name":"nomos-20261202-093000"}`)
	pdiff(t, "to the newest", []string{"pct rollback 104 nomos-20261202-093000"}, newest.Execution.Steps)

	b.setAttrs(t, "lxc:strong/102", map[string]any{"storage_type": "lvmthin", "snapshots": snaps})
	lvm := b.request(t, "pct_rollback", "lxc:strong/102", `{"name":"nomos-20261201-101500","discard":["before-upgrade"]}`)
	pdiff(t, "on lvm-thin, nothing is deleted", []string{"pct rollback 102 nomos-20261201-101500"}, lvm.Execution.Steps)
}

// TestNoSnapshotIsSaidBeforeApproval: a change that needs a snapshot on a
// container that cannot have one (a bind mount) says so on its plan, is
// bound to that reason, and with snapshots.require is refused.
func TestNoSnapshotIsSaidBeforeApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const blocker = "bind mount mp0 (/mnt/media)"
	plain := b.request(t, "pct_exec", "lxc:strong/101", `{"command":"touch /etc/x"}`)
	b.setAttrs(t, "lxc:strong/101", map[string]any{"snapshot_blocker": blocker, "lock": "backup"})
	p := b.request(t, "pct_exec", "lxc:strong/101", `{"command":"touch /etc/x"}`)
	if !p.Snapshot {
		t.Fatal("a config mutation inside a container needs a snapshot")
	}
	pdiff(t, "blocker", blocker, p.Facts.SnapshotBlocker)
	pdiff(t, "lock", "backup", p.Facts.Lock)
	if p.Execution.PlanHash == plain.Execution.PlanHash {
		t.Error("going on without a snapshot must be a plan of its own")
	}
	// A restart needs no snapshot, so it carries no blocker.
	restart := b.request(t, "restart", "service:jellyfin", "")
	pdiff(t, "restart's blocker", "", restart.Facts.SnapshotBlocker)

	// Approved as it was shown, it goes out with the reason, the keep and
	// the lock wait.
	x, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: p.Execution.ID, By: operator, Method: policy.MethodReaction})
	if err != nil {
		t.Fatal(err)
	}
	o := b.queuedOrder(t, x.ID)
	pdiff(t, "order's blocker", blocker, o.Target.SnapshotBlocker)
	pdiff(t, "order's keep", 3, o.SnapshotKeep)
	if o.LockWait <= 0 {
		t.Error("the order carries no lock wait")
	}

	// Once the blocker is gone, the approval no longer covers the plan.
	other := b.request(t, "pct_exec", "lxc:strong/101", `{"command":"touch /etc/y"}`)
	b.setAttrs(t, "lxc:strong/101", map[string]any{"snapshot_blocker": nil})
	if _, err := b.svc.Approve(b.ctx, executions.Decision{ExecutionID: other.Execution.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	if x, err := b.store.GetExecution(b.ctx, other.Execution.ID); err != nil || x.State != store.StateFailed || !strings.Contains(x.Error, "target changed") {
		t.Errorf("approved after the blocker went: %s %q (%v), want failed as the target changed", x.State, x.Error, err)
	}

	strict := b.newService(t, b.queue, func(c *executions.Config) { c.RequireSnapshot = true })
	b.setAttrs(t, "lxc:strong/101", map[string]any{"snapshot_blocker": blocker})
	_, err = strict.Request(b.ctx, executions.Request{Action: "pct_exec", Target: "lxc:strong/101", Params: json.RawMessage(`{"command":"touch /etc/x"}`),
		RequestedBy: operator, Via: "chat", RoomID: "!ops:localhost"})
	var refused *executions.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("with snapshots.require: err = %v, want refused", err)
	}
	pcontains(t, "reason", err.Error(), "lxc:strong/101 cannot be snapshotted (bind mount mp0 (/mnt/media))", "snapshots.require")
}

func pdiff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func pcontains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, got)
		}
	}
}

// TestVMStateSnapshotCountsTheRAM: a snapshot with the VM's RAM
// (--vmstate 1) writes a state volume that qemu-server sizes as twice
// the memory plus 500 MiB (src/PVE/QemuConfig.pm __snapshot_save_vmstate:
// $size = $mem_size * 2 + $driver_state_size, 500), on the storage
// find_vmstate_storage picks. The plan counts it against what that
// storage had free at the last inventory and says when it is short; a
// snapshot without the RAM counts nothing.
func TestVMStateSnapshotCountsTheRAM(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAttrs(t, "vm:hubris/200", map[string]any{"memory_mb": 4096, "vmstate_storage": "local-lvm", "vmstate_free_mb": 6000})
	p := b.request(t, "pct_snapshot", "vm:hubris/200", `{"name":"with-ram","vmstate":true}`)
	pdiff(t, "steps", []string{"qm snapshot 200 with-ram --vmstate 1"}, p.Execution.Steps)
	v := p.Facts.VMState
	if v == nil {
		t.Fatal("a vmstate snapshot's plan does not count the RAM")
	}
	pdiff(t, "space", executions.VMStateSpace{Storage: "local-lvm", MemoryMB: 4096, NeedMB: 2*4096 + 500, FreeMB: v.FreeMB}, *v)
	if v.FreeMB == nil || *v.FreeMB != 6000 || !v.Short() {
		t.Errorf("6000 MiB free for %d MiB needed: short = %v", v.NeedMB, v.Short())
	}
	described, err := b.svc.Describe(b.ctx, p.Execution)
	if err != nil || described.Facts.VMState == nil || !described.Facts.VMState.Short() {
		t.Errorf("the card's later edits lose the shortfall: %+v, %v", described.Facts.VMState, err)
	}

	b.setAttrs(t, "vm:hubris/200", map[string]any{"vmstate_free_mb": 9000})
	if p := b.request(t, "pct_snapshot", "vm:hubris/200", `{"name":"with-ram2","vmstate":true}`); p.Facts.VMState == nil || p.Facts.VMState.Short() {
		t.Errorf("9000 MiB free for 8692 needed is enough: %+v", p.Facts.VMState)
	}
	if p := b.request(t, "pct_snapshot", "vm:hubris/200", `{"name":"disks-only"}`); p.Facts.VMState != nil {
		t.Errorf("a snapshot without the RAM counts %+v", p.Facts.VMState)
	}
}
