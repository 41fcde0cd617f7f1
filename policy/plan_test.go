package policy

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func mustPlan(t *testing.T, p Params, tg Target) Plan {
	t.Helper()
	plan, err := NewPlan(p, tg)
	if err != nil {
		t.Fatalf("NewPlan(%+v, %s): %v", p, tg.Slug, err)
	}
	return plan
}

func mustHash(t *testing.T, p Plan) string {
	t.Helper()
	h, err := PlanHash(p)
	if err != nil {
		t.Fatalf("PlanHash: %v", err)
	}
	return h
}

func TestPlanHashStable(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, PctDestroyParams{}, lxc131)
	h := mustHash(t, plan)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("PlanHash = %q, want 64 hex digits", h)
	}
	// The encoding is part of the contract between bot and actuator: a
	// change here must be deliberate (and bump planHashVersion). This value
	// was computed independently from the documented encoding:
	//   version 13:nomos-plan-v1\n action 11:pct_destroy\n ... step.0 15:pct destroy 131\n
	const want = "ab904803f23a2cc947951d5be0ee5e20c36309e8882cf520464718d0a7273ac4"
	if h != want {
		t.Errorf("PlanHash(destroy lxc:131) = %s, want %s", h, want)
	}
	if again := mustHash(t, mustPlan(t, PctDestroyParams{}, lxc131)); again != h {
		t.Errorf("PlanHash is not deterministic: %s then %s", h, again)
	}
	// Normalisation happens before hashing: the same plan however spelled.
	a := mustHash(t, mustPlan(t, SystemctlParams{Verb: VerbReload, Unit: "caddy"}, lxc101))
	b := mustHash(t, mustPlan(t, SystemctlParams{Verb: VerbReload, Unit: "caddy.service"}, lxc101))
	if a != b {
		t.Errorf("caddy and caddy.service hash differently")
	}
}

func TestPlanHashChangesWithEveryField(t *testing.T) {
	t.Parallel()
	base := mustPlan(t, PctExecParams{Command: "df -h"}, lxc101)
	baseHash := mustHash(t, base)
	variants := map[string]Plan{}
	add := func(name string, mutate func(*Plan)) {
		p := base
		p.Target.Services = nil
		p.Steps = append([]string(nil), base.Steps...)
		mutate(&p)
		variants[name] = p
	}
	add("command", func(p *Plan) { p.Params = PctExecParams{Command: "df -H"} })
	add("target id", func(p *Plan) { p.Target.ID = "other-id" })
	add("target host", func(p *Plan) { p.Target.Host = "hubris" })
	add("target slug and vmid", func(p *Plan) { p.Target.Slug, p.Target.VMID = "lxc:102", 102 })
	add("steps", func(p *Plan) { p.Steps[0] += " " })
	add("extra step", func(p *Plan) { p.Steps = append(p.Steps, "") })
	add("split step", func(p *Plan) { p.Steps = []string{p.Steps[0][:5], p.Steps[0][5:]} })
	seen := map[string]string{baseHash: "base"}
	for name, p := range variants {
		h := mustHash(t, p)
		if prev, ok := seen[h]; ok {
			t.Errorf("%s hashes like %s", name, prev)
		}
		seen[h] = name
	}
	// Services are not part of the plan.
	p := base
	p.Target.Services = []string{"jellyfin"}
	if mustHash(t, p) != baseHash {
		t.Errorf("Target.Services changed the hash")
	}
	// The action is part of the plan even with identical JSON.
	start := mustHash(t, mustPlan(t, PctStartParams{}, lxc101))
	stop := mustPlan(t, PctStopParams{}, lxc101)
	stop.Steps = []string{"pct start 101"}
	if mustHash(t, stop) == start {
		t.Errorf("pct_start and pct_stop with the same steps hash alike")
	}
}

func TestPlanHashRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		plan     Plan
		sentinel error
	}{
		{"no params", Plan{Target: lxc101, Steps: []string{"x"}}, ErrInvalidPlan},
		{"no steps", Plan{Target: lxc101, Params: PctStartParams{}}, ErrInvalidPlan},
		{"bad params", Plan{Target: lxc101, Params: PctExecParams{Command: ""}, Steps: []string{"x"}}, ErrInvalidParams},
		{"wrong target", Plan{Target: hostStrong, Params: PctStartParams{}, Steps: []string{"x"}}, ErrInvalidTarget},
	}
	for _, tt := range tests {
		if _, err := PlanHash(tt.plan); !errors.Is(err, tt.sentinel) {
			t.Errorf("%s: PlanHash error %v, want %v", tt.name, err, tt.sentinel)
		}
	}
}

func TestPlanCode(t *testing.T) {
	t.Parallel()
	h := mustHash(t, mustPlan(t, PctDestroyParams{}, lxc131))
	code, err := PlanCode(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != PlanCodeLen || strings.Trim(code, codeAlphabet) != "" {
		t.Errorf("PlanCode = %q", code)
	}
	if strings.ContainsAny(codeAlphabet, "01oli") || len(codeAlphabet) != 31 {
		t.Errorf("code alphabet %q has ambiguous characters", codeAlphabet)
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("0", 63), strings.Repeat("g", 64)} {
		if _, err := PlanCode(bad); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("PlanCode(%q) = %v", bad, err)
		}
	}
	// Codes spread: 2000 different plans give nearly 2000 different codes.
	codes := map[string]bool{}
	for i := range 2000 {
		p := mustPlan(t, PctSnapshotParams{Name: "s" + strings.Repeat("x", i%30) + string(rune('a'+i%26))}, lxc101)
		p.Target.ID = "id-" + string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + strings.Repeat("z", i/676)
		c, _ := PlanCode(mustHash(t, p))
		codes[c] = true
	}
	if len(codes) < 1990 {
		t.Errorf("2000 plans gave only %d distinct codes", len(codes))
	}
}
