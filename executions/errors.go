package executions

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
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

// ShownStepsBytes is how much of a plan's steps a card shows. A plan from
// the agent or an MCP client must fit, so nothing can hide after padding
// beyond what the operator sees; an operator's own command may be longer
// (the status page shows it whole).
const ShownStepsBytes = 8000

// ErrTooLongToShow: a plan from the agent or MCP does not fit on its card.
// It also matches policy.ErrInvalidParams.
var ErrTooLongToShow = errors.New("the plan is too long to show on its card")

func checkShown(steps []string, via string) error {
	if via == ViaChat || via == ViaRunbook {
		return nil
	}
	n := 0
	for _, st := range steps {
		n += len(st) + 1
	}
	if n > ShownStepsBytes {
		return fmt.Errorf("%w: %w: its steps are %d bytes and a card shows %d; an operator must be able to read all of what they approve, "+
			"so split it into smaller steps or put the script in a file on the host", policy.ErrInvalidParams, ErrTooLongToShow, n, ShownStepsBytes)
	}
	return nil
}

// maxReason bounds the reason an agent or MCP client gives.
const maxReason = 1000

// cleanReason keeps a requester's reason fit for a card and the audit log:
// secrets redacted, no control or invisible formatting characters (which
// could reorder the "asked by" that follows it), and bounded.
func cleanReason(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return ' '
		case unicode.IsControl(r), unicode.In(r, unicode.Cf):
			return -1
		}
		return r
	}, redact.String(s))
	s = strings.TrimSpace(s)
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "…"
	}
	return s
}

// checkNoSecrets refuses steps whose text the redaction would change: the
// card, the audit log and the order would otherwise either show a secret
// or show something other than what runs.
func checkNoSecrets(steps []string) error {
	for i, st := range steps {
		if kind, ok := redact.Find(st); ok {
			return fmt.Errorf("%w: %w: step %d holds what looks like %s; a plan shows each command exactly as it will run, "+
				"so Nomos refuses to show or store it. Keep the secret in a file on the host and read it from there",
				policy.ErrInvalidParams, ErrCarriesSecret, i+1, kind)
		}
	}
	return nil
}

// AmbiguousTargetError lists the entities a name could mean. Nomos never
// guesses between them.
type AmbiguousTargetError struct {
	Ref        string
	Candidates []string
}

func (e *AmbiguousTargetError) Error() string {
	return fmt.Sprintf("%q matches %d entities: %s; name one of them", e.Ref, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// AlreadyDecidedError reports the decision that won.
type AlreadyDecidedError = store.ErrAlreadyDecided
