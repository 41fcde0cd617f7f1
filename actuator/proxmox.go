package actuator

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/pveout"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// Proxmox as it really is, where it is less kind than a plain host:
//
//   - A lock in a container's config (lock: backup while vzdump runs)
//     makes pct refuse start, shutdown, stop, snapshot, rollback,
//     delsnapshot, destroy and set (pve-guest-common check_lock). Before
//     the first such command the actuator reads the lock and waits for it
//     to clear, bounded by the order's LockWait, or fails naming it.
//   - For a container under HA, pct start, shutdown and stop only queue a
//     request ("Requesting HA stop for CT 105") and exit 0 before anything
//     happened; the container may even start on another node. The step
//     succeeds only once the container is in the state it asked for.
//   - Snapshots take pool space and Nomos takes one before every change it
//     snapshots, so after a successful change it deletes its own oldest,
//     keeping the order's SnapshotKeep, never one it did not make.

// lockGuarded lists the pct verbs Proxmox refuses while a container is
// locked (pve-container src/PVE/API2/LXC/Status.pm, LXC.pm, Config.pm),
// and reboot, which stops and starts it.
var lockGuarded = []string{"start", "stop", "shutdown", "reboot", "snapshot", "rollback", "delsnapshot", "destroy", "set"}

// touchesLock reports whether any step is a pct command Proxmox refuses
// while the container is locked.
func touchesLock(steps []string) bool {
	for _, s := range steps {
		f := strings.Fields(s)
		if len(f) > 2 && f[0] == "pct" && slices.Contains(lockGuarded, f[1]) {
			return true
		}
	}
	return false
}

// lockLineRE finds the lock in pct config's output.
var lockLineRE = regexp.MustCompile(`(?m)^lock: ([a-z-]{1,32})$`)

// look runs a read-only command on the target's host and returns its
// output. It never counts as the execution's first command sent: nothing
// it runs changes anything.
func (x *execution) look(ctx context.Context, cmd string) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, x.a.cfg.CommandTimeout, fmt.Errorf("%w after %s", ErrTimedOut, x.a.cfg.CommandTimeout))
	defer cancel()
	var out, errb bytes.Buffer
	code, err = x.a.runner.Run(ctx, x.order.Target.HostAddr, cmd, &out, &errb)
	return out.String(), errb.String(), code, err
}

// sleep waits d, or until ctx ends; it reports whether the wait was whole.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitForLock reads the container's lock before the first command that a
// lock would refuse, and waits for it to clear for at most the order's
// LockWait. It reports whether the execution goes on; when it does not,
// nothing was sent.
func (x *execution) waitForLock(ctx context.Context, vmid int) bool {
	start := x.a.now()
	wait := time.Duration(x.order.LockWait)
	if wait <= 0 {
		wait = tasks.DefaultLockWait
	}
	wait = min(wait, tasks.MaxLockWait)
	deadline := time.Now().Add(wait)
	cmd := fmt.Sprintf("%s config %d --current 1", x.guestTool(), vmid)
	waited := ""
	for {
		stdout, stderr, code, err := x.look(ctx, cmd)
		switch {
		case err != nil && ctx.Err() != nil && x.a.workCtx.Err() != nil:
			x.fail(tasks.StatusFailed, "lock", -1, start, "", "The actuator was shutting down while it checked the container's lock; nothing was changed.")
			return false
		case err != nil:
			x.fail(tasks.StatusFailed, "lock", -1, start, "",
				fmt.Sprintf("Could not read %s %d's lock on %s, so nothing ran: %v", x.guestKind(), vmid, x.order.Target.Host, err))
			return false
		case code != 0:
			x.fail(tasks.StatusFailed, "lock", code, start, "",
				fmt.Sprintf("Could not read %s %d's lock (%s config exited %d: %s), so nothing ran.", x.guestKind(), vmid, x.guestTool(), code, lastLine(stderr)))
			return false
		}
		m := lockLineRE.FindStringSubmatch(stdout)
		if m == nil {
			if waited != "" {
				x.addPhase("lock", tasks.StatusSucceeded, 0, start, "waited for the "+waited+" lock to clear")
				x.note("%s %d was locked (%s); the actuator waited %s for it to clear before it went on.", x.guestKind(), vmid, waited, x.a.now().Sub(start).Round(time.Second))
			}
			return true
		}
		lock := m[1]
		if waited == "" {
			waited = lock
			x.current = "lock"
			x.prog.setPhase("lock")
			x.out.WriteString(fmt.Sprintf("== lock\n%s %d is locked (%s): %s. Waiting up to %s for it to clear.\n", x.guestKind(), vmid, lock, policy.LockMeaning(lock), wait))
		}
		if time.Now().Add(x.a.cfg.PollInterval).After(deadline) || !sleep(ctx, x.a.cfg.PollInterval) {
			x.fail(tasks.StatusFailed, "lock", 0, start, "",
				fmt.Sprintf("%s %d is locked (%s): %s. The actuator waited %s and ran nothing; try again once it has finished.", x.guestKind(), vmid, lock, policy.LockMeaning(lock), wait))
			return false
		}
	}
}

// haRequestRE is what pct or qm prints when it hands a guest's power to
// HA (pve-container src/PVE/API2/LXC/Status.pm, qemu-server
// src/PVE/API2/Qemu.pm vm_start, vm_shutdown, vm_stop).
var haRequestRE = regexp.MustCompile(`(?m)^Requesting HA (start|stop) for (?:CT|VM) (\d+)$`)

// haWanted is the state a step's HA request asks for ("running" or
// "stopped"), or "" when the step's output holds no HA request.
func haWanted(stdout string) string {
	m := haRequestRE.FindStringSubmatch(stdout)
	switch {
	case m == nil:
		return ""
	case m[1] == "start":
		return "running"
	}
	return "stopped"
}

// statusRE reads pct status's answer.
var statusRE = regexp.MustCompile(`(?m)^status: ([a-z]{1,16})$`)

// guestState is where a container is and how it runs, as the cluster sees
// it.
type guestState struct {
	status, node, hastate string
}

func (g guestState) String() string {
	s := g.status
	if s == "" {
		s = "unknown"
	}
	if g.node != "" {
		s += " on node " + g.node
	}
	if g.hastate != "" {
		s += ", HA state " + g.hastate
	}
	return s
}

// readGuest reads the guest's state: pct or qm status on its node, and the
// cluster's listing when the node no longer has it (HA may start it on
// another) or when with asks for the HA state too.
func (x *execution) readGuest(ctx context.Context, vmid int, withHA bool) (guestState, error) {
	stdout, _, code, err := x.look(ctx, x.guestTool()+" status "+strconv.Itoa(vmid))
	if err != nil {
		return guestState{}, err
	}
	if m := statusRE.FindStringSubmatch(stdout); code == 0 && m != nil && !withHA {
		return guestState{status: m[1], node: x.order.Target.Host}, nil
	}
	stdout, _, code, err = x.look(ctx, "pvesh get /cluster/resources --type vm --output-format json")
	if err != nil {
		return guestState{}, err
	}
	if code != 0 || len(stdout) > maxListingBytes {
		return guestState{}, fmt.Errorf("pvesh get /cluster/resources exited %d", code)
	}
	list, err := pveout.ParseResources([]byte(stdout))
	if err != nil {
		return guestState{}, fmt.Errorf("read /cluster/resources: %w", err)
	}
	typ := "lxc"
	if x.guestTool() == "qm" {
		typ = "qemu"
	}
	for _, g := range list {
		if g.Type == typ && g.VMID == vmid {
			return guestState{status: g.Status, node: g.Node, hastate: g.HAState}, nil
		}
	}
	return guestState{status: "gone"}, nil
}

// waitForHA follows a step that Proxmox handed to HA until the container
// is in the state it asked for, for at most HAWait. It reports whether
// the step succeeded; a step that did not is recorded failed with the
// state seen last, never as succeeded.
func (x *execution) waitForHA(ctx context.Context, name string, start time.Time, code int, vmid int, want string) bool {
	x.out.WriteString(fmt.Sprintf("Proxmox HA manages %s %d: waiting up to %s for it to be %s.\n", x.guestKind(), vmid, x.a.cfg.HAWait, want))
	ctx, cancel := context.WithTimeout(ctx, x.a.cfg.HAWait)
	defer cancel()
	var seen guestState
	var lastErr error
	for {
		g, err := x.readGuest(ctx, vmid, false)
		if err == nil {
			seen, lastErr = g, nil
			if g.status == want {
				note := fmt.Sprintf("HA had %s %d %s after %s", x.guestKind(), vmid, want, x.a.now().Sub(start).Round(time.Second))
				if g.node != "" && g.node != x.order.Target.Host {
					note += ", on node " + g.node
					x.note("Proxmox HA started %s %d on node %s, not on %s.", x.guestKind(), vmid, g.node, x.order.Target.Host)
				}
				x.out.WriteString(note + ".\n")
				x.addPhase(name, tasks.StatusSucceeded, code, start, note)
				return true
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		if !sleep(ctx, x.a.cfg.PollInterval) {
			break
		}
	}
	if x.a.workCtx.Err() != nil {
		x.fail(tasks.StatusOutcomeUnknown, name, code, start, "",
			fmt.Sprintf("%s: Proxmox HA took the request for %s %d, and the actuator stopped before it saw it %s. Check the target, then mark the execution reconciled.", name, x.guestKind(), vmid, want))
		return false
	}
	// One last look, with the HA state, for the report.
	lookCtx, cancelLook := context.WithTimeout(x.a.workCtx, 30*time.Second)
	defer cancelLook()
	if g, err := x.readGuest(lookCtx, vmid, true); err == nil {
		seen = g
	}
	msg := fmt.Sprintf("%s: Proxmox HA took the request, but after %s %s %d is %s, not %s. It may still get there; `status` will show it.",
		name, x.a.cfg.HAWait, x.guestKind(), vmid, seen, want)
	if seen.status == "" && lastErr != nil {
		msg = fmt.Sprintf("%s: Proxmox HA took the request, but in %s the actuator could not read %s %d's state (%v), so it does not know whether it is %s.",
			name, x.a.cfg.HAWait, x.guestKind(), vmid, lastErr, want)
	}
	x.fail(tasks.StatusFailed, name, code, start, "", msg)
	return false
}

// pruneSnapshots deletes Nomos's own oldest snapshots of the container so
// that the order's SnapshotKeep remain, after a change that succeeded. A
// snapshot it did not make is never touched, nor the one just taken. A
// prune that fails leaves the change succeeded, with a note.
func (x *execution) pruneSnapshots(ctx context.Context, vmid int) {
	keep := x.order.SnapshotKeep
	if keep < 1 || x.res.Snapshot == "" {
		return
	}
	start := x.a.now()
	stdout, stderr, code, err := x.look(ctx, x.guestTool()+" listsnapshot "+strconv.Itoa(vmid))
	if err != nil || code != 0 {
		why := lastLine(stderr)
		if err != nil {
			why = err.Error()
		}
		x.addPhase("prune", tasks.StatusFailed, code, start, "could not list snapshots: "+why)
		x.note("Could not list %s %d's snapshots to delete Nomos's oldest (%s); they stay until the next change.", x.guestKind(), vmid, why)
		return
	}
	names := snapshotNames(stdout)
	var ours []string
	for _, n := range names {
		if policy.IsNomosSnapshot(n) && n != x.res.Snapshot {
			ours = append(ours, n)
		}
	}
	// Nomos's names carry the time they were taken; "-2" marks a second
	// one within the same second.
	slices.SortFunc(ours, func(a, b string) int {
		if len(a) != len(b) && a[:21] == b[:21] {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	prune := policy.SnapshotsToPrune(ours, keep-1) // the one just taken is kept too
	if keep == 1 {
		prune = ours
	}
	if len(prune) == 0 {
		return
	}
	var deleted, failed []string
	for _, s := range prune {
		c, err := x.attempt(ctx, "prune", fmt.Sprintf("%s delsnapshot %d %s", x.guestTool(), vmid, s), nil)
		if err != nil || c != 0 {
			failed = append(failed, s+" ("+x.why()+")")
			if err != nil {
				break
			}
			continue
		}
		deleted = append(deleted, s)
	}
	status := tasks.StatusSucceeded
	note := fmt.Sprintf("deleted %s, keeping the newest %d of Nomos's snapshots", strings.Join(deleted, ", "), keep)
	if len(failed) > 0 {
		status = tasks.StatusFailed
		note = "could not delete " + strings.Join(failed, ", ")
		x.note("Nomos could not delete its old snapshots %s of %s %d; they stay until the next change.", strings.Join(failed, ", "), x.guestKind(), vmid)
	}
	if len(deleted) > 0 {
		x.note("Deleted Nomos's older snapshots %s of %s %d: it keeps the newest %d it made (snapshots.keep), and never deletes one it did not.", strings.Join(deleted, ", "), x.guestKind(), vmid, keep)
	}
	x.addPhase("prune", status, 0, start, note)
}

// snapshotNames reads the snapshot names from pct listsnapshot's tree,
// "current" left out.
func snapshotNames(listing string) []string {
	var out []string
	for line := range strings.SplitSeq(listing, "\n") {
		_, rest, ok := strings.Cut(line, "`-> ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if name != "current" && policy.ValidateSnapshotName(name) == nil {
			out = append(out, name)
		}
	}
	return out
}

// featureUnavailable is how pct says a container cannot be snapshotted at
// all (pve-guest-common src/PVE/AbstractConfig.pm __snapshot_prepare).
const featureUnavailable = "snapshot feature is not available"
