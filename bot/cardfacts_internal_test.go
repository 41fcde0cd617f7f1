package bot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// TestCardSaysWhatProxmoxWillDo: before approval, a card says what the
// container's storage, lock and HA make of the step.
func TestCardSaysWhatProxmoxWillDo(t *testing.T) {
	t.Parallel()
	lxc := func(v *CardView, action string, steps ...string) {
		v.Planned.Execution.Action = action
		v.Planned.Execution.TargetSlug = "lxc:106"
		v.Planned.Execution.Steps = steps
		v.Planned.Target = store.Entity{Slug: "lxc:106", Type: "lxc", Name: "files", Attrs: map[string]any{"host": "strong", "vmid": float64(106)}}
	}
	vm := func(v *CardView, action string, steps ...string) {
		v.Planned.Execution.Action = action
		v.Planned.Execution.TargetSlug = "vm:hubris/200"
		v.Planned.Execution.Steps = steps
		v.Planned.Target = store.Entity{Slug: "vm:hubris/200", Type: "vm", Name: "homeassistant", Attrs: map[string]any{"host": "hubris", "vmid": float64(200)}}
	}
	tests := []struct {
		name   string
		change func(v *CardView)
		want   []string
		not    []string
	}{{
		name: "a bind mount leaves no snapshot",
		change: func(v *CardView) {
			lxc(v, "pct_exec", "pct exec 106 -- sh -c 'touch /etc/x'")
			v.Planned.Snapshot = true
			v.Planned.Facts = executions.GuestFacts{VMID: 106, SnapshotBlocker: "bind mount mp0 (/mnt/media)"}
		},
		want: []string{"📸 No snapshot: bind mount mp0 (/mnt/media). Proxmox cannot snapshot CT 106, so the change runs without one"},
		not:  []string{"so the change can be rolled back"},
	}, {
		name: "a snapshot first",
		change: func(v *CardView) {
			lxc(v, "pct_exec", "pct exec 106 -- sh -c 'touch /etc/x'")
			v.Planned.Snapshot = true
		},
		want: []string{"📸 First, the actuator takes a snapshot of CT 106, so the change can be rolled back."},
		not:  []string{"No snapshot"},
	}, {
		name: "a backup's lock",
		change: func(v *CardView) {
			lxc(v, "pct_stop", "pct shutdown 106 --timeout 60 --forceStop 1")
			v.Planned.Facts = executions.GuestFacts{VMID: 106, Lock: "backup", LockWait: 2 * time.Minute}
		},
		want: []string{"🔒 CT 106 is locked (backup): a backup is running. The actuator waits up to 2m for the lock to clear", "never runs during a backup"},
	}, {
		name: "destroy of an HA container",
		change: func(v *CardView) {
			lxc(v, "pct_destroy", "pct destroy 106 --purge 1")
			v.Planned.Facts = executions.GuestFacts{VMID: 106, HA: true}
		},
		want: []string{"🛟 Proxmox HA manages CT 106: the destroy removes it from HA first (--purge)", "pct destroy 106 --purge 1"},
	}, {
		// pve-container src/PVE/API2/LXC.pm destroy_vm refuses a guest
		// with a replication job unless --purge
		// (check_for_existing_jobs), which removes its jobs.
		name: "destroy of a replicated container",
		change: func(v *CardView) {
			lxc(v, "pct_destroy", "pct destroy 106 --purge 1")
			v.Planned.Facts = executions.GuestFacts{VMID: 106, Replication: []string{"106-0", "106-1"}}
		},
		want: []string{"🔁 Storage replication jobs 106-0, 106-1 replicate CT 106: Proxmox refuses to destroy it unless purged, so the destroy removes it from those jobs (--purge)", "pct destroy 106 --purge 1"},
		not:  []string{"Proxmox HA manages"},
	}, {
		name: "a replicated container's stop says nothing of replication",
		change: func(v *CardView) {
			lxc(v, "pct_stop", "pct shutdown 106 --timeout 60 --forceStop 1")
			v.Planned.Facts = executions.GuestFacts{VMID: 106, Replication: []string{"106-0"}}
		},
		not: []string{"replicat", "--purge"},
	}, {
		name: "a ZFS rollback past newer snapshots",
		change: func(v *CardView) {
			lxc(v, "pct_rollback", "pct delsnapshot 106 c3", "pct delsnapshot 106 b2", "pct rollback 106 a1")
			v.Planned.Risk = policy.Risk{Class: policy.Destructive, Reasons: []string{"deletes the newer snapshots c3, b2 first: ZFS rolls back only to the newest"}}
			v.Planned.Facts = executions.GuestFacts{VMID: 106, Discard: []string{"c3", "b2"}}
		},
		want: []string{"🔴 destructive", "🗑 ZFS rolls back only to the newest snapshot: this first deletes c3, b2, newest first"},
	}, {
		// qemu-server sizes the state volume as twice the memory plus
		// 500 MiB (src/PVE/QemuConfig.pm __snapshot_save_vmstate).
		name: "a VM's RAM snapshot on short storage",
		change: func(v *CardView) {
			vm(v, "pct_snapshot", "qm snapshot 200 with-ram --vmstate 1")
			free := int64(6000)
			v.Planned.Facts = executions.GuestFacts{VMID: 200, VM: true,
				VMState: &executions.VMStateSpace{Storage: "local-lvm", MemoryMB: 4096, NeedMB: 8692, FreeMB: &free}}
		},
		want: []string{"⚠️ Storage is short: saving VM 200's RAM takes about 8692 MiB on local-lvm (twice the VM's 4096 MB of memory, plus 500 MiB of device state), and local-lvm had 6000 MiB free"},
		not:  []string{"CT 200"},
	}, {
		name: "a VM's RAM snapshot with room",
		change: func(v *CardView) {
			vm(v, "pct_snapshot", "qm snapshot 200 with-ram --vmstate 1")
			free := int64(90000)
			v.Planned.Facts = executions.GuestFacts{VMID: 200, VM: true,
				VMState: &executions.VMStateSpace{Storage: "local-lvm", MemoryMB: 4096, NeedMB: 8692, FreeMB: &free}}
		},
		want: []string{"💾 Saving VM 200's RAM takes about 8692 MiB on local-lvm"},
		not:  []string{"Storage is short"},
	}, {
		name: "a VM's hard stop snapshots the VM first",
		change: func(v *CardView) {
			vm(v, "pct_stop", "qm stop 200")
			v.Planned.Snapshot = true
			v.Planned.Facts = executions.GuestFacts{VMID: 200, VM: true}
		},
		want: []string{"📸 First, the actuator takes a snapshot of VM 200"},
		not:  []string{"CT 200"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := cardSetup(t)
			tc.change(&v)
			plain, htm := RenderCard(v)
			for _, w := range tc.want {
				if !strings.Contains(plain, w) || !strings.Contains(htm, escape(w)) && !strings.Contains(htm, w) {
					t.Errorf("want %q in both bodies:\n%s\n\n%s", w, plain, htm)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(plain, n) {
					t.Errorf("did not want %q in:\n%s", n, plain)
				}
			}
		})
	}
}

// TestPlanStepSaysTheSnapshotFailedAndNothingRan: a step whose snapshot
// failed did not run, and its line says so.
func TestPlanStepSaysTheSnapshotFailedAndNothingRan(t *testing.T) {
	t.Parallel()
	x := store.Execution{Request: store.Request{Action: "pct_exec", State: store.StateFailed}}
	r := tasks.Result{Status: tasks.StatusFailed, FailedPhase: "snapshot", Phases: []tasks.Phase{{Name: "snapshot", Status: tasks.StatusFailed}}}
	x.Result = factJSON(t, r)
	if got := snapshotState(x); got != ": ❌ it failed, so the step did not run" {
		t.Errorf("got %q", got)
	}
	r.FailedPhase, r.Status = "", tasks.StatusSucceeded
	x.Result = factJSON(t, r)
	if got := snapshotState(x); !strings.Contains(got, "went on without one") {
		t.Errorf("got %q", got)
	}
}

func factJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
