package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// Dispatch signs an approved execution's order and enqueues it for the
// actuator, then marks it dispatched. The task id is the execution id, so
// a second enqueue while the first is retained is a no-op; if Redis lost
// the first, the second delivers it, and the actuator's journal makes sure
// it still runs at most once.
func (s *Service) Dispatch(ctx context.Context, id uuid.UUID) (store.Execution, error) {
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return x, err
	}
	return s.dispatch(ctx, x)
}

// dispatch is Dispatch of x as just read: the transition that approved it
// returns the row, and a read more would cost a round trip per approval.
func (s *Service) dispatch(ctx context.Context, x store.Execution) (store.Execution, error) {
	id := x.ID
	if x.State != store.StateApproved && x.State != store.StateDispatched {
		return x, fmt.Errorf("dispatch execution %s: %w: it is %s", id, ErrNotPending, x.State)
	}
	if err := s.send(ctx, x); err != nil {
		if errors.Is(err, ErrTargetChanged) {
			msg := "the target changed after approval; request the plan again"
			failed, terr := s.store.Transition(ctx, store.Transition{
				ID: id, From: []store.ExecutionState{store.StateApproved, store.StateDispatched}, To: store.StateFailed,
				Error: &msg, Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.failed", Detail: map[string]any{"error": msg}},
			})
			if terr == nil {
				s.observeEnd(failed)
				return failed, err
			}
		}
		return x, err
	}
	if x.State == store.StateDispatched {
		return x, nil
	}
	x, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateApproved}, To: store.StateDispatched,
		Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.dispatched"},
	})
	var conflict *store.StateConflictError
	if errors.As(err, &conflict) {
		// Someone else dispatched it meanwhile; the order is queued once.
		return conflict.Current, nil
	}
	return x, err
}

// send signs and enqueues the order for x. The plan is recomputed from the
// current target first: if it no longer hashes to what was approved, the
// approval does not cover it and nothing is sent.
func (s *Service) send(ctx context.Context, x store.Execution) error {
	if x.TargetID == nil {
		return fmt.Errorf("dispatch execution %s: %w: the target no longer exists", x.ID, ErrTargetChanged)
	}
	entity, err := s.store.EntityByID(ctx, *x.TargetID)
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
	}
	g, err := s.loadNeighbourhood(ctx, entity)
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
	}
	params, err := policy.ParseParams(policy.Action(x.Action), x.Params)
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
	}
	class, _ := policy.ParseClass(x.RiskClass)
	plan, err := policy.NewPlan(params, g.planTarget(entity, params, class))
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w: %v", x.ID, ErrTargetChanged, err)
	}
	hash, err := policy.PlanHash(plan)
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
	}
	if hash != x.PlanHash || x.Approval == nil || x.Approval.Decision != "approved" || x.Approval.PlanHash != x.DecisionHash() {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, ErrTargetChanged)
	}
	if x.PlanID != nil {
		if err := s.checkTurn(ctx, x); err != nil {
			return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
		}
	}
	// Every order sent for one execution shares the deadline of the first
	// dispatch, so once the reconciler gives up on it, no copy can still run.
	now := s.now()
	deadline := now.Add(s.cfg.OrderTTL)
	if x.State == store.StateDispatched {
		deadline = x.UpdatedAt.Add(s.cfg.OrderTTL)
	}
	if !now.Before(deadline) {
		return fmt.Errorf("dispatch execution %s: its order deadline has passed", x.ID)
	}
	order := tasks.Order{
		ExecutionID: x.ID.String(), Actuator: s.cfg.Actuator, Site: g.site(entity), Action: x.Action, Target: g.orderTarget(entity),
		Params: x.Params, Steps: x.Steps, RiskClass: x.RiskClass, PlanHash: x.PlanHash,
		IssuedAt: now, ExpiresAt: deadline,
		SnapshotKeep: s.cfg.SnapshotKeep, LockWait: tasks.Duration(s.cfg.LockWait),
	}
	order.Target.SnapshotBlocker = plan.Target.SnapshotBlocker
	if order.Target.HostAddr == "" {
		return fmt.Errorf("dispatch execution %s: host %s has no ssh address in the fleet data", x.ID, order.Target.Host)
	}
	envelope, err := tasks.SignOrder(s.cfg.SigningKey, order)
	if err != nil {
		return fmt.Errorf("dispatch execution %s: %w", x.ID, err)
	}
	_, err = s.cfg.Queue.EnqueueContext(ctx, tasks.NewRunTask(order.Site, x.ID.String(), envelope))
	if errors.Is(err, asynq.ErrTaskIDConflict) && s.reviveArchived(order.Site, x.ID.String()) {
		_, err = s.cfg.Queue.EnqueueContext(ctx, tasks.NewRunTask(order.Site, x.ID.String(), envelope))
	}
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("dispatch execution %s: enqueue: %w", x.ID, err)
	}
	return nil
}

// reviveArchived deletes the order with task id id when asynq archived
// it, and reports whether it did. An order is archived when the actuator
// that took it died before it finished (orders are never retried by
// asynq), and its id then blocks every resend. Sending it again is safe:
// if that actuator had begun it, its journal refuses the copy and reports
// outcome_unknown; if not, the order runs now rather than never.
func (s *Service) reviveArchived(site, id string) bool {
	if s.cfg.Inspector == nil {
		return false
	}
	queue := tasks.OrderQueue(site)
	info, err := s.cfg.Inspector.GetTaskInfo(queue, id)
	if err != nil || info.State != asynq.TaskStateArchived {
		return false
	}
	if err := s.cfg.Inspector.DeleteTask(queue, id); err != nil {
		s.logger.Warn("delete an archived order to send it again", "execution_id", id, "err", err)
		return false
	}
	s.logger.Info("an order the actuator took and never finished is sent again", "execution_id", id)
	return true
}

// checkTurn checks that a step of a plan of several may go out: the
// plan's approval covers exactly the steps on record (their hashes hash to
// the approved plan hash), and every step before it has succeeded.
func (s *Service) checkTurn(ctx context.Context, x store.Execution) error {
	steps, err := s.store.PlanSteps(ctx, *x.PlanID)
	if err != nil {
		return err
	}
	hashes := make([]string, len(steps))
	for i, st := range steps {
		hashes[i] = st.PlanHash
		if st.Position < x.Position && st.State != store.StateSucceeded {
			return fmt.Errorf("step %d is %s, and step %d runs only after it succeeded", st.Position, st.State, x.Position)
		}
	}
	whole, err := policy.StepsHash(hashes)
	if err != nil || x.Plan == nil || whole != x.Plan.Hash {
		return fmt.Errorf("%w: the plan's steps no longer hash to the approved plan", ErrTargetChanged)
	}
	return nil
}
