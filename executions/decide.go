package executions

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Approve records an approval and dispatches the plan (of a plan of
// several steps, its first step). The approval binds to the plan hash
// persisted with the request: for several steps, the hash over all of
// them. It is refused, with an audit row, when the approver is not an
// operator, asked for the plan themselves while self-approval is off, the
// method is not enough for the plan's class or is policy.MethodAuto (only
// Request approves a plan automatically, when it is made), or a
// destructive plan's phrase does not match; an expired plan is moved to
// expired; a plan already decided returns *AlreadyDecidedError naming who
// decided and when. A destructive plan that needs the phrase from more
// operators than have given it records this one and returns
// *QuorumPendingError.
func (s *Service) Approve(ctx context.Context, d Decision) (store.Execution, error) {
	x, err := s.checkDecision(ctx, d, policy.Approve)
	if err != nil {
		return x, err
	}
	if x.GateClass() == policy.Destructive.String() && s.cfg.DestructiveQuorum > 1 {
		return s.vote(ctx, x, d)
	}
	x, err = s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateApproved,
		Decision: &store.Approval{Decision: "approved", DecidedBy: d.By, Method: string(d.Method), EventID: d.EventID, PlanHash: x.DecisionHash(), DecidedAt: s.now()},
		Audit:    store.AuditEntry{Actor: d.By, Action: "execution.approved", Detail: map[string]any{"method": d.Method, "event_id": d.EventID, "plan_hash": x.DecisionHash()}},
	})
	if err != nil {
		return x, s.decisionConflict(ctx, d, err)
	}
	s.observeDecision(x)
	s.logger.Info("execution approved", "execution_id", x.ID, "by", d.By, "method", d.Method)
	return s.dispatchApproved(ctx, x), nil
}

// vote records one operator's phrase toward the destructive quorum.
func (s *Service) vote(ctx context.Context, x store.Execution, d Decision) (store.Execution, error) {
	quorum := s.cfg.DestructiveQuorum
	got, decided, err := s.store.RecordVote(ctx, x.ID, store.Vote{Voter: d.By, Method: string(d.Method), EventID: d.EventID, PlanHash: x.DecisionHash()}, quorum)
	var voted *store.AlreadyVotedError
	if errors.As(err, &voted) {
		err = fmt.Errorf("%w: %s already approved this plan, and it needs the phrase from %d different operators", ErrSameApprover, d.By, quorum)
		s.auditRefusal(ctx, x.ID, d.By, policy.Approve.String(), err)
		return x, err
	}
	if err != nil {
		return x, s.decisionConflict(ctx, d, err)
	}
	if !decided {
		s.logger.Info("approval recorded toward the quorum", "execution_id", x.ID, "by", d.By, "votes", len(got.Votes), "quorum", quorum)
		return got, &QuorumPendingError{Votes: len(got.Votes), Quorum: quorum}
	}
	s.logger.Info("execution approved by quorum", "execution_id", x.ID, "by", d.By, "quorum", quorum)
	return s.dispatchApproved(ctx, got), nil
}

// dispatchApproved dispatches an execution just approved; a failure is
// left to the reconciler.
func (s *Service) dispatchApproved(ctx context.Context, x store.Execution) store.Execution {
	dispatched, err := s.dispatch(ctx, x)
	if err != nil {
		s.logger.Warn("dispatch failed; the reconciler will retry", "execution_id", x.ID, "err", err)
		return x
	}
	return dispatched
}

// Deny records a refusal. Any operator method counts.
func (s *Service) Deny(ctx context.Context, d Decision) (store.Execution, error) {
	x, err := s.checkDecision(ctx, d, policy.Deny)
	if err != nil {
		return x, err
	}
	x, err = s.store.Transition(ctx, store.Transition{
		ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateDenied,
		Decision: &store.Approval{Decision: "denied", DecidedBy: d.By, Method: string(d.Method), EventID: d.EventID, PlanHash: x.DecisionHash(), DecidedAt: s.now()},
		Audit:    store.AuditEntry{Actor: d.By, Action: "execution.denied", Detail: map[string]any{"method": d.Method, "event_id": d.EventID}},
	})
	if err != nil {
		return x, s.decisionConflict(ctx, d, err)
	}
	s.observeDecision(x)
	return x, nil
}

// Cancel withdraws what has not been dispatched of a plan. Only an
// operator may cancel. Of a plan of several steps, every step not yet
// sent to the actuator is cancelled, even when an earlier one already
// ran; the first of the plan's steps is returned.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID, by string) (store.Execution, error) {
	if !s.cfg.Rules.IsOperator(by) {
		s.auditRefusal(ctx, id, by, "cancel", policy.ErrNotOperator)
		return store.Execution{}, fmt.Errorf("%w: %s", policy.ErrNotOperator, by)
	}
	cancellable := []store.ExecutionState{store.StateAwaitingApproval, store.StateApproved, store.StateWaiting}
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return x, err
	}
	if x.PlanID != nil {
		steps, err := s.store.PlanSteps(ctx, *x.PlanID)
		if err != nil {
			return x, err
		}
		// Cancelling the first step not yet sent takes the rest with it.
		id = uuid.Nil
		for _, st := range steps {
			if slices.Contains(cancellable, st.State) {
				id = st.ID
				break
			}
		}
		if id == uuid.Nil {
			return steps[0], fmt.Errorf("%w: every step has gone out or ended", ErrNotPending)
		}
	}
	cancelled, err := s.store.Transition(ctx, store.Transition{
		ID: id, From: cancellable, To: store.StateCancelled,
		Audit: store.AuditEntry{Actor: by, Action: "execution.cancelled"},
	})
	if err != nil {
		return cancelled, s.decisionConflict(ctx, Decision{ExecutionID: id, By: by}, err)
	}
	if cancelled.PlanID != nil {
		return s.store.GetExecution(ctx, *cancelled.PlanID)
	}
	return cancelled, nil
}

// checkDecision loads the execution and applies every rule that does not
// need the compare-and-set. Every refusal is audited with its reason.
func (s *Service) checkDecision(ctx context.Context, d Decision, kind policy.Decision) (store.Execution, error) {
	x, err := s.store.GetExecution(ctx, d.ExecutionID)
	if err != nil {
		return store.Execution{}, err
	}
	class, err := policy.ParseClass(x.GateClass())
	if err != nil {
		return x, err
	}
	refuse := func(err error) (store.Execution, error) {
		s.auditRefusal(ctx, x.ID, d.By, kind.String(), err)
		return x, err
	}
	if err := s.cfg.Rules.Authorize(kind, class, d.By, d.Method); err != nil {
		return refuse(err)
	}
	if x.Approval != nil {
		return refuse(&store.AlreadyDecidedError{Existing: *x.Approval})
	}
	if x.State != store.StateAwaitingApproval {
		return refuse(fmt.Errorf("%w: it is %s", ErrNotPending, x.State))
	}
	if !s.now().Before(x.ExpiresAt) {
		expired, err := s.expire(ctx, x.ID)
		if err != nil {
			return x, s.decisionConflict(ctx, d, err)
		}
		err = fmt.Errorf("%w: it expired at %s", ErrExpired, x.ExpiresAt.UTC().Format("15:04 MST"))
		s.auditRefusal(ctx, x.ID, d.By, kind.String(), err)
		return expired, err
	}
	if kind == policy.Approve && s.cfg.ForbidSelfApproval && (d.By == x.RequestedBy || d.By == x.OnBehalfOf) {
		return refuse(fmt.Errorf("%w: %s asked for this plan, so another operator must approve it", ErrSelfApproval, d.By))
	}
	if kind == policy.Approve && d.Method == policy.MethodPhrase {
		want, err := s.phrase(ctx, x)
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

// phrase is the typed phrase that approves x, a destructive plan.
func (s *Service) phrase(ctx context.Context, x store.Execution) (string, error) {
	if x.PlanID == nil || x.Plan == nil {
		return policy.ConfirmationPhrase(policy.Action(x.Action), x.TargetSlug, phraseKey(x.ID, x.PlanHash))
	}
	steps, err := s.store.PlanSteps(ctx, *x.PlanID)
	if err != nil {
		return "", err
	}
	refs := make([]stepRef, len(steps))
	for i, st := range steps {
		class, _ := policy.ParseClass(st.RiskClass)
		refs[i] = stepRef{action: policy.Action(st.Action), slug: st.TargetSlug, class: class}
	}
	return planPhrase(*x.PlanID, x.Plan.Hash, refs)
}

// decisionConflict turns a lost compare-and-set into the error a front end
// shows: who decided first, or what state the plan is in now. The refusal
// is audited.
func (s *Service) decisionConflict(ctx context.Context, d Decision, err error) error {
	var conflict *store.StateConflictError
	var decided *store.AlreadyDecidedError
	switch {
	case errors.As(err, &decided):
	case errors.As(err, &conflict):
		cur := conflict.Current
		switch {
		case cur.Approval != nil:
			err = &store.AlreadyDecidedError{Existing: *cur.Approval}
		case cur.State == store.StateExpired:
			err = fmt.Errorf("%w: it expired at %s", ErrExpired, cur.ExpiresAt.UTC().Format("15:04 MST"))
		default:
			err = fmt.Errorf("%w: it is %s", ErrNotPending, cur.State)
		}
	default:
		return err
	}
	if d.By != "" {
		s.auditRefusal(ctx, d.ExecutionID, d.By, "decision", err)
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
	var conflict *store.StateConflictError
	if errors.As(err, &conflict) {
		return conflict.Current, fmt.Errorf("%w: it is %s", ErrNotOutcomeUnknown, conflict.Current.State)
	}
	return x, err
}
