package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Method is how a decision reached Nomos.
type Method string

// The approval methods. There is deliberately no MCP method: an agent may
// request an execution over MCP but never approve one.
const (
	// MethodAuto is Nomos approving on its own: named read_only actions
	// (never free-form shell; see Rules.AutoApproves), and reversible_low
	// plans with a validated history when configured.
	MethodAuto Method = "auto"
	// MethodReaction is ✅ or 👍 (approve), ❌ or 👎 (deny) on the plan card.
	MethodReaction Method = "reaction"
	// MethodReply is an assent or refusal in a reply, or in the next message
	// when exactly one plan is pending.
	MethodReply Method = "reply"
	// MethodPhrase is the typed confirmation phrase.
	MethodPhrase Method = "phrase"
)

// ParseMethod parses a method name.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case MethodAuto, MethodReaction, MethodReply, MethodPhrase:
		return m, nil
	}
	return "", configErr("method must be auto, reaction, reply or phrase, got %s", quoted(s))
}

// MethodAllowed reports whether method m counts as approval for class c:
// read_only may approve itself (see Rules.AutoApproves) and any
// operator's approval counts;
// reversible_low and config_mutation need a reaction, reply or phrase;
// destructive needs the phrase.
func MethodAllowed(c Class, m Method) bool {
	switch m {
	case MethodAuto:
		return c == ReadOnly
	case MethodReaction, MethodReply:
		return c.Valid() && c < Destructive
	case MethodPhrase:
		return c.Valid()
	}
	return false
}

// Default plan lifetimes.
const (
	DefaultTTL            = 30 * time.Minute
	DefaultDestructiveTTL = 10 * time.Minute
)

// TTLConfig sets how long a plan of each class waits for approval before it
// expires. Zero means the default.
type TTLConfig struct {
	// ReadOnly defaults to DefaultTTL. Named read-only actions approve
	// themselves when made; it bounds how long any other read_only plan
	// (free-form shell, the agent's, one past the unattended limit) waits
	// for a person.
	ReadOnly time.Duration `json:"read_only" yaml:"read_only"`
	// ReversibleLow defaults to DefaultTTL.
	ReversibleLow time.Duration `json:"reversible_low" yaml:"reversible_low"`
	// ConfigMutation defaults to DefaultTTL.
	ConfigMutation time.Duration `json:"config_mutation" yaml:"config_mutation"`
	// Destructive defaults to DefaultDestructiveTTL.
	Destructive time.Duration `json:"destructive" yaml:"destructive"`
}

// RulesConfig configures approval rules.
type RulesConfig struct {
	// Operators are the Matrix user ids who may approve and deny. Required.
	Operators []string `json:"operators" yaml:"operators"`
	// TTL is each class's plan lifetime.
	TTL TTLConfig `json:"ttl" yaml:"ttl"`
	// AutoApproveValidated lets a reversible_low plan whose pattern has a
	// clean validated history approve itself. Off by default.
	AutoApproveValidated bool `json:"auto_approve_validated" yaml:"auto_approve_validated"`
}

// Rules answers who may decide a plan, by which method, and until when.
type Rules struct {
	operators []string
	ttl       TTLConfig
	autoValid bool
}

// NewRules validates cfg and fills in defaults.
func NewRules(cfg RulesConfig) (*Rules, error) {
	if len(cfg.Operators) == 0 {
		return nil, configErr("operators: at least one Matrix user id is required, or nobody can approve anything")
	}
	ops := make([]string, 0, len(cfg.Operators))
	for i, u := range cfg.Operators {
		if err := ValidateMatrixUserID(u); err != nil {
			return nil, configErr("operators[%d]: %v", i, err)
		}
		if !slices.Contains(ops, u) {
			ops = append(ops, u)
		}
	}
	t := cfg.TTL
	for _, c := range Classes() {
		if d := t.of(c); d < 0 {
			return nil, configErr("ttl.%s: must not be negative, got %s", c, d)
		}
	}
	t.ReadOnly = cmp.Or(t.ReadOnly, DefaultTTL)
	t.ReversibleLow = cmp.Or(t.ReversibleLow, DefaultTTL)
	t.ConfigMutation = cmp.Or(t.ConfigMutation, DefaultTTL)
	t.Destructive = cmp.Or(t.Destructive, DefaultDestructiveTTL)
	return &Rules{operators: ops, ttl: t, autoValid: cfg.AutoApproveValidated}, nil
}

// Operators returns the operators, in configured order without duplicates.
func (r *Rules) Operators() []string { return slices.Clone(r.operators) }

// IsOperator reports whether userID is a listed operator, by exact match.
func (r *Rules) IsOperator(userID string) bool { return slices.Contains(r.operators, userID) }

// Authorize checks that userID may make decision d on a plan of class c by
// method m: a person's decision. Anyone listed may deny by reaction, reply
// or phrase; approval also needs a method that counts for the class (see
// MethodAllowed). MethodAuto is never a person's decision and is always
// refused here: only AutoApproves, asked when a plan is made, lets a plan
// approve itself, so a plan that waits for a person (free-form shell, the
// agent's, one held back by a limit) cannot be approved "automatically"
// later. Authorize does not check the phrase itself: match it with
// MatchPhrase first.
func (r *Rules) Authorize(d Decision, c Class, userID string, m Method) error {
	if !c.Valid() {
		return configErr("class %s is not a class", c)
	}
	if m == MethodAuto {
		return fmt.Errorf("%w: an automatic approval is given only when a plan is made, never afterwards", ErrMethodNotAllowed)
	}
	if _, err := ParseMethod(string(m)); err != nil {
		return fmt.Errorf("%w: %s", ErrMethodNotAllowed, quoted(string(m)))
	}
	if !r.IsOperator(userID) {
		return fmt.Errorf("%w: %s", ErrNotOperator, quoted(userID))
	}
	switch d {
	case Deny:
		return nil
	case Approve:
		if !MethodAllowed(c, m) {
			return fmt.Errorf("%w: a %s plan needs the typed confirmation phrase, not a %s", ErrMethodNotAllowed, c, m)
		}
		return nil
	}
	return configErr("decision %d is neither approve nor deny", d)
}

// AutoApproves reports whether a plan approves itself, with nobody asked.
// Only named read-only actions of the catalogue do: a plan of free-form
// shell (pct_exec, run, pct_create) always waits for a person, whatever the
// classifier says, because the classifier guides people and is not the
// gate. A plan the agent asked for waits too, unless its action is a probe
// that takes nothing but a target (pct_status): text the model read cannot
// steer it. A validated reversible_low pattern approves itself only when
// the rules allow it and never for free-form shell.
func (r *Rules) AutoApproves(a Action, c Class, byAgent, validatedHistory bool) bool {
	spec, err := Lookup(a)
	if err != nil || spec.FreeForm {
		return false
	}
	if byAgent && !spec.Probe {
		return false
	}
	return c == ReadOnly || (c == ReversibleLow && r.autoValid && validatedHistory)
}

// TTL returns how long a plan of class c waits for approval; an invalid
// class gets the destructive lifetime.
func (r *Rules) TTL(c Class) time.Duration { return r.ttl.of(c) }

func (t TTLConfig) of(c Class) time.Duration {
	switch c {
	case ReadOnly:
		return t.ReadOnly
	case ReversibleLow:
		return t.ReversibleLow
	case ConfigMutation:
		return t.ConfigMutation
	}
	return t.Destructive
}

// ExpiresAt returns when a plan of class c created at created expires.
func (r *Rules) ExpiresAt(c Class, created time.Time) time.Time {
	return created.Add(r.TTL(c))
}

// Expired reports whether a plan of class c created at created has expired
// at now; it has from ExpiresAt on.
func (r *Rules) Expired(c Class, created, now time.Time) bool {
	return !now.Before(r.ExpiresAt(c, created))
}

// ConfirmationPhrase returns the phrase that approves a destructive plan
// of one step: "<verb> <target-slug> <code>", e.g. "destroy lxc:strong/131
// k7q2", where the verb comes from the action's Spec and the code from
// PlanCode(planHash). It is PlanPhrase of that one step.
func ConfirmationPhrase(a Action, targetSlug, planHash string) (string, error) {
	return PlanPhrase([]PhraseStep{{Action: a, Slug: targetSlug}}, planHash)
}

// PhraseStep is a destructive step as its plan's phrase names it.
type PhraseStep struct {
	Action Action
	// Slug is the step's resolved target, e.g. lxc:strong/101.
	Slug string
}

// PlanPhrase returns the typed phrase that approves a destructive plan:
// the verb and target of each of its destructive steps, in the plan's
// order, then the plan's code from PlanCode(planHash). "rollback
// lxc:strong/900 destroy lxc:strong/101 k7q2" approves a plan that rolls
// lxc:strong/900 back and destroys lxc:strong/101, whatever else it does
// between; a phrase that names fewer of its steps, or others, never
// matches it (see MatchPhrase). A pair that comes twice is named once.
// steps are the destructive steps only; at least one is required.
func PlanPhrase(steps []PhraseStep, planHash string) (string, error) {
	if len(steps) == 0 {
		return "", fmt.Errorf("%w: a confirmation phrase names at least one destructive step", ErrInvalidPlan)
	}
	if len(steps) > MaxPlanSteps {
		return "", fmt.Errorf("%w: a plan has at most %d steps, got %d", ErrInvalidPlan, MaxPlanSteps, len(steps))
	}
	var words []string
	seen := map[PhraseStep]bool{}
	for _, st := range steps {
		spec, err := Lookup(st.Action)
		if err != nil {
			return "", err
		}
		if _, _, err := ParseSlug(st.Slug); err != nil {
			return "", targetErr("target slug: %v", err)
		}
		if !seen[st] {
			seen[st] = true
			words = append(words, spec.Verb, st.Slug)
		}
	}
	code, err := PlanCode(planHash)
	if err != nil {
		return "", err
	}
	phrase := strings.Join(append(words, code), " ")
	if len(phrase) > maxPhraseLen {
		return "", fmt.Errorf("%w: its confirmation phrase would be %d bytes, more than %d", ErrInvalidPlan, len(phrase), maxPhraseLen)
	}
	return phrase, nil
}

// MayBePhrase reports whether s has the shape of a confirmation phrase:
// one or more pairs of a verb and a slug, then a code of PlanCodeLen
// letters and digits. It is a cheap test for skipping the lookup of
// pending destructive plans on every other message.
func MayBePhrase(s string) bool {
	if len(s) > maxPhraseLen {
		return false
	}
	f := strings.Fields(s)
	if len(f) < 3 || len(f)%2 == 0 || len(f) > 2*MaxPlanSteps+1 {
		return false
	}
	for i := 1; i < len(f)-1; i += 2 {
		if !strings.Contains(f[i], ":") {
			return false
		}
	}
	code := f[len(f)-1]
	if len(code) != PlanCodeLen {
		return false
	}
	for _, r := range code {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// maxPhraseLen bounds what MatchPhrase reads: room for a verb and a slug
// for each of a plan's steps.
const maxPhraseLen = 1024

// MatchPhrase reports whether a typed message is the confirmation phrase
// want. Surrounding whitespace is trimmed and inner runs of whitespace
// collapse to one space. ASCII letters compare without case, because phone
// keyboards capitalise the first letter; every phrase is lowercase by
// construction (lowercase verb, slug and code alphabet), so folding case
// cannot make one plan's phrase match another's. Nothing else is forgiven:
// an extra word, a missing one or a wrong code never matches, and an empty
// want never matches.
func MatchPhrase(got, want string) bool {
	if len(got) > maxPhraseLen || len(want) > maxPhraseLen {
		return false
	}
	w := normalizePhrase(want)
	return w != "" && normalizePhrase(got) == w
}

func normalizePhrase(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimFunc(s, unicode.IsSpace) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
