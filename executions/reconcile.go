package executions

import (
	"context"
	"errors"

	"github.com/nomoshq/nomos/internal/loop"
	"github.com/nomoshq/nomos/store"
)

// ReconcileReport counts what one pass of the reconciler did.
type ReconcileReport struct {
	Expired        int
	Dispatched     int
	Resent         int
	OutcomeUnknown int
}

// Reconcile repairs what a crash or a lost Redis left behind:
//   - plans past their approval window expire;
//   - approved executions that were never dispatched are dispatched;
//   - dispatched orders with no acknowledgment are sent again (the task id
//     and the actuator's journal keep that from running anything twice);
//   - an order that could have run but went silent, or was never
//     acknowledged before it expired, becomes outcome_unknown. It is never
//     re-run on its own: an operator decides what really happened.
func (s *Service) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	now := s.now()
	var errs []error

	pending, err := s.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}, Limit: 1000})
	if err != nil {
		return rep, err
	}
	for _, x := range pending {
		if now.Before(x.ExpiresAt) {
			continue
		}
		if _, err := s.expire(ctx, x.ID); err == nil {
			rep.Expired++
		} else if !isConflict(err) {
			errs = append(errs, err)
		}
	}

	approved, err := s.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateApproved}, Limit: 1000})
	if err != nil {
		return rep, err
	}
	for _, x := range approved {
		if _, err := s.Dispatch(ctx, x.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Dispatched++
	}

	dispatched, err := s.store.ListExecutions(ctx, store.ExecutionFilter{
		States: []store.ExecutionState{store.StateDispatched}, UpdatedBefore: now.Add(-s.cfg.AckTimeout), Limit: 1000})
	if err != nil {
		return rep, err
	}
	for _, x := range dispatched {
		if now.Sub(x.UpdatedAt) > s.cfg.OrderTTL+s.cfg.AckTimeout {
			// Every order sent for it has expired unacknowledged. The
			// actuator may still have started one and lost its report.
			if s.markUnknown(ctx, x, "the actuator never acknowledged the order before it expired; it may or may not have run") {
				rep.OutcomeUnknown++
			}
			continue
		}
		if err := s.send(ctx, x); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Resent++
	}

	running, err := s.store.ListExecutions(ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateRunning}, Limit: 1000})
	if err != nil {
		return rep, err
	}
	for _, x := range running {
		if x.HeartbeatAt != nil && now.Sub(*x.HeartbeatAt) <= s.cfg.HeartbeatTimeout {
			continue
		}
		if s.markUnknown(ctx, x, "the actuator stopped reporting while the step ran") {
			rep.OutcomeUnknown++
		}
	}
	if rep != (ReconcileReport{}) {
		s.logger.Info("reconciled executions", "expired", rep.Expired, "dispatched", rep.Dispatched,
			"resent", rep.Resent, "outcome_unknown", rep.OutcomeUnknown)
	}
	return rep, errors.Join(errs...)
}

func (s *Service) markUnknown(ctx context.Context, x store.Execution, why string) bool {
	ended, err := s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{x.State}, To: store.StateOutcomeUnknown, Error: &why,
		Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.outcome_unknown", Detail: map[string]any{"reason": why}},
	})
	if err != nil && !isConflict(err) {
		s.logger.Error("mark outcome_unknown", "execution_id", x.ID, "err", err)
	}
	if err == nil {
		s.observeEnd(ended)
	}
	return err == nil
}

func isConflict(err error) bool {
	var c *store.StateConflictError
	return errors.As(err, &c)
}

// RunReconciler reconciles at once and then every ReconcileInterval until
// ctx ends.
func (s *Service) RunReconciler(ctx context.Context) {
	loop.Every(ctx, s.cfg.ReconcileInterval, func(ctx context.Context) {
		if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.logger.Error("reconcile", "err", err)
		}
	})
}
