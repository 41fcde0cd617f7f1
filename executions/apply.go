package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Applied says what a progress or result message did.
type Applied struct {
	Execution store.Execution
	// Changed is false when the message was late or repeated and moved
	// nothing.
	Changed bool
}

// ApplyProgress records the actuator's progress. The first progress of a
// dispatched execution is its acknowledgment and moves it to running.
// Progress for a terminal execution changes nothing.
//
// An execution may still read "approved" here: the order is enqueued
// before the dispatch is recorded, and a quick actuator can report back in
// between. Only a signed order the bot sent can be running, so that
// counts as dispatched.
func (s *Service) ApplyProgress(ctx context.Context, p tasks.Progress) (Applied, error) {
	id, err := uuid.Parse(p.ExecutionID)
	if err != nil {
		return Applied{}, fmt.Errorf("progress: bad execution id %q", p.ExecutionID)
	}
	tail := p.Tail
	x, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateApproved, store.StateDispatched}, To: store.StateRunning,
		ProgressTail: &tail, Heartbeat: true,
		Audit: store.AuditEntry{Actor: "actuator", Action: "execution.running"},
	})
	if err == nil {
		return Applied{Execution: x, Changed: true}, nil
	}
	var conflict *store.ErrStateConflict
	if !errors.As(err, &conflict) {
		return Applied{}, err
	}
	if conflict.Current.State != store.StateRunning {
		return Applied{Execution: conflict.Current}, nil
	}
	x, err = s.store.UpdateProgress(ctx, id, tail)
	if errors.As(err, &conflict) {
		return Applied{Execution: conflict.Current}, nil
	}
	if err != nil {
		return Applied{}, err
	}
	return Applied{Execution: x, Changed: true}, nil
}

// inFlight are the states a result can end: approved too, for the reason
// ApplyProgress gives.
var inFlight = []store.ExecutionState{store.StateApproved, store.StateDispatched, store.StateRunning}

// ApplyResult records the actuator's final word. A result for a terminal
// execution changes nothing and is kept only in the audit log. A refused
// replay never moves the execution: the first delivery's result stands.
func (s *Service) ApplyResult(ctx context.Context, r tasks.Result) (Applied, error) {
	id, err := uuid.Parse(r.ExecutionID)
	if err != nil {
		return Applied{}, fmt.Errorf("result: bad execution id %q", r.ExecutionID)
	}
	raw, err := json.Marshal(r)
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
			return s.noteLate(ctx, id, "execution.replay_refused", r)
		}
		to = store.StateFailed
		errText = "the actuator refused the order (" + string(r.Refusal) + "): " + r.Error
	default:
		return Applied{}, fmt.Errorf("result for %s: unknown status %q", id, r.Status)
	}
	// The fleet changes the step made are recorded before its new state,
	// so whoever hears of the state (a continuation asking for the next
	// step on the new container) already sees them. Both are idempotent,
	// so a result delivered twice changes nothing more.
	if cur, err := s.store.GetExecution(ctx, id); err == nil && slices.Contains(inFlight, cur.State) {
		s.applyFleetChanges(ctx, cur, r)
	}
	tail := r.Output
	x, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: inFlight, To: to,
		Result: raw, Error: &errText, ProgressTail: &tail,
		Audit: store.AuditEntry{Actor: "actuator", Action: "execution." + string(to),
			Detail: map[string]any{"exit_code": r.ExitCode, "error": errText, "failed_phase": r.FailedPhase, "snapshot": r.Snapshot}},
	})
	var conflict *store.ErrStateConflict
	if errors.As(err, &conflict) {
		return s.noteLate(ctx, id, "execution.late_result", r)
	}
	if err != nil {
		return Applied{}, err
	}
	s.logger.Info("execution finished", "execution_id", id, "state", to)
	return Applied{Execution: x, Changed: true}, nil
}

// applyFleetChanges records what a finished step did to the fleet: a
// destroyed container, or one it created (active when provisioning went
// through, provisioning when a later phase failed).
func (s *Service) applyFleetChanges(ctx context.Context, x store.Execution, r tasks.Result) {
	if x.Action == "pct_destroy" && r.Status == tasks.StatusSucceeded && x.TargetID != nil {
		if err := s.store.SetLifecycle(ctx, *x.TargetID, "destroyed"); err != nil {
			s.logger.Error("mark the destroyed container", "execution_id", x.ID, "err", err)
		}
	}
	if c := r.Created; c != nil {
		lifecycle := "provisioning"
		if r.Status == tasks.StatusSucceeded {
			lifecycle = "active"
		}
		if err := s.store.RegisterContainer(ctx, c.Host, c.VMID, c.Hostname, c.IP, lifecycle); err != nil {
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
