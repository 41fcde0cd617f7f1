package actuator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
		res:   tasks.Result{ExecutionID: o.ExecutionID, PlanHash: o.PlanHash, StartedAt: started},
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
// asks for one, and stops at the first that does not succeed.
func (x *execution) runSteps(ctx context.Context, class policy.Class) {
	if policy.NeedsSnapshot(x.plan.Params, x.plan.Target, class) && !x.snapshot(ctx, x.plan.Target.VMID) {
		return
	}
	action := string(x.plan.Action())
	for i, step := range x.plan.Steps {
		name := action
		if len(x.plan.Steps) > 1 {
			name = action + "_" + strconv.Itoa(i+1)
		}
		if !x.phase(ctx, name, step) {
			return
		}
	}
	if p, ok := x.plan.Params.(policy.PctRollbackParams); ok {
		x.note("Container %d is at snapshot %s and stopped, as a rollback leaves it; request pct_start to bring it back.", x.plan.Target.VMID, p.Name)
	}
}

// snapshot takes a snapshot of the container before a change. A host that
// cannot snapshot it (a storage without snapshots, say) does not stop the
// change, and the result says there is no one-step revert. It reports
// whether the execution goes on.
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
		code, err = x.attempt(ctx, "snapshot", fmt.Sprintf("pct snapshot %d %s", vmid, name), nil)
		if err != nil || code == 0 || !strings.Contains(x.why(), "already used") {
			break
		}
	}
	switch {
	case err == nil && code == 0:
		x.res.Snapshot = name
		x.addPhase("snapshot", tasks.StatusSucceeded, code, start, "took snapshot "+name)
		x.note("Took snapshot %s of container %d before the change. To undo the change, request pct_rollback on lxc:%d with name %s.", name, vmid, vmid, name)
		return true
	case err == nil:
		why := x.why()
		x.addPhase("snapshot", tasks.StatusFailed, code, start, "no snapshot; went on without one: "+why)
		x.note("No snapshot was taken (pct snapshot exited %d: %s), so there is no one-step revert for this change.", code, why)
		return true
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

func (x *execution) note(format string, args ...any) {
	x.res.Notes = append(x.res.Notes, fmt.Sprintf(format, args...))
}
