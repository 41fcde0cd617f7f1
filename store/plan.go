package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SystemActor is who the audit log names for what Nomos does on its own,
// such as moving a plan on to its next step.
const SystemActor = "nomos"

// NewPlan is a plan of several steps as the lifecycle persists it: one
// execution per step, run in order under one decision.
type NewPlan struct {
	// Hash is the plan hash over every step; the plan's approval is bound
	// to it.
	Hash string
	// RiskClass is the plan's class: its highest step's.
	RiskClass string
	// Steps are the plan's executions in order. The first one's id becomes
	// the plan's id and its State the plan's (awaiting_approval, or
	// approved with an automatic approval); the others are created waiting.
	Steps []NewExecution
}

// CreatePlan persists every step of a plan in one transaction, with their
// audit rows. auto, when set, approves the whole plan; the steps after
// the first still wait for the one before them.
func (s *Store) CreatePlan(ctx context.Context, p NewPlan, auto *Approval) ([]Execution, error) {
	if len(p.Steps) < 2 {
		return nil, fmt.Errorf("create plan: a plan of several steps needs at least two, got %d", len(p.Steps))
	}
	xs, err := s.create(ctx, &p, p.Steps, auto)
	if err != nil {
		return nil, fmt.Errorf("create plan %s: %w", p.Steps[0].ID, err)
	}
	return xs, nil
}

// PlanSteps returns every step of the plan whose id (its first step's) is
// planID, in order.
func (s *Store) PlanSteps(ctx context.Context, planID uuid.UUID) ([]Execution, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE x.plan_id = $1 ORDER BY x.plan_position`, planID)
	if err != nil {
		return nil, fmt.Errorf("steps of plan %s: %w", planID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("steps of plan %s: %w", planID, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steps of plan %s: %w", planID, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("steps of plan %s: %w", planID, ErrNotFound)
	}
	return out, nil
}

// lockPlanOf locks the plan execution id belongs to, if any, and returns
// its id. Every change of state of a plan's step takes this lock first,
// so two steps of one plan never move at once and settlePlan always sees
// the whole plan as it is.
func lockPlanOf(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*uuid.UUID, error) {
	var planID *uuid.UUID
	err := tx.QueryRow(ctx, `SELECT plan_id FROM executions WHERE id = $1`, id).Scan(&planID)
	if errors.Is(err, pgx.ErrNoRows) || planID == nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM plans WHERE id = $1 FOR UPDATE`, *planID); err != nil {
		return nil, err
	}
	return planID, nil
}

// settlePlan moves a plan's waiting steps on from what the step before
// each of them came to: after a success the next step is approved (the
// plan's approval covers it) and only that one; after a failure, a
// timeout or an unknown outcome the rest are skipped; a plan denied,
// expired or cancelled takes every waiting step with it. The caller holds
// the plan's lock.
func settlePlan(ctx context.Context, tx txQuerier, planID uuid.UUID, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT id, state, plan_position FROM executions WHERE plan_id = $1 ORDER BY plan_position`, planID)
	if err != nil {
		return err
	}
	type step struct {
		id    uuid.UUID
		state ExecutionState
		pos   int
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (step, error) {
		var st step
		err := r.Scan(&st.id, &st.state, &st.pos)
		return st, err
	})
	if err != nil {
		return err
	}
	for i := 1; i < len(steps); i++ {
		prev, cur := steps[i-1], &steps[i]
		if cur.state != StateWaiting {
			continue
		}
		to, why := nextStepState(prev.state, prev.pos)
		if to == "" {
			continue
		}
		var errText *string
		if to == StateSkipped {
			errText = &why
		}
		tag, err := tx.Exec(ctx, `UPDATE executions SET state = $2, error = coalesce($3, error), updated_at = $4
			WHERE id = $1 AND state = 'waiting'`, cur.id, to, errText, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		cur.state = to
		action := "execution." + string(to)
		if err := audit(ctx, tx, AuditEntry{Actor: SystemActor, Action: action, ExecutionID: &cur.id,
			Detail: map[string]any{"plan_id": planID, "position": cur.pos, "after_step": prev.pos, "after_state": prev.state, "reason": why}}); err != nil {
			return err
		}
		if err := notify(ctx, tx, cur.id, to); err != nil {
			return err
		}
	}
	return nil
}

// txQuerier is a transaction: a pgx.Tx, or a connection that began one.
type txQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// nextStepState is what a waiting step becomes once the step before it
// (at position pos) is in prev, with the reason; "" while it must wait.
func nextStepState(prev ExecutionState, pos int) (ExecutionState, string) {
	step := "step " + strconv.Itoa(pos)
	switch prev {
	case StateSucceeded:
		return StateApproved, step + " succeeded; the plan's approval covers this step"
	case StateFailed, StateOutcomeUnknown, StateReconciled:
		return StateSkipped, step + " did not succeed (" + string(prev) + "), so this step did not run"
	case StateSkipped:
		return StateSkipped, step + " was skipped, so this step did not run"
	case StateDenied, StateExpired, StateCancelled:
		return prev, "the plan was " + string(prev) + " at " + step
	}
	return "", ""
}

// AlreadyVotedError is returned when an operator's approval toward a quorum
// is already on record.
type AlreadyVotedError struct {
	Existing Vote
}

func (e *AlreadyVotedError) Error() string {
	return fmt.Sprintf("%s already approved at %s; another operator must approve too", e.Existing.Voter, e.Existing.VotedAt.UTC().Format(time.RFC3339))
}

// approveByQuorum records the approval that the vote v, the last one the
// quorum needed, decides: the approval row, the state, the audit entry
// naming every approver, and the plan's settlement.
func approveByQuorum(ctx context.Context, tx pgx.Tx, cur Execution, planID *uuid.UUID, v Vote, quorum int, now time.Time) error {
	id := cur.ID
	a := Approval{Decision: "approved", DecidedBy: v.Voter, Method: v.Method, EventID: v.EventID, PlanHash: v.PlanHash, DecidedAt: now}
	if err := insertApproval(ctx, tx, id, a); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE executions SET state = 'approved', updated_at = $2 WHERE id = $1`, id, now); err != nil {
		return err
	}
	voters := make([]string, 0, len(cur.Votes)+1)
	for _, old := range cur.Votes {
		voters = append(voters, old.Voter)
	}
	voters = append(voters, v.Voter)
	if err := audit(ctx, tx, AuditEntry{Actor: v.Voter, Action: "execution.approved", ExecutionID: &id,
		Detail: map[string]any{"method": v.Method, "event_id": v.EventID, "plan_hash": v.PlanHash, "quorum": quorum, "approvers": voters}}); err != nil {
		return err
	}
	if planID != nil {
		return settlePlan(ctx, tx, *planID, now)
	}
	return nil
}

// RecordVote records one operator's approval of a plan that needs quorum
// of them. The vote that reaches the quorum records the plan's approval
// (decided by that voter) and moves it to approved, in the same
// transaction; earlier votes only add themselves. A decision already on
// record returns *AlreadyDecidedError, a plan no longer awaiting approval
// *StateConflictError, and a second vote of the same operator
// *AlreadyVotedError. decided reports whether this vote approved the plan.
func (s *Store) RecordVote(ctx context.Context, id uuid.UUID, v Vote, quorum int) (x Execution, decided bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		planID, err := lockPlanOf(ctx, tx, id)
		if err != nil {
			return err
		}
		var state ExecutionState
		if err := tx.QueryRow(ctx, `SELECT state FROM executions WHERE id = $1 FOR UPDATE`, id).Scan(&state); err != nil {
			return interpretError(err)
		}
		cur, err := getExecution(ctx, tx, id)
		if err != nil {
			return err
		}
		if cur.Approval != nil {
			return &AlreadyDecidedError{Existing: *cur.Approval}
		}
		if state != StateAwaitingApproval {
			return &StateConflictError{Current: cur}
		}
		now := s.now()
		tag, err := tx.Exec(ctx, `INSERT INTO approval_votes (execution_id, voter, method, event_id, plan_hash, voted_at)
			VALUES ($1, $2, $3, nullif($4, ''), $5, $6) ON CONFLICT (execution_id, voter) DO NOTHING`,
			id, v.Voter, v.Method, v.EventID, v.PlanHash, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			for _, old := range cur.Votes {
				if old.Voter == v.Voter {
					return &AlreadyVotedError{Existing: old}
				}
			}
			return &AlreadyVotedError{Existing: v}
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM approval_votes WHERE execution_id = $1`, id).Scan(&n); err != nil {
			return err
		}
		if err := audit(ctx, tx, AuditEntry{Actor: v.Voter, Action: "execution.approval_vote", ExecutionID: &id,
			Detail: map[string]any{"method": v.Method, "event_id": v.EventID, "plan_hash": v.PlanHash, "votes": n, "quorum": quorum}}); err != nil {
			return err
		}
		if n >= quorum {
			if err := approveByQuorum(ctx, tx, cur, planID, v, quorum, now); err != nil {
				return err
			}
			decided = true
			state = StateApproved
		}
		if err := notify(ctx, tx, id, state); err != nil {
			return err
		}
		x, err = getExecution(ctx, tx, id)
		return err
	})
	if err != nil {
		var conflict *StateConflictError
		var already *AlreadyDecidedError
		var voted *AlreadyVotedError
		if errors.As(err, &conflict) || errors.As(err, &already) || errors.As(err, &voted) || errors.Is(err, ErrNotFound) {
			return Execution{}, false, err
		}
		return Execution{}, false, fmt.Errorf("record approval vote on execution %s: %w", id, err)
	}
	return x, decided, nil
}
