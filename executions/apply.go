package executions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Applied says what a progress or result message did.
type Applied struct {
	Execution store.Execution
	// Changed is false when the message was late and moved nothing.
	Changed bool
}

// neverDispatched are the states of an execution no order went out for:
// no genuine actuator can report on one.
var neverDispatched = []store.ExecutionState{store.StateAwaitingApproval, store.StateDenied, store.StateExpired, store.StateCancelled,
	store.StateWaiting, store.StateSkipped}

// reportedExecution loads the execution a verified report names, or
// refuses the report when the bot never dispatched it.
func (s *Service) reportedExecution(ctx context.Context, ref RefusedReportError) (store.Execution, error) {
	id, err := uuid.Parse(ref.ExecutionID)
	if err != nil {
		ref.Reason, ref.Detail = RefusedMalformed, "the execution id is not a uuid"
		return store.Execution{}, s.refuse(ctx, ref)
	}
	x, err := s.store.GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		ref.Reason, ref.Detail = RefusedNotDispatched, "there is no such execution"
		return x, s.refuse(ctx, ref)
	}
	if err != nil {
		return x, err
	}
	if slices.Contains(neverDispatched, x.State) {
		ref.Reason, ref.Detail = RefusedNotDispatched, fmt.Sprintf("the execution is %s and was never dispatched", x.State)
		return x, s.refuse(ctx, ref)
	}
	return x, nil
}

// applyProgress records the actuator's progress. The first progress of a
// dispatched execution is its acknowledgment and moves it to running.
// Each report must carry a higher number than the last one applied, so a
// copy put back on the queue is refused as a replay. A later report for a
// terminal execution changes nothing.
//
// An execution may still read "approved" here: the order is enqueued
// before the dispatch is recorded, and a quick actuator can report back in
// between. Only a signed order the bot sent can be running, so that
// counts as dispatched.
func (s *Service) applyProgress(ctx context.Context, p tasks.Progress) (Applied, error) {
	ref := RefusedReportError{Type: tasks.TypeExecutionProgress, ExecutionID: p.ExecutionID, Actuator: p.Actuator}
	x, err := s.reportedExecution(ctx, ref)
	if err != nil {
		return Applied{}, err
	}
	seq, tail := int64(p.Seq), p.Tail
	var conflict *store.StateConflictError
	if x.State == store.StateApproved || x.State == store.StateDispatched {
		moved, err := s.store.Transition(ctx, store.Transition{
			ID: x.ID, From: []store.ExecutionState{store.StateApproved, store.StateDispatched}, To: store.StateRunning,
			ProgressTail: &tail, ProgressSeq: seq, Heartbeat: true,
			Audit: beganAudit(p.At.Add(-time.Duration(p.Elapsed))),
		})
		if err == nil {
			return Applied{Execution: moved, Changed: true}, nil
		}
		if !errors.As(err, &conflict) {
			return Applied{}, err
		}
		x = conflict.Current
	}
	if x.State == store.StateRunning {
		updated, err := s.store.UpdateProgress(ctx, x.ID, seq, tail)
		if err == nil {
			return Applied{Execution: updated, Changed: true}, nil
		}
		if !errors.As(err, &conflict) {
			return Applied{}, err
		}
		x = conflict.Current
	}
	if seq <= x.ProgressSeq {
		ref.Reason, ref.Detail = RefusedReplayed, fmt.Sprintf("progress %d, and progress %d was already applied", seq, x.ProgressSeq)
		return Applied{}, s.refuse(ctx, ref)
	}
	return Applied{Execution: x}, nil
}

// beganAudit is the audit row of an order's start, as the actuator
// reported it: with its first progress report, or with its result when
// that came first.
func beganAudit(startedAt time.Time) store.AuditEntry {
	return store.AuditEntry{Actor: "actuator", Action: "execution.running",
		Detail: map[string]any{"started_at": startedAt.UTC().Format(time.RFC3339Nano)}}
}

// inFlight are the states a result can end: approved too, for the reason
// applyProgress gives.
var inFlight = []store.ExecutionState{store.StateApproved, store.StateDispatched, store.StateRunning}

// applyResult records the actuator's final word, once per execution: a
// second result is refused as a replay. A result for an execution that
// ended without one (the reconciler gave up on it) changes nothing and is
// kept only in the audit log. A refused replay of an order never moves
// the execution: the first delivery's result stands. A refusal of an
// order the bot never signed changes nothing either, and is refused here
// as a sign of a forged order.
func (s *Service) applyResult(ctx context.Context, r tasks.Result) (Applied, error) {
	ref := RefusedReportError{Type: tasks.TypeExecutionResult, ExecutionID: r.ExecutionID, Actuator: r.Actuator}
	if id, err := uuid.Parse(r.ExecutionID); err == nil && r.Status == tasks.StatusRefused && r.Refusal == tasks.RefusedNotApproved {
		// A copy of an order the bot said was no longer approved: the
		// execution stays as it is, and the audit log keeps the attempt.
		if _, err := s.store.GetExecution(ctx, id); err == nil {
			return s.noteLate(ctx, id, "execution.unapproved_order_refused", r)
		}
	}
	x, err := s.reportedExecution(ctx, ref)
	if err != nil {
		return Applied{}, err
	}
	var to store.ExecutionState
	errText := r.Error
	switch r.Status {
	case tasks.StatusSucceeded:
		to = store.StateSucceeded
	case tasks.StatusFailed:
		to = store.StateFailed
	case tasks.StatusOutcomeUnknown:
		to = store.StateOutcomeUnknown
	case tasks.StatusRefused:
		if r.Refusal == tasks.RefusedReplay {
			return s.noteLate(ctx, x.ID, "execution.replay_refused", r)
		}
		if r.PlanHash == "" {
			ref.Reason, ref.Detail = RefusedForgedOrder, fmt.Sprintf("the actuator refused an order it could not vouch for (%s): %s", r.Refusal, r.Error)
			return Applied{}, s.refuse(ctx, ref)
		}
		to = store.StateFailed
		errText = "the actuator refused the order (" + string(r.Refusal) + "): " + r.Error
	default:
		ref.Reason, ref.Detail = RefusedMalformed, fmt.Sprintf("unknown status %q", r.Status)
		return Applied{}, s.refuse(ctx, ref)
	}
	if r.PlanHash != "" && r.PlanHash != x.PlanHash {
		ref.Reason, ref.Detail = RefusedWrongOrder, fmt.Sprintf("the result is for plan %s, and the execution's plan is %s", r.PlanHash, x.PlanHash)
		return Applied{}, s.refuse(ctx, ref)
	}
	if !slices.Contains(inFlight, x.State) {
		if x.Result != nil {
			ref.Reason, ref.Detail = RefusedReplayed, fmt.Sprintf("a result was already applied; the execution is %s", x.State)
			return Applied{}, s.refuse(ctx, ref)
		}
		return s.noteLate(ctx, x.ID, "execution.late_result", r)
	}
	if r.Created != nil {
		if why := s.checkCreated(ctx, x, *r.Created); why != "" {
			ref.Reason, ref.Detail = RefusedCreated, why
			return Applied{}, s.refuse(ctx, ref)
		}
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return Applied{}, err
	}
	// The fleet changes the step made are recorded before its new state,
	// so whoever hears of the state (a continuation asking for the next
	// step on the new container) already sees them.
	s.applyFleetChanges(ctx, x, r)
	tail := r.Output
	t := store.Transition{
		ID: x.ID, From: inFlight, To: to,
		Result: raw, Error: &errText, ProgressTail: &tail,
		Audit: store.AuditEntry{Actor: "actuator", Action: "execution." + string(to),
			Detail: map[string]any{"exit_code": r.ExitCode, "error": errText, "failed_phase": r.FailedPhase, "snapshot": r.Snapshot}},
	}
	if r.Began && x.State != store.StateRunning {
		// The result is the first the bot hears of an order that ended
		// before its first progress report was due: its start goes on
		// record before its end, as a progress report would have put it.
		t.From = []store.ExecutionState{store.StateApproved, store.StateDispatched}
		t.Earlier = []store.AuditEntry{beganAudit(r.StartedAt)}
	}
	done, err := s.store.Transition(ctx, t)
	var conflict *store.StateConflictError
	if errors.As(err, &conflict) && conflict.Current.State == store.StateRunning && t.Earlier != nil {
		// Its progress report was applied meanwhile and recorded the start.
		t.From, t.Earlier = []store.ExecutionState{store.StateRunning}, nil
		done, err = s.store.Transition(ctx, t)
	}
	if errors.As(err, &conflict) {
		// Another delivery of a result won the race; this one is late.
		return s.noteLate(ctx, x.ID, "execution.late_result", r)
	}
	if err != nil {
		return Applied{}, err
	}
	s.observeEnd(done)
	s.logger.Info("execution finished", "execution_id", x.ID, "state", to)
	if done.PlanID != nil && to == store.StateSucceeded {
		s.dispatchNext(ctx, *done.PlanID)
	}
	return Applied{Execution: done, Changed: true}, nil
}

// checkCreated says why a reported new container cannot be accepted, or
// returns "". Only pct_create makes one, with the host, name, address and
// vmid its order asked for, and never over a container the fleet has: a
// slug in use is refused unless its container was destroyed, since
// Proxmox hands a destroyed container's vmid out again.
func (s *Service) checkCreated(ctx context.Context, x store.Execution, c tasks.CreatedContainer) string {
	if x.Action != string(policy.ActionPctCreate) {
		return fmt.Sprintf("a %s order does not create containers", x.Action)
	}
	params, err := policy.ParseParams(policy.ActionPctCreate, x.Params)
	if err != nil {
		return fmt.Sprintf("the execution's parameters do not parse: %v", err)
	}
	p, ok := params.(policy.PctCreateParams)
	if !ok {
		return "the execution's parameters are not pct_create's"
	}
	switch {
	case policy.ValidateVMID(c.VMID) != nil:
		return fmt.Sprintf("vmid %d is not a container id", c.VMID)
	case p.VMID != 0 && c.VMID != p.VMID:
		return fmt.Sprintf("the order asked for vmid %d, not %d", p.VMID, c.VMID)
	case x.TargetSlug != "host:"+c.Host:
		return fmt.Sprintf("the order was for %s, not host %s", x.TargetSlug, c.Host)
	case c.Hostname != p.Hostname || c.IP != p.IP:
		return fmt.Sprintf("the order asked for %s at %s, not %s at %s", p.Hostname, p.IP, c.Hostname, c.IP)
	case c.Address != "" && p.IP != policy.DefaultIP:
		return fmt.Sprintf("the order gave the static address %s, so no leased address %s can be reported", p.IP, c.Address)
	case c.Address != "" && !leasable(c.Address):
		return fmt.Sprintf("the leased address %q is not a host address on a network", c.Address)
	}
	slug, err := s.store.ContainerSlugOn(ctx, c.Host, c.VMID)
	if err != nil {
		return fmt.Sprintf("could not look up host %s: %v", c.Host, err)
	}
	e, err := s.store.EntityBySlug(ctx, slug)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ""
	case err != nil:
		return fmt.Sprintf("could not look up %s: %v", slug, err)
	case e.Lifecycle != "destroyed":
		return fmt.Sprintf("%s already exists (%s)", slug, e.Lifecycle)
	}
	return ""
}

// leasable reports whether cidr is an address DHCP could have leased to a
// container: IPv4, with a prefix, not loopback, link-local, multicast or
// unspecified.
func leasable(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > 32 {
		return false
	}
	a := p.Addr()
	return !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast() && !a.IsUnspecified() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// applyFleetChanges records what a finished step did to the fleet: a
// destroyed container, or one it created (active when provisioning went
// through, provisioning when a later phase failed).
func (s *Service) applyFleetChanges(ctx context.Context, x store.Execution, r tasks.Result) {
	if x.Action == string(policy.ActionPctDestroy) && r.Status == tasks.StatusSucceeded && x.TargetID != nil {
		if err := s.store.SetLifecycle(ctx, *x.TargetID, "destroyed"); err != nil {
			s.logger.Error("mark the destroyed container", "execution_id", x.ID, "err", err)
		}
	}
	if c := r.Created; c != nil {
		lifecycle := "provisioning"
		if r.Status == tasks.StatusSucceeded {
			lifecycle = "active"
		}
		// A leased address lets probes reach the container without the
		// node resolving its name.
		if err := s.store.RegisterContainer(ctx, c.Host, c.VMID, c.Hostname, cmp.Or(c.Address, c.IP), lifecycle); err != nil {
			s.logger.Error("add the created container to the fleet", "execution_id", x.ID, "vmid", c.VMID, "err", err)
		}
	}
}

// noteLate audits a message that arrived after the execution had moved on.
func (s *Service) noteLate(ctx context.Context, id uuid.UUID, action string, r tasks.Result) (Applied, error) {
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return Applied{}, err
	}
	err = s.store.AppendAudit(ctx, store.AuditEntry{Actor: "actuator", Action: action, ExecutionID: &id,
		Detail: map[string]any{"status": r.Status, "refusal": r.Refusal, "error": r.Error, "state": x.State}})
	return Applied{Execution: x}, err
}

// applyCheckResult writes a probe's outcome against the entity it
// observed, never the probe's own bookkeeping entity. The check must exist
// and observe that entity, and the result must be newer than the one on
// record: an older one is a replay, or too late to matter.
func (s *Service) applyCheckResult(ctx context.Context, c tasks.CheckResult) error {
	checkID, err1 := uuid.Parse(c.CheckID)
	_, err2 := uuid.Parse(c.TargetID)
	if err1 != nil || err2 != nil {
		return s.refuse(ctx, RefusedReportError{Type: tasks.TypeCheckResult, CheckID: c.CheckID, TargetID: c.TargetID, Actuator: c.Actuator,
			Reason: RefusedMalformed, Detail: "the check id or target id is not a uuid"})
	}
	records, err := s.store.ChecksByID(ctx, []uuid.UUID{checkID})
	if err != nil {
		return err
	}
	if err := s.admitCheckResult(ctx, c, records); err != nil {
		return err
	}
	return s.store.RecordCheck(ctx, store.CheckObservation{
		CheckID: c.CheckID, TargetID: c.TargetID, Health: c.Health, Detail: c.Detail, Metrics: c.Metrics, At: c.At,
	})
}

// dispatchNext dispatches the step of a plan that the success of the one
// before it approved. It was approved in the same transaction as that
// success, so a failure here, or a crash, leaves it to the reconciler.
func (s *Service) dispatchNext(ctx context.Context, planID uuid.UUID) {
	steps, err := s.store.PlanSteps(ctx, planID)
	if err != nil {
		s.logger.Warn("load the plan's next step; the reconciler will dispatch it", "plan_id", planID, "err", err)
		return
	}
	for _, st := range steps {
		if st.State != store.StateApproved {
			continue
		}
		if _, err := s.Dispatch(ctx, st.ID); err != nil {
			s.logger.Warn("dispatch the plan's next step failed; the reconciler will retry", "execution_id", st.ID, "plan_id", planID, "err", err)
		}
	}
}
