package policy

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps exactly one of
// them, so callers can branch with errors.Is.
var (
	// ErrUnknownAction means the action is not in the catalogue.
	ErrUnknownAction = errors.New("unknown action")
	// ErrInvalidParams means a parameter failed validation; errors.As with
	// *ParamError names the parameter.
	ErrInvalidParams = errors.New("invalid parameters")
	// ErrInvalidTarget means the resolved target is malformed or of a type the
	// action does not take.
	ErrInvalidTarget = errors.New("invalid target")
	// ErrInvalidPlan means a plan or plan hash is malformed.
	ErrInvalidPlan = errors.New("invalid plan")
	// ErrInvalidConfig means a RulesConfig or an Override is malformed.
	ErrInvalidConfig = errors.New("invalid policy config")
	// ErrNotOperator means the person deciding is not a listed operator.
	ErrNotOperator = errors.New("not an operator")
	// ErrMethodNotAllowed means the approval method does not count for the
	// plan's risk class, e.g. a reaction on a destructive plan.
	ErrMethodNotAllowed = errors.New("approval method not allowed")
)

// ParamError names one parameter that failed validation. Its message reads
// `params.<field>: <what is expected>, got <what was given>`, short enough to
// show an operator or hand back to the agent as is.
type ParamError struct {
	// Field is the JSON name, such as "hostname" or "services[2]"; empty
	// when the problem is with the parameter object as a whole.
	Field string
	// Problem says what is expected and what was given.
	Problem string
}

// Error returns the message described on ParamError.
func (e *ParamError) Error() string {
	if e.Field == "" {
		return "params: " + e.Problem
	}
	return "params." + e.Field + ": " + e.Problem
}

// Unwrap makes every ParamError match ErrInvalidParams.
func (e *ParamError) Unwrap() error { return ErrInvalidParams }

func paramErr(field, format string, args ...any) *ParamError {
	return &ParamError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

func targetErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidTarget, fmt.Sprintf(format, args...))
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// joinParamErrs returns nil, the single error, or all of them joined, in the
// order found; the joined error still matches ErrInvalidParams.
func joinParamErrs(errs []*ParamError) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// quoted renders a user-supplied value for an error message: Go-quoted so
// control characters are visible, and cut short so a 64 KiB script does not
// become a 64 KiB error.
func quoted(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
