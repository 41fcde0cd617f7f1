package actuator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomoshq/nomos/internal/logctx"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// execution is one order being carried out.
type execution struct {
	a     *Actuator
	order tasks.Order
	plan  policy.Plan
	log   *slog.Logger
	out   *outputBuffer
	prog  *progress
	res   tasks.Result

	current string        // the phase whose output is streaming
	stderr  *outputBuffer // the last command's standard error
}

// why is the line that best says why the last command failed: its last
// line of standard error, else the last line of output.
func (x *execution) why() string {
	if x.stderr != nil {
		if l := lastLine(x.stderr.Tail(1, 300)); l != "" {
			return l
		}
	}
	return lastLine(x.out.Tail(1, 300))
}

// execute runs a verified, journaled order on ctx, which carries the
// order's logger, and returns its result.
func (a *Actuator) execute(ctx context.Context, o tasks.Order, plan policy.Plan, class policy.Class, started time.Time) tasks.Result {
	x := &execution{
		a:     a,
		order: o,
		plan:  plan,
		log:   logctx.From(ctx),
		out:   &outputBuffer{},
		res:   tasks.Result{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash, Began: true, StartedAt: started},
	}
	x.prog = newProgress(a, o.ExecutionID, started, x.out)
	x.prog.start(ctx)
	if p, ok := plan.Params.(policy.PctCreateParams); ok {
		x.provision(ctx, p)
	} else {
		x.runSteps(ctx, class)
	}
	x.prog.finish()
	if x.res.Status == "" {
		x.res.Status = tasks.StatusSucceeded
	}
	x.res.Output = x.out.Tail(resultTailLines, resultTailBytes)
	x.res.FinishedAt = a.now()
	return x.res
}

// runSteps runs the plan's steps in order, after a snapshot when the class
// asks for one, and stops at the first that does not succeed. Before the
// first command a lock on the container would refuse, it waits for the
// lock to clear; a step Proxmox hands to HA succeeds only once the
// container is where it asked; and after a change it snapshotted first it
// deletes its own oldest snapshots beyond the order's SnapshotKeep.
func (x *execution) runSteps(ctx context.Context, class policy.Class) {
	vmid := x.plan.Target.VMID
	snapshotFirst := policy.NeedsSnapshot(x.plan.Params, x.plan.Target, class)
	if vmid != 0 && (snapshotFirst || touchesLock(x.plan.Steps)) && !x.waitForLock(ctx, vmid) {
		return
	}
	if snapshotFirst && !x.snapshot(ctx, vmid) {
		return
	}
	action := string(x.plan.Action())
	for i, step := range x.plan.Steps {
		name := action
		if len(x.plan.Steps) > 1 {
			name = action + "_" + strconv.Itoa(i+1)
		}
		if !x.step(ctx, name, step) {
			return
		}
	}
	if p, ok := x.plan.Params.(policy.PctRollbackParams); ok {
		if len(p.Discard) > 0 {
			x.note("Deleted the newer snapshots %s of container %d first, as the plan said: ZFS rolls back only to the newest.", strings.Join(p.Discard, ", "), vmid)
		}
		if x.plan.Target.Type == policy.TargetVM {
			x.note("VM %d is at snapshot %s. Unless the snapshot holds its RAM, the rollback left it stopped: Proxmox HA starts it again if it manages it; otherwise request pct_start.", vmid, p.Name)
		} else {
			x.note("Container %d is at snapshot %s and stopped, as a rollback leaves it; request pct_start to bring it back.", vmid, p.Name)
		}
	}
	if snapshotFirst {
		x.pruneSnapshots(ctx, vmid)
	}
}

// step runs one of the plan's commands as a named phase. A pct or qm
// start, shutdown, stop or reboot that Proxmox hands to HA succeeds only
// once the guest is in the state it asked for.
func (x *execution) step(ctx context.Context, name, cmd string) bool {
	f := strings.Fields(cmd)
	if len(f) < 3 || (f[0] != "pct" && f[0] != "qm") || !slices.Contains([]string{"start", "shutdown", "stop", "reboot"}, f[1]) {
		return x.phase(ctx, name, cmd)
	}
	start := x.a.now()
	var stdout bytes.Buffer
	code, err := x.attempt(ctx, name, cmd, &stdout)
	if err != nil || code != 0 {
		return x.record(name, start, code, err, "")
	}
	want := haWanted(stdout.String())
	if want == "" {
		return x.record(name, start, code, err, "")
	}
	return x.waitForHA(ctx, name, start, code, x.plan.Target.VMID, want)
}

// snapshot takes a snapshot of the container before a change. A container
// Proxmox cannot snapshot at all (a bind mount, a raw disk on dir storage)
// goes on without one only when the plan's card said so
// (Target.SnapshotBlocker); any other failure ends the execution before
// the change, which the operator approved with a snapshot first. It
// reports whether the execution goes on.
func (x *execution) snapshot(ctx context.Context, vmid int) bool {
	start := x.a.now()
	base := policy.SnapshotName(start)
	var name string
	var code int
	var err error
	// Names go by the second; a second change in the same second takes
	// the next free suffix.
	for i := 1; i <= snapshotNameAttempts; i++ {
		name = base
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		code, err = x.attempt(ctx, "snapshot", fmt.Sprintf("%s snapshot %d %s", x.guestTool(), vmid, name), nil)
		if err != nil || code == 0 || !strings.Contains(x.why(), "already used") {
			break
		}
	}
	blocker := x.plan.Target.SnapshotBlocker
	switch {
	case err == nil && code == 0:
		x.res.Snapshot = name
		x.addPhase("snapshot", tasks.StatusSucceeded, code, start, "took snapshot "+name)
		x.note("Took snapshot %s of container %d before the change. To undo the change, request pct_rollback on %s with name %s: "+
			"on ZFS a rollback past a later snapshot deletes that one first, and its card says so.", name, vmid, x.containerRef(vmid), name)
		if k := x.order.SnapshotKeep; k > 0 {
			x.note("Nomos keeps the newest %d snapshots it made of container %d, so %s goes once %d newer ones exist.", k, vmid, name, k)
		}
		return true
	case err == nil && blocker != "" && strings.Contains(x.why(), featureUnavailable):
		x.addPhase("snapshot", tasks.StatusFailed, code, start, "no snapshot, as the card said ("+blocker+"); went on without one")
		x.note("No snapshot was taken: container %d cannot be snapshotted (%s), as the card said before approval. There is no one-step revert for this change.", vmid, blocker)
		return true
	case err == nil:
		why := x.why()
		msg := fmt.Sprintf("snapshot failed: %s snapshot exited %d: %s. Nothing else ran: the change was approved with a snapshot first.", x.guestTool(), code, why)
		if strings.Contains(why, featureUnavailable) {
			msg += " The container cannot be snapshotted now, and the card did not say so; request the plan again to see why."
		}
		x.fail(tasks.StatusFailed, "snapshot", code, start, "", msg)
		return false
	}
	return x.record("snapshot", start, code, err, "")
}

// snapshotNameAttempts bounds the names tried for one snapshot.
const snapshotNameAttempts = 5

// phase runs one command as a named phase and records how it went. It
// reports whether the execution goes on.
func (x *execution) phase(ctx context.Context, name, cmd string) bool {
	start := x.a.now()
	code, err := x.attempt(ctx, name, cmd, nil)
	return x.record(name, start, code, err, "")
}

// attempt runs cmd once on the target's host, under the command timeout,
// streaming its output. capture, if set, also receives its stdout.
func (x *execution) attempt(ctx context.Context, phase, cmd string, capture io.Writer) (int, error) {
	if phase != x.current {
		x.current = phase
		x.prog.setPhase(phase)
		x.out.WriteString("== " + phase + "\n")
	}
	d := x.a.cfg.CommandTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("%w after %s", ErrTimedOut, d))
	defer cancel()
	stdout := io.Writer(x.out)
	if capture != nil {
		stdout = io.MultiWriter(x.out, capture)
	}
	x.stderr = &outputBuffer{}
	// Journaled at the last moment before the command goes out, so that
	// after a crash the actuator knows whether anything could have
	// reached the host.
	ctx = WithBeforeSend(ctx, func() error {
		if err := x.a.journal.Sent(x.order.ExecutionID, x.a.now()); err != nil {
			x.log.Error("journal the first command; not sending it", "err", err)
			return fmt.Errorf("journal: %w", err)
		}
		return nil
	})
	code, err := x.a.runner.Run(ctx, x.order.Target.HostAddr, cmd, stdout, io.MultiWriter(x.out, x.stderr))
	if err != nil {
		x.log.Warn("command did not complete", "phase", phase, "err", err)
	}
	return code, err
}

// record adds a phase for a finished attempt. A phase that did not succeed
// ends the execution: failed when the command failed, timed out or never
// reached the host; outcome_unknown when it was sent and then lost. It
// reports whether the execution goes on.
func (x *execution) record(name string, start time.Time, code int, err error, note string) bool {
	host := x.order.Target.Host
	switch {
	case err == nil && code == 0:
		x.addPhase(name, tasks.StatusSucceeded, code, start, note)
		return true
	case err == nil && x.shutdownTimedOut():
		p := x.plan.Params.(policy.GuestShutdownParams)
		kind, stop := "CT", "pct_stop stops it hard after another 60 s"
		if x.plan.Target.Type == policy.TargetVM {
			kind, stop = "VM", "pct_stop powers it off at once, like pulling the plug"
		}
		x.fail(tasks.StatusFailed, name, code, start, note, fmt.Sprintf(
			"%s failed: %s %d did not shut down within %d s and is still running (%s said: %s). Nothing was forced; %s, if you mean to.",
			name, kind, x.plan.Target.VMID, p.Timeout, x.guestTool(), x.why(), stop))
	case err == nil:
		msg := fmt.Sprintf("%s failed: the command exited with status %d", name, code)
		if l := x.why(); l != "" && !strings.HasPrefix(l, "== ") {
			msg += ": " + l
		}
		x.fail(tasks.StatusFailed, name, code, start, note, msg)
	case errors.Is(err, ErrNotSent):
		x.fail(tasks.StatusFailed, name, -1, start, note,
			fmt.Sprintf("%s failed before anything was sent to %s, so it did not run: %v", name, host, err))
	case errors.Is(err, context.Canceled) && x.a.workCtx.Err() != nil:
		x.fail(tasks.StatusOutcomeUnknown, name, -1, start, note,
			fmt.Sprintf("%s was killed because the actuator was shutting down; it may or may not have made its change. Check the target, then mark the execution reconciled.", name))
	case errors.Is(err, ErrTimedOut):
		x.fail(tasks.StatusFailed, name, -1, start, note,
			fmt.Sprintf("%s was killed because it ran too long (%v); it may have made part of its change.", name, err))
	default:
		x.fail(tasks.StatusOutcomeUnknown, name, -1, start, note,
			fmt.Sprintf("%s: the connection to %s ended after the command was sent and before it reported how it ended, so it may or may not have run (%v). Check the target, then mark the execution reconciled.", name, host, err))
	}
	return false
}

func (x *execution) addPhase(name string, status tasks.Status, code int, start time.Time, note string) {
	x.res.Phases = append(x.res.Phases, tasks.Phase{
		Name: name, Status: status, ExitCode: code, Elapsed: tasks.Duration(x.a.now().Sub(start)), Note: note,
	})
}

// fail ends the execution at phase name.
func (x *execution) fail(status tasks.Status, name string, code int, start time.Time, note, msg string) {
	x.addPhase(name, status, code, start, note)
	x.res.Status = status
	x.res.FailedPhase = name
	x.res.ExitCode = code
	x.res.Error = msg
}

// guestTool is the Proxmox tool for the target's guest: qm for a VM, pct
// for a container.
// guestKind is how Proxmox names the target in its messages: CT or VM.
func (x *execution) guestKind() string {
	if x.guestTool() == "qm" {
		return "VM"
	}
	return "CT"
}

func (x *execution) guestTool() string {
	if x.order.Target.Type == string(policy.TargetVM) {
		return "qm"
	}
	return "pct"
}

// shutdownTimedOut reports whether a guest_shutdown step failed because the
// guest outlasted its timeout: qemu-server's _do_vm_stop says "VM
// quit/powerdown failed - got timeout" and leaves it running, and
// pve-container's PVE::LXC vm_stop "container did not stop".
func (x *execution) shutdownTimedOut() bool {
	_, ok := x.plan.Params.(policy.GuestShutdownParams)
	why := x.why()
	return ok && (strings.Contains(why, "got timeout") || strings.Contains(why, "container did not stop"))
}

// containerRef is how a note names the container for a request: the
// target's slug when the target is the container, else its vmid.
func (x *execution) containerRef(vmid int) string {
	if x.order.Target.Type == string(policy.TargetLXC) && x.order.Target.Slug != "" {
		return x.order.Target.Slug
	}
	return "lxc:" + strconv.Itoa(vmid)
}

func (x *execution) note(format string, args ...any) {
	x.res.Notes = append(x.res.Notes, fmt.Sprintf(format, args...))
}
