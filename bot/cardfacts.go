package bot

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// factSentences says, before approval, what Proxmox will make of a step on
// its container: the snapshot the actuator takes first or why there is
// none, a lock and what the actuator does about it, HA, the replication
// jobs a destroy purges it from, and the snapshots
// a rollback deletes first. snapshot says the step needs a snapshot first.
func factSentences(action string, snapshot bool, f executions.GuestFacts, vmid int) []string {
	ct := guestWord(f) + " " + strconv.Itoa(cmpVMID(f.VMID, vmid))
	var out []string
	switch {
	case snapshot && f.SnapshotBlocker != "":
		out = append(out, "📸 No snapshot: "+f.SnapshotBlocker+". Proxmox cannot snapshot "+ct+
			", so the change runs without one, and there is no one-step revert.")
	case snapshot:
		out = append(out, "📸 First, the actuator takes a snapshot of "+ct+", so the change can be rolled back.")
	}
	if f.Lock != "" {
		out = append(out, "🔒 "+ct+" is locked ("+f.Lock+"): "+policy.LockMeaning(f.Lock)+". The actuator waits up to "+humantime.Duration(cmp.Or(f.LockWait, tasks.DefaultLockWait))+
			" for the lock to clear before it changes anything, and never runs during a backup; past that the step fails, naming the lock.")
	}
	if f.HA {
		switch policy.Action(action) {
		case policy.ActionPctDestroy:
			out = append(out, "🛟 Proxmox HA manages "+ct+": the destroy removes it from HA first (--purge), and from its replication and backup jobs.")
		case policy.ActionPctStart, policy.ActionPctStop, policy.ActionGuestShutdown:
			out = append(out, "🛟 Proxmox HA manages "+ct+": HA starts or stops it on its own rounds, maybe on another node, and the step succeeds only once it has.")
		case policy.ActionPctRollback:
			if f.VM {
				out = append(out, "🛟 Proxmox HA manages "+ct+": the rollback stops it, and HA starts it again on its next round.")
			}
		}
	}
	if len(f.Replication) > 0 && policy.Action(action) == policy.ActionPctDestroy {
		// Proxmox refuses to destroy a guest with a replication job
		// unless purged (pve-container API2/LXC.pm destroy_vm).
		jobs, them := "Storage replication job "+f.Replication[0]+" replicates ", "that job"
		if len(f.Replication) > 1 {
			jobs, them = "Storage replication jobs "+strings.Join(f.Replication, ", ")+" replicate ", "those jobs"
		}
		out = append(out, "🔁 "+jobs+ct+": Proxmox refuses to destroy it unless purged, so the destroy removes it from "+them+
			" (--purge), and from its backup jobs; the replica on the target goes too.")
	}
	if v := f.VMState; v != nil {
		where := "its state storage"
		if v.Storage != "" {
			where = v.Storage
		}
		need := "about " + strconv.FormatInt(v.NeedMB, 10) + " MiB on " + where + " (twice the VM's " + strconv.Itoa(v.MemoryMB) + " MB of memory, plus 500 MiB of device state)"
		switch {
		case v.Short():
			out = append(out, "⚠️ Storage is short: saving "+ct+"'s RAM takes "+need+", and "+where+" had "+strconv.FormatInt(*v.FreeMB, 10)+
				" MiB free at the last inventory, so Proxmox will likely fail the snapshot. Free space there, set vmstatestorage, or snapshot without the RAM.")
		default:
			out = append(out, "💾 Saving "+ct+"'s RAM takes "+need+", besides the disks' snapshots.")
		}
	}
	if len(f.Discard) > 0 {
		out = append(out, "🗑 ZFS rolls back only to the newest snapshot: this first deletes "+strings.Join(f.Discard, ", ")+
			", newest first, and they cannot be brought back.")
	}
	return out
}

// guestWord is how Proxmox names the guest: CT or VM.
func guestWord(f executions.GuestFacts) string {
	if f.VM {
		return "VM"
	}
	return "CT"
}

func cmpVMID(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// factLines adds a one-step card's facts before its commands.
func factLines(m *bodies, v CardView, vmid int) {
	for _, s := range factSentences(v.Planned.Execution.Action, v.Planned.Snapshot, v.Planned.Facts, vmid) {
		m.para(s, escape(s))
	}
}

// stepFacts are a plan step's facts, the snapshot first with how it went.
func stepFacts(st executions.PlannedStep, vmid int) []string {
	facts := factSentences(st.Execution.Action, st.Snapshot, st.Facts, vmid)
	if st.Snapshot && st.Facts.SnapshotBlocker == "" && len(facts) > 0 {
		facts[0] = "📸 first, the actuator snapshots " + guestWord(st.Facts) + " " + strconv.Itoa(cmpVMID(st.Facts.VMID, vmid)) + snapshotState(st.Execution)
	}
	return facts
}
