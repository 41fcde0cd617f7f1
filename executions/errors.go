package executions

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nomoshq/nomos/store"
)

// Errors the front ends turn into a clear sentence for the operator.
var (
	// ErrUnknownTarget: the name matched no entity of a type the action takes.
	ErrUnknownTarget = errors.New("unknown target")
	// ErrExpired: the plan's approval window closed before the decision.
	ErrExpired = errors.New("plan has expired")
	// ErrNotPending: the execution is past the point where it can be decided.
	ErrNotPending = errors.New("execution is not awaiting a decision")
	// ErrPhraseMismatch: a destructive plan got something other than its phrase.
	ErrPhraseMismatch = errors.New("confirmation phrase does not match")
	// ErrNotOutcomeUnknown: only an outcome_unknown execution can be reconciled.
	ErrNotOutcomeUnknown = errors.New("execution is not outcome_unknown")
	// ErrTargetChanged: the target changed after approval, so the approved plan no longer applies.
	ErrTargetChanged = errors.New("target changed since the plan was approved")
	// ErrCarriesSecret: a step's own text looks like a secret. A card shows
	// a command exactly as it runs, so such a plan is refused rather than
	// shown disguised. It also matches policy.ErrInvalidParams.
	ErrCarriesSecret = errors.New("the command carries a secret")
	// ErrSelfApproval: with approvals.self_approval off, whoever asked for
	// a plan (or the operator the agent asked on behalf of) may not
	// approve it.
	ErrSelfApproval = errors.New("a plan may not be approved by whoever asked for it")
	// ErrSameApprover: a destructive plan needs the phrase from several
	// different operators, and this one has already given it.
	ErrSameApprover = errors.New("quorum not met")
	// ErrQuorumPending is what every *QuorumPendingError wraps.
	ErrQuorumPending = errors.New("approval recorded; the quorum is not met yet")
	// ErrNoContainerState: the host did not say whether the container runs.
	ErrNoContainerState = errors.New("could not read the container's state from its host")
)

// QuorumPendingError reports an approval recorded toward a destructive
// plan's quorum that did not complete it: the plan still waits.
type QuorumPendingError struct {
	// Votes is how many operators have approved so far; Quorum how many
	// must.
	Votes, Quorum int
}

func (e *QuorumPendingError) Error() string {
	return fmt.Sprintf("approval %d of %d recorded; the plan waits for another operator's phrase", e.Votes, e.Quorum)
}

func (e *QuorumPendingError) Unwrap() error { return ErrQuorumPending }

// AmbiguousTargetError lists the entities a name could mean. Nomos never
// guesses between them.
type AmbiguousTargetError struct {
	Ref        string
	Candidates []string
}

func (e *AmbiguousTargetError) Error() string {
	return fmt.Sprintf("%q matches %d entities: %s; name one of them", e.Ref, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// ErrAlreadyWaiting is what every *AlreadyWaitingError wraps.
var ErrAlreadyWaiting = errors.New("the same change already awaits a decision")

// AlreadyWaitingError reports that a plan for the same change (same
// action, target and parameters) still awaits a decision, so no second one
// was made: the caller points at Waiting, its code and its card.
type AlreadyWaitingError struct {
	// Waiting is the waiting plan's execution (its first step's).
	Waiting store.Execution
}

func (e *AlreadyWaitingError) Error() string {
	return fmt.Sprintf("already queued: plan %s (%s %s) awaits a decision", e.Waiting.PlanCode, e.Waiting.Action, e.Waiting.TargetSlug)
}

func (e *AlreadyWaitingError) Unwrap() error { return ErrAlreadyWaiting }

// AlreadyDecidedError reports the decision that won.
type AlreadyDecidedError = store.AlreadyDecidedError
