package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ExecutionState is a state of the execution state machine that
// docs/architecture.md describes.
type ExecutionState string

const (
	StateAwaitingApproval ExecutionState = "awaiting_approval"
	StateApproved         ExecutionState = "approved"
	StateDispatched       ExecutionState = "dispatched"
	StateRunning          ExecutionState = "running"
	StateSucceeded        ExecutionState = "succeeded"
	StateFailed           ExecutionState = "failed"
	StateOutcomeUnknown   ExecutionState = "outcome_unknown"
	StateReconciled       ExecutionState = "reconciled"
	StateDenied           ExecutionState = "denied"
	StateExpired          ExecutionState = "expired"
	StateCancelled        ExecutionState = "cancelled"
	// StateWaiting is a later step of a plan: it runs once the step before
	// it has succeeded, under the plan's one approval.
	StateWaiting ExecutionState = "waiting"
	// StateSkipped is a later step of a plan that never ran because a step
	// before it failed, timed out or ended outcome_unknown.
	StateSkipped ExecutionState = "skipped"
)

// Terminal reports whether no automatic transition leaves the state.
// outcome_unknown is terminal for automation; only an operator moves it on.
func (s ExecutionState) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateOutcomeUnknown, StateReconciled, StateDenied, StateExpired, StateCancelled, StateSkipped:
		return true
	}
	return false
}

// Request is what a plan asks for: the fields an execution is created with
// (NewExecution) and carries from then on (Execution), State moving as it
// goes.
type Request struct {
	ID           uuid.UUID
	Action       string
	TargetID     *uuid.UUID
	TargetSlug   string
	Params       json.RawMessage
	Steps        []string
	RiskClass    string
	PlanHash     string
	PlanCode     string
	State        ExecutionState
	RequestedBy  string
	RequestedVia string
	// Reason is why an agent or MCP client asked; empty for a chat command.
	Reason    string
	RoomID    string
	ExpiresAt time.Time
	// OnBehalfOf is the operator an agent acted for (RequestedBy is then
	// the agent); empty otherwise.
	OnBehalfOf string
	// RequestKey identifies the change asked for (action, target and
	// parameters), on a plan's first step only; empty for none. While a
	// plan with a key waits for a decision, no other plan with that key
	// can be created (see ErrAlreadyWaiting).
	RequestKey string
}

// Execution is one gated action and where it stands.
type Execution struct {
	Request
	CardEventID  string
	Result       json.RawMessage
	Error        string
	ProgressTail string
	// ProgressSeq is the number of the last progress report applied.
	ProgressSeq int64
	HeartbeatAt *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Approval is the decision taken on the execution, if any. A step of a
	// plan of several carries its plan's one decision.
	Approval *Approval
	// PlanID links the steps of a plan of several steps: it is the id of
	// the plan's first step, which carries the card and the decision. Nil
	// for a plan of one step.
	PlanID *uuid.UUID
	// Position is the step's place in its plan, from 1; 0 for a plan of
	// one step.
	Position int
	// Plan describes the plan of several steps the execution belongs to;
	// nil for a plan of one step.
	Plan *PlanInfo
	// Votes are the approvals given so far toward a quorum, oldest first.
	Votes []Vote
}

// PlanInfo is what a step knows of the plan of several steps it is part of.
type PlanInfo struct {
	// Hash is the plan hash over every step (policy.StepsHash); the
	// plan's approval is bound to it.
	Hash string
	// RiskClass is the plan's class: its highest step's.
	RiskClass string
	// Steps is how many steps the plan has.
	Steps int
}

// Head is the id of the execution that carries the plan's card and
// decision: the first step of a plan of several, or x itself.
func (x Execution) Head() uuid.UUID {
	if x.PlanID != nil {
		return *x.PlanID
	}
	return x.ID
}

// IsFollower reports whether x is a later step of a plan: it has no card
// and no decision of its own.
func (x Execution) IsFollower() bool { return x.PlanID != nil && *x.PlanID != x.ID }

// GateClass is the risk class an operator decides on: the plan's, which
// is its highest step's, for a step of a plan of several; the
// execution's own otherwise.
func (x Execution) GateClass() string {
	if x.Plan != nil {
		return x.Plan.RiskClass
	}
	return x.RiskClass
}

// DecisionHash is the hash an approval of x is bound to: the plan's hash
// over every step, or the execution's own plan hash.
func (x Execution) DecisionHash() string {
	if x.Plan != nil {
		return x.Plan.Hash
	}
	return x.PlanHash
}

// Vote is one operator's approval toward a quorum.
type Vote struct {
	Voter    string    `json:"voter"`
	Method   string    `json:"method"`
	EventID  string    `json:"event_id"`
	PlanHash string    `json:"plan_hash"`
	VotedAt  time.Time `json:"voted_at"`
}

// Approval is the one decision recorded for an execution.
type Approval struct {
	Decision  string // approved or denied
	DecidedBy string
	Method    string
	EventID   string
	PlanHash  string
	DecidedAt time.Time
	// StandingID names the standing approval a plan ran under (method
	// standing); nil for any other decision.
	StandingID *uuid.UUID
}

// NewExecution is what the lifecycle persists when a plan is requested.
type NewExecution struct {
	Request
	// Session is the agent session that asked, if one did. The link is
	// written with the execution, so a result that comes back at once
	// still finds the session to re-invoke.
	Session *SessionLink
	// UnattendedLimit bounds how many automatically approved executions
	// may be in flight at once (approved, dispatched or running). When
	// CreateExecution is given an automatic approval and the limit is
	// reached, the execution is created awaiting approval instead, so
	// unattended reads never fill the actuator's slots. Zero means no
	// limit.
	UnattendedLimit int
}

// SessionLink names the agent session behind a new execution and how many
// automatic continuations led to it.
type SessionLink struct {
	SessionID  uuid.UUID
	ChainDepth int
}

// StateConflictError is returned when a compare-and-set finds the execution
// in another state than expected. The error carries the current row.
type StateConflictError struct {
	Current Execution
}

func (e *StateConflictError) Error() string {
	return fmt.Sprintf("execution %s is %s", e.Current.ID, e.Current.State)
}

// AlreadyDecidedError is returned when a decision arrives for an execution
// that already has one. The first decision wins.
type AlreadyDecidedError struct {
	Existing Approval
}

func (e *AlreadyDecidedError) Error() string {
	return fmt.Sprintf("already %s by %s at %s", e.Existing.Decision, e.Existing.DecidedBy, e.Existing.DecidedAt.UTC().Format(time.RFC3339))
}

// ExecutionEvent is published on the executions channel after every
// committed change, so the bot and the status page can follow live.
type ExecutionEvent struct {
	ID    uuid.UUID      `json:"id"`
	State ExecutionState `json:"state"`
	Seq   int64          `json:"seq,omitempty"`
}

// ExecutionsChannel is the LISTEN/NOTIFY channel for ExecutionEvent.
const ExecutionsChannel = "nomos_executions"

const executionColumns = `x.id, x.action, x.target_id, x.target_slug, x.params, x.steps, x.risk_class,
	x.plan_hash, x.plan_code, x.state, x.requested_by, x.requested_via, x.reason, coalesce(x.room_id, ''),
	coalesce(x.card_event_id, ''), x.expires_at, x.result, coalesce(x.error, ''), x.progress_tail,
	x.heartbeat_at, x.created_at, x.updated_at, x.progress_seq,
	a.decision, a.decided_by, a.method, a.event_id, a.plan_hash, a.decided_at, a.standing_id,
	x.on_behalf_of, x.plan_id, coalesce(x.plan_position, 0), p.plan_hash, p.risk_class, p.steps,
	(SELECT coalesce(json_agg(json_build_object('voter', v.voter, 'method', v.method, 'event_id', coalesce(v.event_id, ''),
		'plan_hash', v.plan_hash, 'voted_at', v.voted_at) ORDER BY v.voted_at, v.voter), '[]'::json)
	 FROM approval_votes v WHERE v.execution_id = coalesce(x.plan_id, x.id))`

// executionFrom joins a step of a plan to its plan and to the plan's one
// decision, recorded on the plan's first step.
const executionFrom = `executions x LEFT JOIN plans p ON p.id = x.plan_id
	LEFT JOIN approvals a ON a.execution_id = coalesce(x.plan_id, x.id)`

func scanExecution(row pgx.Row) (Execution, error) {
	var x Execution
	var steps, votes []byte
	var decision, decidedBy, method, eventID, planHash *string
	var decidedAt *time.Time
	var standingID *uuid.UUID
	var wholeHash, planClass *string
	var planSteps *int
	err := row.Scan(&x.ID, &x.Action, &x.TargetID, &x.TargetSlug, &x.Params, &steps, &x.RiskClass,
		&x.PlanHash, &x.PlanCode, &x.State, &x.RequestedBy, &x.RequestedVia, &x.Reason, &x.RoomID,
		&x.CardEventID, &x.ExpiresAt, &x.Result, &x.Error, &x.ProgressTail,
		&x.HeartbeatAt, &x.CreatedAt, &x.UpdatedAt, &x.ProgressSeq,
		&decision, &decidedBy, &method, &eventID, &planHash, &decidedAt, &standingID,
		&x.OnBehalfOf, &x.PlanID, &x.Position, &wholeHash, &planClass, &planSteps, &votes)
	if err != nil {
		return Execution{}, interpretError(err)
	}
	if err := json.Unmarshal(steps, &x.Steps); err != nil {
		return Execution{}, fmt.Errorf("decode steps of %s: %w", x.ID, err)
	}
	if err := json.Unmarshal(votes, &x.Votes); err != nil {
		return Execution{}, fmt.Errorf("decode votes of %s: %w", x.ID, err)
	}
	if len(x.Votes) == 0 {
		x.Votes = nil
	}
	if wholeHash != nil && planClass != nil && planSteps != nil {
		x.Plan = &PlanInfo{Hash: *wholeHash, RiskClass: *planClass, Steps: *planSteps}
	}
	if decision != nil {
		x.Approval = &Approval{Decision: *decision, DecidedBy: *decidedBy, Method: *method, PlanHash: *planHash, DecidedAt: *decidedAt, StandingID: standingID}
		if eventID != nil {
			x.Approval.EventID = *eventID
		}
	}
	return x, nil
}

// CreateExecution persists a requested execution with its audit row. A
// read_only request can be created already approved, with its automatic
// approval recorded in the same transaction.
func (s *Store) CreateExecution(ctx context.Context, n NewExecution, auto *Approval) (Execution, error) {
	xs, err := s.create(ctx, nil, []NewExecution{n}, auto)
	if err != nil {
		return Execution{}, fmt.Errorf("create execution %s: %w", n.ID, err)
	}
	return xs[0], nil
}

// create persists one execution, or every step of a plan, in one
// transaction. The first step takes n.State (and the automatic approval,
// if any); the later steps of a plan wait.
func (s *Store) create(ctx context.Context, plan *NewPlan, steps []NewExecution, auto *Approval) ([]Execution, error) {
	steps = slices.Clone(steps)
	head := &steps[0]
	var out []Execution
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if auto != nil && auto.StandingID != nil {
			// Checked again here, under the same lock as its ending: a
			// standing approval revoked or expired a moment ago approves
			// nothing, and the plan waits for a person instead.
			held, err := standingHolds(ctx, tx, *auto.StandingID, auto.DecidedAt)
			if err != nil {
				return err
			}
			if !held {
				auto, head.State = nil, StateAwaitingApproval
			}
		}
		if auto != nil && auto.StandingID == nil && head.UnattendedLimit > 0 {
			full, err := unattendedFull(ctx, tx, head.UnattendedLimit)
			if err != nil {
				return err
			}
			if full {
				auto, head.State = nil, StateAwaitingApproval
			}
		}
		p := newPipeline(tx)
		if plan != nil {
			_, err := p.Exec(ctx, `INSERT INTO plans (id, plan_hash, risk_class, steps, created_at) VALUES ($1, $2, $3, $4, $5)`,
				head.ID, plan.Hash, plan.RiskClass, len(steps), s.now())
			if err != nil {
				return err
			}
		}
		for i := range steps {
			n := &steps[i]
			var planID *uuid.UUID
			var position *int
			detail := map[string]any{"action": n.Action, "target": n.TargetSlug, "risk_class": n.RiskClass,
				"plan_hash": n.PlanHash, "via": n.RequestedVia, "steps": n.Steps, "reason": n.Reason}
			if n.OnBehalfOf != "" {
				detail["on_behalf_of"] = n.OnBehalfOf
			}
			if plan != nil {
				pos := i + 1
				planID, position = &head.ID, &pos
				if i > 0 {
					n.State = StateWaiting
				}
				detail["plan_id"], detail["position"], detail["of"], detail["whole_plan_hash"] = head.ID, pos, len(steps), plan.Hash
			}
			if err := insertExecution(ctx, p, *n, planID, position, s.now()); err != nil {
				return err
			}
			if err := audit(ctx, p, AuditEntry{
				Actor: n.RequestedBy, Action: "execution.requested", ExecutionID: &n.ID, EntityID: n.TargetID, Detail: detail,
			}); err != nil {
				return err
			}
			if n.Session != nil {
				if err := p.flush(ctx); err != nil {
					return err
				}
				if err := linkExecution(ctx, tx, n.ID, *n.Session, s.now()); err != nil {
					return err
				}
			}
		}
		if auto != nil {
			if err := p.flush(ctx); err != nil {
				return err
			}
			if err := insertApproval(ctx, tx, head.ID, *auto); err != nil {
				return err
			}
			detail := map[string]any{"method": auto.Method, "plan_hash": auto.PlanHash}
			if auto.StandingID != nil {
				detail["standing_approval_id"] = auto.StandingID.String()
			}
			if err := audit(ctx, p, AuditEntry{Actor: auto.DecidedBy, Action: "execution.approved", ExecutionID: &head.ID,
				Detail: detail}); err != nil {
				return err
			}
		}
		out = out[:0]
		for _, n := range steps {
			if err := notify(ctx, p, n.ID, n.State); err != nil {
				return err
			}
			x, err := getExecution(ctx, p, n.ID)
			if err != nil {
				return err
			}
			out = append(out, x)
		}
		return p.flush(ctx)
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == waitingRequestIndex {
			return nil, ErrAlreadyWaiting
		}
		return nil, err
	}
	return out, nil
}

// waitingRequestIndex is the partial unique index that allows one plan
// awaiting a decision per request key.
const waitingRequestIndex = "executions_waiting_request_idx"

// ErrAlreadyWaiting is returned when a plan is created with the request
// key of a plan that still awaits a decision; WaitingByRequestKey finds
// that plan.
var ErrAlreadyWaiting = errors.New("a plan for the same change is already awaiting a decision")

// WaitingByRequestKey returns the plan awaiting a decision whose first
// step carries key, or ErrNotFound.
func (s *Store) WaitingByRequestKey(ctx context.Context, key string) (Execution, error) {
	x, err := scanExecution(s.pool.QueryRow(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE x.request_key = $1 AND x.state = 'awaiting_approval'`, key))
	if err != nil {
		return Execution{}, fmt.Errorf("waiting plan for request %s: %w", key, err)
	}
	return x, nil
}

func insertExecution(ctx context.Context, q execer, n NewExecution, planID *uuid.UUID, position *int, now time.Time) error {
	steps, err := json.Marshal(n.Steps)
	if err != nil {
		return err
	}
	params := n.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	_, err = q.Exec(ctx, `INSERT INTO executions (id, action, target_id, target_slug, params, steps,
		risk_class, plan_hash, plan_code, state, requested_by, requested_via, room_id, expires_at, created_at, updated_at, reason,
		on_behalf_of, plan_id, plan_position, request_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, nullif($13, ''), $14, $15, $15, $16, $17, $18, $19, nullif($20, ''))`,
		n.ID, n.Action, n.TargetID, n.TargetSlug, params, steps, n.RiskClass, n.PlanHash, n.PlanCode,
		n.State, n.RequestedBy, n.RequestedVia, n.RoomID, n.ExpiresAt, now, n.Reason, n.OnBehalfOf, planID, position, n.RequestKey)
	return err
}

// unattendedFull reports whether limit automatically approved executions
// are in flight. A transaction-scoped advisory lock serialises the count
// and the insert that follows across every bot.
func unattendedFull(ctx context.Context, tx pgx.Tx, limit int) (bool, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('nomos.unattended'))`); err != nil {
		return false, err
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM executions e JOIN approvals a ON a.execution_id = coalesce(e.plan_id, e.id)
		WHERE a.method = 'auto' AND e.state IN ('approved', 'dispatched', 'running')`).Scan(&n)
	return n >= limit, err
}

// GetExecution loads one execution with its decision.
func (s *Store) GetExecution(ctx context.Context, id uuid.UUID) (Execution, error) {
	x, err := getExecution(ctx, s.pool, id)
	if err != nil {
		return Execution{}, fmt.Errorf("load execution %s: %w", id, err)
	}
	return x, nil
}

// ExecutionsByID loads the executions of ids that exist, with their
// decisions, in one query.
func (s *Store) ExecutionsByID(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Execution, error) {
	out := make(map[uuid.UUID]Execution, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+` WHERE x.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load %d executions: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("load %d executions: %w", len(ids), err)
		}
		out[x.ID] = x
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load %d executions: %w", len(ids), err)
	}
	return out, nil
}

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getExecution(ctx context.Context, q rowQuerier, id uuid.UUID) (Execution, error) {
	return scanExecution(q.QueryRow(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+` WHERE x.id = $1`, id))
}

// ExecutionFilter selects executions for ListExecutions.
type ExecutionFilter struct {
	States []ExecutionState
	RoomID string
	// RiskClass keeps one risk class (empty: any): the plan's class for a
	// step of a plan of several.
	RiskClass string
	// UpdatedBefore keeps executions not updated since then (zero: any).
	UpdatedBefore time.Time
	Limit         int
}

// ListExecutions returns executions newest first.
func (s *Store) ListExecutions(ctx context.Context, f ExecutionFilter) ([]Execution, error) {
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = string(st)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var before *time.Time
	if !f.UpdatedBefore.IsZero() {
		before = &f.UpdatedBefore
	}
	rows, err := s.pool.Query(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+`
		WHERE (cardinality($1::text[]) = 0 OR x.state = ANY($1))
		  AND ($2 = '' OR x.room_id = $2)
		  AND ($3::timestamptz IS NULL OR x.updated_at < $3)
		  AND ($5 = '' OR coalesce(p.risk_class, x.risk_class) = $5)
		ORDER BY x.created_at DESC LIMIT $4`, states, f.RoomID, before, limit, f.RiskClass)
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("list executions: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Transition is one compare-and-set step of the state machine.
type Transition struct {
	ID   uuid.UUID
	From []ExecutionState
	To   ExecutionState
	// Audit is written in the same transaction when the transition applies.
	Audit AuditEntry
	// Earlier are audit rows written before Audit, in the same
	// transaction: steps of the change that were not reported on their
	// own, such as the start of an order whose result came first.
	Earlier []AuditEntry
	// Optional field updates applied with the state change.
	Result       json.RawMessage
	Error        *string
	ProgressTail *string
	Heartbeat    bool
	// ProgressSeq, when above zero, is the number of the progress report
	// behind the transition: it applies only if no report with that
	// number or a higher one was applied before, and is recorded.
	ProgressSeq int64
	// Decision, when set, is recorded as the execution's one approval; a
	// decision already on record makes the transition fail with
	// *AlreadyDecidedError.
	Decision *Approval
}

// Transition applies t if the execution is in one of t.From. Otherwise it
// changes nothing and returns *StateConflictError with the current row.
//
// Every order goes through four transitions (approved, dispatched,
// running, its end), so a transition is sent as two batches, not a round
// trip per statement: BEGIN, the plan's lock, the decision and the update;
// then the audit row, the notification, the row as it now is and COMMIT.
// The statements and their order are those of a transaction sent one by
// one (docs/operations.md, "Latency, measured").
func (s *Store) Transition(ctx context.Context, t Transition) (Execution, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Execution{}, fmt.Errorf("transition execution %s to %s: %w", t.ID, t.To, err)
	}
	// The pool closes a connection released inside a transaction, which
	// rolls it back; a rollback here keeps the connection.
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(ctx, "rollback")
		}
		conn.Release()
	}()
	x, err := s.transition(ctx, conn, t)
	if err != nil {
		var conflict *StateConflictError
		var decided *AlreadyDecidedError
		if errors.As(err, &conflict) || errors.As(err, &decided) || errors.Is(err, ErrNotFound) {
			return Execution{}, err
		}
		return Execution{}, fmt.Errorf("transition execution %s to %s: %w", t.ID, t.To, err)
	}
	return x, nil
}

func (s *Store) transition(ctx context.Context, conn *pgxpool.Conn, t Transition) (Execution, error) {
	from := make([]string, len(t.From))
	for i, st := range t.From {
		from[i] = string(st)
	}
	var hb *time.Time
	if t.Heartbeat {
		now := s.now()
		hb = &now
	}
	b := &pgx.Batch{}
	b.Queue(`begin`)
	// The plan's lock first, as RecordVote takes it.
	b.Queue(`SELECT p.id FROM plans p WHERE p.id = (SELECT plan_id FROM executions WHERE id = $1) FOR UPDATE`, t.ID)
	if t.Decision != nil {
		// The row lock orders a decision after a quorum vote under way
		// (RecordVote takes it first too), so neither waits on the other's
		// approvals row while holding what the other needs.
		b.Queue(`SELECT 1 FROM executions WHERE id = $1 FOR UPDATE`, t.ID)
		queueApproval(b, t.ID, *t.Decision)
	}
	b.Queue(`UPDATE executions SET state = $3,
			result = coalesce($4, result), error = coalesce($5, error),
			progress_tail = coalesce($6, progress_tail),
			heartbeat_at = coalesce($7, heartbeat_at), updated_at = $8,
			progress_seq = greatest(progress_seq, $9)
		WHERE id = $1 AND state = ANY($2) AND ($9 = 0 OR progress_seq < $9)`,
		t.ID, from, t.To, nullJSON(t.Result), t.Error, t.ProgressTail, hb, s.now(), t.ProgressSeq)
	planID, recorded, updated, err := sendTransition(ctx, conn, b, t.Decision != nil)
	if err != nil {
		return Execution{}, err
	}
	if !recorded {
		return Execution{}, alreadyDecided(ctx, conn, t.ID)
	}
	if !updated {
		cur, err := getExecution(ctx, conn, t.ID)
		if err != nil {
			return Execution{}, err
		}
		return Execution{}, &StateConflictError{Current: cur}
	}
	b = &pgx.Batch{}
	q := &pipeline{batch: b}
	for _, a := range append(t.Earlier[:len(t.Earlier):len(t.Earlier)], t.Audit) {
		a.ExecutionID = &t.ID
		if err := audit(ctx, q, a); err != nil {
			return Execution{}, err
		}
	}
	if err := notify(ctx, q, t.ID, t.To); err != nil {
		return Execution{}, err
	}
	if planID != nil {
		// The plan moves on in the same transaction: no crash can leave
		// a step done and the next one neither ready nor skipped.
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return Execution{}, err
		}
		if err := settlePlan(ctx, conn, *planID, s.now()); err != nil {
			return Execution{}, err
		}
		b = &pgx.Batch{}
	}
	// The row goes in the batch that commits: a row that cannot be decoded
	// is an error for the caller though the transition stands, as it would
	// be for every later read of it.
	queued := b.Len()
	b.Queue(`SELECT `+executionColumns+` FROM `+executionFrom+` WHERE x.id = $1`, t.ID)
	b.Queue(`commit`)
	br := conn.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // the error paths; the last step checks it
	for range queued {
		if _, err := br.Exec(); err != nil {
			return Execution{}, err
		}
	}
	x, err := scanExecution(br.QueryRow())
	if err != nil {
		return Execution{}, err
	}
	if _, err := br.Exec(); err != nil {
		return Execution{}, err
	}
	return x, br.Close()
}

// sendTransition sends a transition's first batch (begin, the plan's
// lock, with decision the row lock and the approval, and the update) and
// reads it: the plan locked, if any; whether the approval was recorded
// (true without decision); whether the update changed the row.
func sendTransition(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, decision bool) (planID *uuid.UUID, recorded, updated bool, err error) {
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil {
		return nil, false, false, err
	}
	var id uuid.UUID
	switch err := br.QueryRow().Scan(&id); {
	case err == nil:
		planID = &id
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, false, false, err
	}
	recorded = true
	if decision {
		if _, err := br.Exec(); err != nil {
			return nil, false, false, err
		}
		tag, err := br.Exec()
		if err != nil {
			return nil, false, false, err
		}
		recorded = tag.RowsAffected() > 0
	}
	tag, err := br.Exec()
	if err != nil {
		return nil, false, false, err
	}
	return planID, recorded, tag.RowsAffected() > 0, nil
}

// UpdateProgress records output and a heartbeat for a running execution
// without an audit row: progress is frequent and carries no decision. seq
// is the report's number; a report whose number is not above the last one
// applied, or for an execution that is not running, changes nothing and
// is reported as a conflict.
func (s *Store) UpdateProgress(ctx context.Context, id uuid.UUID, seq int64, tail string) (Execution, error) {
	var x Execution
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE executions SET progress_tail = $2, heartbeat_at = $3, updated_at = $3, progress_seq = $4
			WHERE id = $1 AND state = 'running' AND progress_seq < $4`, id, tail, s.now(), seq)
		if err != nil {
			return err
		}
		cur, err := getExecution(ctx, tx, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &StateConflictError{Current: cur}
		}
		x = cur
		return notify(ctx, tx, id, cur.State)
	})
	if err != nil {
		var conflict *StateConflictError
		if errors.As(err, &conflict) || errors.Is(err, ErrNotFound) {
			return Execution{}, err
		}
		return Execution{}, fmt.Errorf("progress of execution %s: %w", id, err)
	}
	return x, nil
}

// SetCardEvent records the Matrix event that shows an execution's plan.
func (s *Store) SetCardEvent(ctx context.Context, id uuid.UUID, roomID, eventID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE executions SET room_id = $2, card_event_id = $3 WHERE id = $1`, id, roomID, eventID)
	if err != nil {
		return fmt.Errorf("set card of execution %s: %w", id, err)
	}
	return nil
}

// ExecutionByCard finds the execution a Matrix event shows.
func (s *Store) ExecutionByCard(ctx context.Context, eventID string) (Execution, error) {
	x, err := scanExecution(s.pool.QueryRow(ctx, `SELECT `+executionColumns+` FROM `+executionFrom+` WHERE x.card_event_id = $1`, eventID))
	if err != nil {
		return Execution{}, fmt.Errorf("execution for card %s: %w", eventID, err)
	}
	return x, nil
}

func insertApproval(ctx context.Context, tx pgx.Tx, id uuid.UUID, a Approval) error {
	tag, err := tx.Exec(ctx, approvalInsert, approvalArgs(id, a)...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return alreadyDecided(ctx, tx, id)
	}
	return nil
}

// queueApproval queues the insert of an execution's one decision; it
// changes no row when a decision is already on record.
func queueApproval(b *pgx.Batch, id uuid.UUID, a Approval) {
	b.Queue(approvalInsert, approvalArgs(id, a)...)
}

const approvalInsert = `INSERT INTO approvals (execution_id, decision, decided_by, method, event_id, plan_hash, decided_at, standing_id)
	VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8) ON CONFLICT (execution_id) DO NOTHING`

func approvalArgs(id uuid.UUID, a Approval) []any {
	return []any{id, a.Decision, a.DecidedBy, a.Method, a.EventID, a.PlanHash, a.DecidedAt, a.StandingID}
}

// alreadyDecided is the *AlreadyDecidedError for the decision on record.
func alreadyDecided(ctx context.Context, q rowQuerier, id uuid.UUID) error {
	var existing Approval
	var eventID *string
	err := q.QueryRow(ctx, `SELECT decision, decided_by, method, event_id, plan_hash, decided_at
		FROM approvals WHERE execution_id = $1`, id).Scan(&existing.Decision, &existing.DecidedBy,
		&existing.Method, &eventID, &existing.PlanHash, &existing.DecidedAt)
	if err != nil {
		return err
	}
	if eventID != nil {
		existing.EventID = *eventID
	}
	return &AlreadyDecidedError{Existing: existing}
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func audit(ctx context.Context, q execer, e AuditEntry) error {
	detail, err := json.Marshal(nonNil(e.Detail))
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO audit_log (actor, action, execution_id, entity_id, detail)
		VALUES ($1, $2, $3, $4, $5)`, e.Actor, e.Action, e.ExecutionID, e.EntityID, detail)
	return err
}

func notify(ctx context.Context, q execer, id uuid.UUID, state ExecutionState) error {
	payload, err := json.Marshal(ExecutionEvent{ID: id, State: state})
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `SELECT pg_notify($1, $2)`, ExecutionsChannel, string(payload))
	return err
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}
