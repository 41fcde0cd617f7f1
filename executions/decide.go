package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// Decision is an operator's answer to a plan.
type Decision struct {
	ExecutionID uuid.UUID
	// By is the Matrix user who decided.
	By string
	// Method is how: reaction, reply or phrase.
	Method policy.Method
	// EventID is the Matrix event that carried the decision, for the audit.
	EventID string
	// Phrase is the typed text, for the phrase method.
	Phrase string
}

// Approve records an approval and dispatches the plan. The approval binds
// to the plan hash persisted with the request. It is refused, with an audit
// row, when the approver is not an operator, the method is not enough for
// the plan's class or is policy.MethodAuto (only Request approves a plan
// automatically, when it is made), or a destructive plan's phrase does not
// match; an
// expired plan is moved to expired; a plan already decided returns
// *AlreadyDecidedError naming who decided and when.
func (s *Service) Approve(ctx context.Context, d Decision) (store.Execution, error) {
	x, err := s.checkDecision(ctx, d, policy.Approve)
	if err != nil {
		return x, err
	}
	x, err = s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateApproved,
		Decision: &store.Approval{Decision: "approved", DecidedBy: d.By, Method: string(d.Method), EventID: d.EventID, PlanHash: x.PlanHash, DecidedAt: s.now()},
		Audit:    store.AuditEntry{Actor: d.By, Action: "execution.approved", Detail: map[string]any{"method": d.Method, "event_id": d.EventID, "plan_hash": x.PlanHash}},
	})
	if err != nil {
		return x, s.decisionConflict(err)
	}
	s.observeDecision(x)
	s.logger.Info("execution approved", "execution_id", x.ID, "by", d.By, "method", d.Method)
	dispatched, err := s.Dispatch(ctx, x.ID)
	if err != nil {
		s.logger.Warn("dispatch failed; the reconciler will retry", "execution_id", x.ID, "err", err)
		return x, nil
	}
	return dispatched, nil
}

// Deny records a refusal. Any operator method counts.
func (s *Service) Deny(ctx context.Context, d Decision) (store.Execution, error) {
	x, err := s.checkDecision(ctx, d, policy.Deny)
	if err != nil {
		return x, err
	}
	x, err = s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateDenied,
		Decision: &store.Approval{Decision: "denied", DecidedBy: d.By, Method: string(d.Method), EventID: d.EventID, PlanHash: x.PlanHash, DecidedAt: s.now()},
		Audit:    store.AuditEntry{Actor: d.By, Action: "execution.denied", Detail: map[string]any{"method": d.Method, "event_id": d.EventID}},
	})
	if err != nil {
		return x, s.decisionConflict(err)
	}
	s.observeDecision(x)
	return x, nil
}

// Cancel withdraws a plan that has not been dispatched. Only an operator
// may cancel.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID, by string) (store.Execution, error) {
	if !s.cfg.Rules.IsOperator(by) {
		s.auditRefusal(ctx, id, by, "cancel", policy.ErrNotOperator)
		return store.Execution{}, fmt.Errorf("%w: %s", policy.ErrNotOperator, by)
	}
	x, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateAwaitingApproval, store.StateApproved}, To: store.StateCancelled,
		Audit: store.AuditEntry{Actor: by, Action: "execution.cancelled"},
	})
	if err != nil {
		return x, s.decisionConflict(err)
	}
	return x, nil
}

// checkDecision loads the execution and applies every rule that does not
// need the compare-and-set.
func (s *Service) checkDecision(ctx context.Context, d Decision, kind policy.Decision) (store.Execution, error) {
	x, err := s.store.GetExecution(ctx, d.ExecutionID)
	if err != nil {
		return store.Execution{}, err
	}
	class, err := policy.ParseClass(x.RiskClass)
	if err != nil {
		return x, err
	}
	if err := s.cfg.Rules.Authorize(kind, class, d.By, d.Method); err != nil {
		s.auditRefusal(ctx, x.ID, d.By, kind.String(), err)
		return x, err
	}
	if x.Approval != nil {
		return x, &store.ErrAlreadyDecided{Existing: *x.Approval}
	}
	if x.State != store.StateAwaitingApproval {
		return x, fmt.Errorf("%w: it is %s", ErrNotPending, x.State)
	}
	if !s.now().Before(x.ExpiresAt) {
		expired, err := s.expire(ctx, x.ID)
		if err != nil {
			return x, s.decisionConflict(err)
		}
		return expired, fmt.Errorf("%w: it expired at %s", ErrExpired, x.ExpiresAt.UTC().Format("15:04 MST"))
	}
	if kind == policy.Approve && d.Method == policy.MethodPhrase {
		want, err := policy.ConfirmationPhrase(policy.Action(x.Action), x.TargetSlug, phraseKey(x.ID, x.PlanHash))
		if err != nil {
			return x, err
		}
		if !policy.MatchPhrase(d.Phrase, want) {
			s.auditRefusal(ctx, x.ID, d.By, kind.String(), ErrPhraseMismatch)
			return x, fmt.Errorf("%w: type exactly %q", ErrPhraseMismatch, want)
		}
	}
	return x, nil
}

// decisionConflict turns a lost compare-and-set into the error a front end
// shows: who decided first, or what state the plan is in now.
func (s *Service) decisionConflict(err error) error {
	var conflict *store.ErrStateConflict
	if errors.As(err, &conflict) {
		cur := conflict.Current
		if cur.Approval != nil {
			return &store.ErrAlreadyDecided{Existing: *cur.Approval}
		}
		if cur.State == store.StateExpired {
			return fmt.Errorf("%w: it expired at %s", ErrExpired, cur.ExpiresAt.UTC().Format("15:04 MST"))
		}
		return fmt.Errorf("%w: it is %s", ErrNotPending, cur.State)
	}
	return err
}

func (s *Service) expire(ctx context.Context, id uuid.UUID) (store.Execution, error) {
	return s.store.Transition(ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateExpired,
		Audit: store.AuditEntry{Actor: s.cfg.Actor, Action: "execution.expired"},
	})
}

// auditRefusal records a decision that was not allowed, so an attempt by
// someone who may not approve leaves a trace.
func (s *Service) auditRefusal(ctx context.Context, id uuid.UUID, by, what string, cause error) {
	err := s.store.AppendAudit(ctx, store.AuditEntry{
		Actor: by, Action: "execution.decision_refused", ExecutionID: &id,
		Detail: map[string]any{"decision": what, "reason": cause.Error()},
	})
	if err != nil {
		s.logger.Error("audit refused decision", "execution_id", id, "err", err)
	}
}

// Reconciled records what really happened to an outcome_unknown execution,
// as an operator established it.
func (s *Service) Reconciled(ctx context.Context, id uuid.UUID, by, note string) (store.Execution, error) {
	if !s.cfg.Rules.IsOperator(by) {
		s.auditRefusal(ctx, id, by, "reconcile", policy.ErrNotOperator)
		return store.Execution{}, fmt.Errorf("%w: %s", policy.ErrNotOperator, by)
	}
	x, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: []store.ExecutionState{store.StateOutcomeUnknown}, To: store.StateReconciled,
		Audit: store.AuditEntry{Actor: by, Action: "execution.reconciled", Detail: map[string]any{"note": note}},
	})
	var conflict *store.ErrStateConflict
	if errors.As(err, &conflict) {
		return conflict.Current, fmt.Errorf("%w: it is %s", ErrNotOutcomeUnknown, conflict.Current.State)
	}
	return x, err
}
