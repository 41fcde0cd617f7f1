package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// answerApproval answers an actuator that asks, just before it would
// begin an order, whether the execution is still approved. It says yes
// only for an execution approved for the order's plan hash and not yet
// begun. An approved execution is recorded as dispatched before the yes
// goes out, so a withdrawal either comes first and the actuator is told
// no, or comes after and is told it is too late: never both.
func (s *Service) answerApproval(ctx context.Context, q tasks.ApprovalCheck) (Applied, error) {
	x, approved, err := s.stillApproved(ctx, q)
	if err != nil {
		return Applied{}, err
	}
	ans := tasks.ApprovalAnswer{ExecutionID: q.ExecutionID, Actuator: q.Actuator, PlanHash: q.PlanHash, Nonce: q.Nonce,
		Approved: approved, State: string(x.State), At: s.now()}
	if ans.State == "" {
		ans.State = "unknown"
	}
	task, err := tasks.NewApprovalAnswerTask(s.cfg.SigningKey, q.Site, ans)
	if err != nil {
		return Applied{}, err
	}
	if _, err := s.cfg.Queue.EnqueueContext(ctx, task); err != nil {
		return Applied{}, fmt.Errorf("answer the approval check of %s: %w", q.ExecutionID, err)
	}
	if !approved {
		s.logger.Warn("told the actuator an order is not approved", "execution_id", q.ExecutionID, "state", ans.State)
		if x.ID != uuid.Nil {
			if err := s.store.AppendAudit(ctx, store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.not_approved_answered", ExecutionID: &x.ID,
				Detail: map[string]any{"state": x.State, "plan_hash": q.PlanHash, "actuator": q.Actuator}}); err != nil {
				s.logger.Error("audit an approval check answered no", "execution_id", x.ID, "err", err)
			}
		}
		return Applied{}, nil
	}
	return Applied{Execution: x, Changed: true}, nil
}

// stillApproved reports whether the execution q names may begin now, and
// records an approved one as dispatched first.
func (s *Service) stillApproved(ctx context.Context, q tasks.ApprovalCheck) (store.Execution, bool, error) {
	id, err := uuid.Parse(q.ExecutionID)
	if err != nil {
		return store.Execution{}, false, nil
	}
	x, err := s.store.GetExecution(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Execution{}, false, nil
	}
	if err != nil {
		return x, false, err
	}
	if x.PlanHash != q.PlanHash || x.Approval == nil || x.Approval.Decision != "approved" || x.Approval.PlanHash != x.DecisionHash() {
		return x, false, nil
	}
	switch x.State {
	case store.StateDispatched:
		return x, true, nil
	case store.StateApproved:
		got, err := s.store.Transition(ctx, store.Transition{
			ID: id, From: []store.ExecutionState{store.StateApproved}, To: store.StateDispatched,
			Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.dispatched"},
		})
		var conflict *store.ErrStateConflict
		if errors.As(err, &conflict) {
			// Dispatch recorded it meanwhile, or a withdrawal cancelled it.
			return conflict.Current, conflict.Current.State == store.StateDispatched, nil
		}
		if err != nil {
			return x, false, err
		}
		return got, true, nil
	}
	return x, false, nil
}
