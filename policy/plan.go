package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
)

// Plan is what an operator approves: an action's parameters, the resolved
// target and the exact steps. Build it with NewPlan.
type Plan struct {
	Target Target
	Params Params
	Steps  []string
}

// NewPlan validates and normalises the parameters, checks the target and
// renders the steps.
func NewPlan(p Params, t Target) (Plan, error) {
	p, err := ValidateParams(p)
	if err != nil {
		return Plan{}, err
	}
	steps, err := Render(p, t)
	if err != nil {
		return Plan{}, err
	}
	return Plan{Target: t, Params: p, Steps: steps}, nil
}

// Action returns the plan's action.
func (p Plan) Action() Action {
	if p.Params == nil {
		return ""
	}
	return p.Params.Action()
}

// planHashVersion is part of every hash, so a change of encoding can never
// make an old approval match a new plan.
const planHashVersion = "nomos-plan-v1"

// PlanHash returns the hex SHA-256 of a canonical encoding of the plan: the
// action; the target's type, id, slug, host, vmid and unit; the parameters
// as canonical JSON (sorted keys); and each step. Every field is written with
// its length, so no two different plans encode alike. Approval binds to this
// hash: if any of it changes, the plan is new.
func PlanHash(p Plan) (string, error) {
	if p.Params == nil {
		return "", fmt.Errorf("%w: no parameters", ErrInvalidPlan)
	}
	if len(p.Steps) == 0 {
		return "", fmt.Errorf("%w: no steps", ErrInvalidPlan)
	}
	params, err := MarshalParams(p.Params)
	if err != nil {
		return "", err
	}
	if err := checkTarget(p.Action(), p.Target); err != nil {
		return "", err
	}
	h := sha256.New()
	field(h, "version", planHashVersion)
	field(h, "action", string(p.Action()))
	field(h, "target.type", string(p.Target.Type))
	field(h, "target.id", p.Target.ID)
	field(h, "target.slug", p.Target.Slug)
	field(h, "target.host", p.Target.Host)
	field(h, "target.vmid", strconv.Itoa(p.Target.VMID))
	field(h, "target.unit", p.Target.Unit)
	if p.Target.SnapshotBlocker != "" {
		// Only when set, so every plan hashed before it existed still
		// hashes the same.
		field(h, "target.snapshot_blocker", p.Target.SnapshotBlocker)
	}
	field(h, "params", string(params))
	field(h, "steps", strconv.Itoa(len(p.Steps)))
	for i, s := range p.Steps {
		field(h, "step."+strconv.Itoa(i), s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func field(h hash.Hash, name, value string) {
	fmt.Fprintf(h, "%s %d:%s\n", name, len(value), value)
}

// codeAlphabet has no 0/o, 1/l/i: easy to read off a phone and type back.
const codeAlphabet = "23456789abcdefghjkmnpqrstuvwxyz"

// PlanCodeLen is the length of a plan code.
const PlanCodeLen = 4

// PlanCode derives the short code for typed confirmation phrases from a plan
// hash: four characters of lowercase letters and digits, without 0, o, 1, l
// or i. There are 31^4 (about 920,000) codes.
func PlanCode(planHash string) (string, error) {
	b, err := hex.DecodeString(planHash)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("%w: plan hash must be 64 hex digits, got %s", ErrInvalidPlan, quoted(planHash))
	}
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	code := make([]byte, PlanCodeLen)
	for i := range code {
		code[i] = codeAlphabet[v%uint64(len(codeAlphabet))]
		v /= uint64(len(codeAlphabet))
	}
	return string(code), nil
}

// stepsHashVersion is part of every hash over a plan's steps.
const stepsHashVersion = "nomos-plan-steps-v1"

// MaxPlanSteps bounds how many steps one plan may have.
const MaxPlanSteps = 10

// StepsHash returns the hex SHA-256 over the hashes of a plan's steps, in
// order: the hash one approval of a plan of several steps is bound to. It
// covers how many steps there are and where each one stands, so a step
// added, dropped, changed or moved makes another plan. Each step hash is
// a PlanHash.
func StepsHash(stepHashes []string) (string, error) {
	if len(stepHashes) < 2 || len(stepHashes) > MaxPlanSteps {
		return "", fmt.Errorf("%w: a plan of several steps has 2 to %d, got %d", ErrInvalidPlan, MaxPlanSteps, len(stepHashes))
	}
	h := sha256.New()
	field(h, "version", stepsHashVersion)
	field(h, "steps", strconv.Itoa(len(stepHashes)))
	for i, s := range stepHashes {
		if b, err := hex.DecodeString(s); err != nil || len(b) != sha256.Size {
			return "", fmt.Errorf("%w: step %d's hash must be 64 hex digits, got %s", ErrInvalidPlan, i+1, quoted(s))
		}
		field(h, "step."+strconv.Itoa(i), s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
