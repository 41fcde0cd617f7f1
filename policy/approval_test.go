package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

type rulesBundle struct {
	rules *Rules
}

func setup(t *testing.T) rulesBundle {
	t.Helper()
	r, err := NewRules(RulesConfig{Operators: []string{"@operator:localhost", "@alice:example.org", "@operator:localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	return rulesBundle{rules: r}
}

func TestNewRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if d := diff([]string{"@operator:localhost", "@alice:example.org"}, b.rules.Operators()); d != "" {
		t.Errorf("Operators %s", d)
	}
	for c, want := range map[Class]time.Duration{
		ReadOnly: 30 * time.Minute, ReversibleLow: 30 * time.Minute,
		ConfigMutation: 30 * time.Minute, Destructive: 10 * time.Minute,
	} {
		if got := b.rules.TTL(c); got != want {
			t.Errorf("default TTL(%s) = %s, want %s", c, got, want)
		}
	}
	r, err := NewRules(RulesConfig{Operators: []string{"@o:x"}, TTL: TTLConfig{ConfigMutation: time.Hour, Destructive: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if r.TTL(ConfigMutation) != time.Hour || r.TTL(Destructive) != 2*time.Minute || r.TTL(ReversibleLow) != DefaultTTL {
		t.Errorf("configured TTLs not applied: %+v", r.ttl)
	}

	bad := []struct {
		cfg  RulesConfig
		want string
	}{
		{RulesConfig{}, "operators: at least one Matrix user id is required"},
		{RulesConfig{Operators: []string{"operator"}}, "operators[0]: must be a Matrix user id"},
		{RulesConfig{Operators: []string{"@o:x", "@a b:x"}}, "operators[1]"},
		{RulesConfig{Operators: []string{"@o:x"}, TTL: TTLConfig{Destructive: -time.Second}}, "ttl.destructive: must not be negative"},
	}
	for _, tt := range bad {
		_, err := NewRules(tt.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewRules(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestMethodAllowed(t *testing.T) {
	t.Parallel()
	want := map[Class][]Method{
		ReadOnly:       {MethodAuto, MethodReaction, MethodReply, MethodPhrase},
		ReversibleLow:  {MethodReaction, MethodReply, MethodPhrase},
		ConfigMutation: {MethodReaction, MethodReply, MethodPhrase},
		Destructive:    {MethodPhrase},
	}
	for _, c := range Classes() {
		var got []Method
		for _, m := range []Method{MethodAuto, MethodReaction, MethodReply, MethodPhrase, "mcp", ""} {
			if MethodAllowed(c, m) {
				got = append(got, m)
			}
		}
		if d := diff(want[c], got); d != "" {
			t.Errorf("MethodAllowed(%s) %s", c, d)
		}
	}
	if MethodAllowed(0, MethodPhrase) {
		t.Error("MethodAllowed for an invalid class")
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const op, guest = "@operator:localhost", "@guest:localhost"
	tests := []struct {
		d      Decision
		c      Class
		user   string
		m      Method
		wantIs error
	}{
		// Automatic approval is AutoApproves's, when a plan is made; never
		// a decision handed in later, by nobody or by an operator.
		{Approve, ReadOnly, "", MethodAuto, ErrMethodNotAllowed},
		{Approve, ReadOnly, op, MethodAuto, ErrMethodNotAllowed},
		{Approve, ReversibleLow, "", MethodAuto, ErrMethodNotAllowed},
		{Approve, ReversibleLow, op, MethodReaction, nil},
		{Approve, ConfigMutation, op, MethodReply, nil},
		{Approve, ConfigMutation, op, MethodPhrase, nil},
		{Approve, Destructive, op, MethodReaction, ErrMethodNotAllowed},
		{Approve, Destructive, op, MethodReply, ErrMethodNotAllowed},
		{Approve, Destructive, op, MethodPhrase, nil},
		{Approve, ReversibleLow, guest, MethodReaction, ErrNotOperator},
		{Approve, Destructive, guest, MethodPhrase, ErrNotOperator},
		{Approve, ReversibleLow, "@Operator:localhost", MethodReaction, ErrNotOperator},
		{Approve, ReversibleLow, op, "mcp", ErrMethodNotAllowed},
		{Deny, Destructive, op, MethodReaction, nil},
		{Deny, ConfigMutation, op, MethodReply, nil},
		{Deny, ConfigMutation, guest, MethodReaction, ErrNotOperator},
		{Deny, ReadOnly, "", MethodAuto, ErrMethodNotAllowed},
		{Approve, 0, op, MethodPhrase, ErrInvalidConfig},
	}
	for _, tt := range tests {
		err := b.rules.Authorize(tt.d, tt.c, tt.user, tt.m)
		if (tt.wantIs == nil) != (err == nil) || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
			t.Errorf("Authorize(%s, %s, %q, %s) = %v, want %v", tt.d, tt.c, tt.user, tt.m, err, tt.wantIs)
		}
	}
}

func TestAutoApproves(t *testing.T) {
	t.Parallel()
	off := setup(t).rules
	on, _ := NewRules(RulesConfig{Operators: []string{"@o:x"}, AutoApproveValidated: true})
	tests := []struct {
		name      string
		r         *Rules
		a         Action
		c         Class
		byAgent   bool
		validated bool
		want      bool
	}{
		{"a named read-only action from a person", off, ActionAptUpgrade, ReadOnly, false, false, true},
		{"the status probe from a person", off, ActionPctStatus, ReadOnly, false, false, true},
		{"the status probe from the agent", off, ActionPctStatus, ReadOnly, true, false, true},
		{"a named read-only action from the agent", off, ActionAptUpgrade, ReadOnly, true, false, false},
		{"free-form pct_exec classified read-only", off, ActionPctExec, ReadOnly, false, false, false},
		{"free-form run classified read-only", off, ActionRun, ReadOnly, false, false, false},
		{"free-form run from the agent", off, ActionRun, ReadOnly, true, false, false},
		{"pct_create", on, ActionPctCreate, ReadOnly, false, true, false},
		{"validated reversible_low when off", off, ActionRestart, ReversibleLow, false, true, false},
		{"validated reversible_low when on", on, ActionRestart, ReversibleLow, false, true, true},
		{"validated reversible_low from the agent", on, ActionRestart, ReversibleLow, true, true, false},
		{"unvalidated reversible_low", on, ActionRestart, ReversibleLow, false, false, false},
		{"config_mutation", on, ActionSystemctl, ConfigMutation, false, true, false},
		{"destructive", on, ActionPctDestroy, Destructive, false, true, false},
		{"an unknown action", off, "nope", ReadOnly, false, false, false},
	}
	for _, tt := range tests {
		if got := tt.r.AutoApproves(tt.a, tt.c, tt.byAgent, tt.validated); got != tt.want {
			t.Errorf("%s: AutoApproves(%s, %s, agent=%v, validated=%v) = %v, want %v", tt.name, tt.a, tt.c, tt.byAgent, tt.validated, got, tt.want)
		}
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	r := setup(t).rules
	created := time.Date(2026, 7, 6, 10, 0, 0, 0, time.UTC)
	if got := r.ExpiresAt(Destructive, created); !got.Equal(created.Add(10 * time.Minute)) {
		t.Errorf("ExpiresAt = %s", got)
	}
	tests := []struct {
		c     Class
		after time.Duration
		want  bool
	}{
		{Destructive, 9*time.Minute + 59*time.Second, false},
		{Destructive, 10 * time.Minute, true},
		{ConfigMutation, 10 * time.Minute, false},
		{ConfigMutation, 30 * time.Minute, true},
		{ReversibleLow, -time.Minute, false},
	}
	for _, tt := range tests {
		if got := r.Expired(tt.c, created, created.Add(tt.after)); got != tt.want {
			t.Errorf("Expired(%s, +%s) = %v", tt.c, tt.after, got)
		}
	}
}

func TestConfirmationPhrase(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, PctDestroyParams{}, lxc131)
	h := mustHash(t, plan)
	code, _ := PlanCode(h)
	got, err := ConfirmationPhrase(ActionPctDestroy, "lxc:131", h)
	if err != nil {
		t.Fatal(err)
	}
	if want := "destroy lxc:131 " + code; got != want {
		t.Errorf("ConfirmationPhrase = %q, want %q", got, want)
	}
	if _, err := ConfirmationPhrase("nuke", "lxc:131", h); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := ConfirmationPhrase(ActionPctDestroy, "lxc:131; reboot", h); !errors.Is(err, ErrInvalidTarget) {
		t.Errorf("bad slug: %v", err)
	}
	if _, err := ConfirmationPhrase(ActionPctDestroy, "lxc:131", "abc"); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("bad hash: %v", err)
	}
	// A phrase for another plan on the same target does not match.
	other := mustPlan(t, PctDestroyParams{Purge: true}, lxc131)
	otherPhrase, _ := ConfirmationPhrase(ActionPctDestroy, "lxc:131", mustHash(t, other))
	if otherPhrase == got || MatchPhrase(otherPhrase, got) {
		t.Errorf("phrases of two plans match: %q, %q", got, otherPhrase)
	}
}

// TestPlanPhrase: a plan's phrase names the verb and target of every
// destructive step, in order and each once, then the plan's code; a plan
// of one destructive step has the phrase ConfirmationPhrase gives.
func TestPlanPhrase(t *testing.T) {
	t.Parallel()
	h := mustHash(t, mustPlan(t, PctDestroyParams{}, lxc131))
	code, _ := PlanCode(h)
	rollback := PhraseStep{Action: ActionPctRollback, Slug: "lxc:strong/900"}
	destroy := PhraseStep{Action: ActionPctDestroy, Slug: "lxc:strong/101"}
	tests := []struct {
		name  string
		steps []PhraseStep
		want  string
	}{
		{"one step", []PhraseStep{destroy}, "destroy lxc:strong/101 " + code},
		{"rollback then destroy", []PhraseStep{rollback, destroy}, "rollback lxc:strong/900 destroy lxc:strong/101 " + code},
		{"in the plan's order", []PhraseStep{destroy, rollback}, "destroy lxc:strong/101 rollback lxc:strong/900 " + code},
		{"each pair once", []PhraseStep{rollback, destroy, rollback}, "rollback lxc:strong/900 destroy lxc:strong/101 " + code},
	}
	for _, tt := range tests {
		got, err := PlanPhrase(tt.steps, h)
		if err != nil || got != tt.want {
			t.Errorf("%s: PlanPhrase = %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if !MayBePhrase(got) || !MatchPhrase(got, tt.want) {
			t.Errorf("%s: %q does not pass as its own phrase", tt.name, got)
		}
	}
	single, _ := ConfirmationPhrase(ActionPctDestroy, "lxc:strong/101", h)
	if single != tests[0].want {
		t.Errorf("ConfirmationPhrase = %q, PlanPhrase of the one step = %q", single, tests[0].want)
	}
	// A phrase that names fewer steps, or more, approves nothing.
	full := tests[1].want
	for _, short := range []string{"rollback lxc:strong/900 " + code, "destroy lxc:strong/101 " + code,
		"rollback lxc:900 destroy lxc:101 " + code, "rollback lxc:strong/900 destroy lxc:strong/101 destroy lxc:strong/101 " + code} {
		if MatchPhrase(short, full) {
			t.Errorf("%q matches %q", short, full)
		}
	}
	for name, steps := range map[string][]PhraseStep{
		"no steps":       nil,
		"bad slug":       {{Action: ActionPctDestroy, Slug: "lxc:101; reboot"}},
		"unknown verb":   {{Action: "nuke", Slug: "lxc:strong/101"}},
		"too many steps": slices.Repeat([]PhraseStep{rollback, destroy}, MaxPlanSteps),
	} {
		if _, err := PlanPhrase(steps, h); err == nil {
			t.Errorf("%s: PlanPhrase accepted it", name)
		}
	}
}

var phraseTests = []struct {
	got  string
	want bool
}{
	{"destroy lxc:131 k7q2", true},
	{"  destroy lxc:131 k7q2\n", true},
	{"destroy   lxc:131\tk7q2", true},
	{"destroy\u00a0lxc:131 k7q2", true},
	{"Destroy lxc:131 k7q2", true},
	{"DESTROY LXC:131 K7Q2", true},
	{"destroy lxc:131 k7q3", false},
	{"destroy lxc:13 k7q2", false},
	{"destroy lxc:131", false},
	{"destroy lxc:131 k7q2 now", false},
	{"please destroy lxc:131 k7q2", false},
	{"destroylxc:131k7q2", false},
	{"destroy lxc:131 k7q2.", false},
	{"`destroy lxc:131 k7q2`", false},
	{"yes", false},
	{"", false},
	{"destroy lxc:131 \u212a7q2", false}, // Kelvin sign is not k
}

// planPhraseTests are typed against the phrase of a plan that rolls
// lxc:strong/900 back and destroys lxc:strong/101.
var planPhraseTests = []struct {
	got  string
	want bool
}{
	{"rollback lxc:strong/900 destroy lxc:strong/101 k7q2", true},
	{"Rollback  lxc:strong/900\ndestroy lxc:strong/101 K7Q2 ", true},
	{"rollback lxc:strong/900 k7q2", false},
	{"destroy lxc:strong/101 k7q2", false},
	{"rollback lxc:strong/900 destroy lxc:strong/101", false},
	{"destroy lxc:strong/101 rollback lxc:strong/900 k7q2", false},
	{"rollback lxc:strong/900 stop lxc:strong/101 destroy lxc:strong/101 k7q2", false},
	{"rollback lxc:strong/900, destroy lxc:strong/101 k7q2", false},
}

func TestMatchPhrase(t *testing.T) {
	t.Parallel()
	const want = "destroy lxc:131 k7q2"
	for _, tt := range phraseTests {
		if got := MatchPhrase(tt.got, want); got != tt.want {
			t.Errorf("MatchPhrase(%q, %q) = %v, want %v", tt.got, want, got, tt.want)
		}
	}
	const plan = "rollback lxc:strong/900 destroy lxc:strong/101 k7q2"
	for _, tt := range planPhraseTests {
		if got := MatchPhrase(tt.got, plan); got != tt.want {
			t.Errorf("MatchPhrase(%q, %q) = %v, want %v", tt.got, plan, got, tt.want)
		}
	}
	if MatchPhrase("", "") || MatchPhrase(" ", "  ") {
		t.Error("an empty phrase matched")
	}
}

// TestMayBePhrase: every message that matches a phrase passes the cheap
// shape test, and ordinary chat does not.
func TestMayBePhrase(t *testing.T) {
	t.Parallel()
	for _, tt := range phraseTests {
		if tt.want && !MayBePhrase(tt.got) {
			t.Errorf("MayBePhrase(%q) = false for a matching phrase", tt.got)
		}
	}
	for _, tt := range planPhraseTests {
		if tt.want && !MayBePhrase(tt.got) {
			t.Errorf("MayBePhrase(%q) = false for a matching phrase", tt.got)
		}
	}
	for _, s := range []string{"restart jellyfin", "go ahead", "destroy 131", "yes", "list containers", "show lxc:101",
		"rollback lxc:101 to pre-upgrade", "stop lxc:101 and lxc:102 now"} {
		if MayBePhrase(s) {
			t.Errorf("MayBePhrase(%q) = true", s)
		}
	}
}

func FuzzMatchPhrase(f *testing.F) {
	for _, tt := range phraseTests {
		f.Add(tt.got, "destroy lxc:131 k7q2")
	}
	for _, tt := range planPhraseTests {
		f.Add(tt.got, "rollback lxc:strong/900 destroy lxc:strong/101 k7q2")
	}
	f.Fuzz(func(t *testing.T, got, want string) {
		m := MatchPhrase(got, want)
		if MatchPhrase(got, want) != m {
			t.Fatal("MatchPhrase is not deterministic")
		}
		if m && normalizePhrase(got) != normalizePhrase(want) {
			t.Fatalf("MatchPhrase(%q, %q) but they normalise differently", got, want)
		}
		if m && MayBePhrase(want) && !MayBePhrase(got) {
			t.Fatalf("MatchPhrase(%q, %q) but the shape test turns it away", got, want)
		}
		if m && strings.TrimSpace(want) == "" {
			t.Fatalf("empty want %q matched", want)
		}
		if m && !strings.EqualFold(strings.Join(strings.Fields(got), " "), strings.Join(strings.Fields(want), " ")) {
			t.Fatalf("MatchPhrase(%q, %q) matched words that differ beyond case", got, want)
		}
		if p := normalizePhrase(want); p != "" && len(want) <= maxPhraseLen && !MatchPhrase(want, want) {
			t.Fatalf("a phrase does not match itself: %q", want)
		}
	})
}
