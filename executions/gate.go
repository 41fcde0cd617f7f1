package executions

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
)

// The checks in this file run on every request before anything is stored:
// what an operator is asked to approve must be all there, in plain sight.

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
