package mcpserver

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// The structuredContent of the tools that return one, besides Requested.
// Each is its tool's declared output schema, and mcp-go checks every
// result against it before a client sees it.

// HealthSummary is get_health_summary's structured result.
type HealthSummary struct {
	// ByType counts entities by type, then by health; checks are left out.
	ByType map[string]map[string]int `json:"by_type" jsonschema:"entity counts by type, then by health; checks are left out"`
	// Total counts every entity of ByType by health.
	Total map[string]int `json:"total" jsonschema:"entity counts by health, every type together"`
	// NotHealthy are the entities not healthy, worst first, at most
	// maxNotHealthy of them.
	NotHealthy []EntityHealth `json:"not_healthy" jsonschema:"the entities that are not healthy, worst first"`
	// NotHealthyCount is how many there are in all.
	NotHealthyCount int `json:"not_healthy_count" jsonschema:"how many entities are not healthy, listed or not"`
}

// EntityHealth is one entity's health.
type EntityHealth struct {
	Slug   string `json:"slug"`
	Health string `json:"health"`
}

// maxNotHealthy bounds HealthSummary.NotHealthy.
const maxNotHealthy = 100

func healthSummary(byType map[string]map[string]int, es []store.Entity) HealthSummary {
	out := HealthSummary{ByType: map[string]map[string]int{}, Total: map[string]int{}, NotHealthy: []EntityHealth{}}
	for t, counts := range byType {
		out.ByType[t] = counts
	}
	for _, counts := range byType {
		for h, n := range counts {
			out.Total[h] += n
		}
	}
	var bad []store.Entity
	for _, e := range es {
		if e.Lifecycle != "destroyed" && e.Health != "healthy" {
			bad = append(bad, e)
		}
	}
	sort.SliceStable(bad, func(i, j int) bool { return healthOrder[bad[i].Health] < healthOrder[bad[j].Health] })
	out.NotHealthyCount = len(bad)
	for _, e := range bad[:min(len(bad), maxNotHealthy)] {
		out.NotHealthy = append(out.NotHealthy, EntityHealth{Slug: e.Slug, Health: e.Health})
	}
	return out
}

// ExecutionStatus is get_execution's structured result: the execution's
// state and outcome, without its output, which the text shows.
type ExecutionStatus struct {
	ExecutionID  string `json:"execution_id"`
	Action       string `json:"action"`
	Target       string `json:"target"`
	State        string `json:"state"`
	RiskClass    string `json:"risk_class"`
	RequestedBy  string `json:"requested_by"`
	RequestedVia string `json:"requested_via"`
	OnBehalfOf   string `json:"on_behalf_of,omitempty"`
	RoomID       string `json:"room_id,omitempty"`
	// Reason is redacted, as the text shows it.
	Reason string `json:"reason,omitempty"`
	// Params are exactly what runs.
	Params    json.RawMessage `json:"params,omitempty" jsonschema:"the action's params, exactly what runs"`
	CreatedAt string          `json:"created_at" jsonschema:"when it was requested, RFC 3339"`
	// PlanID names the plan a step belongs to.
	PlanID   string `json:"plan_id,omitempty"`
	Position int    `json:"position,omitempty" jsonschema:"the step's place in its plan, from 1"`
	// Decision is approved or denied, once decided.
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
	// Result is the actuator's report, once it ran.
	Result *ExecutionResult `json:"result,omitempty"`
	// Error is why it failed, redacted.
	Error string `json:"error,omitempty"`
}

// ExecutionResult is the outcome the actuator reported.
type ExecutionResult struct {
	Status      string `json:"status"`
	ExitCode    int    `json:"exit_code"`
	FailedPhase string `json:"failed_phase,omitempty"`
	// Snapshot names the snapshot taken first, which pct_rollback restores.
	Snapshot string `json:"snapshot,omitempty"`
}

func executionStatus(x store.Execution) ExecutionStatus {
	out := ExecutionStatus{
		ExecutionID: x.ID.String(), Action: x.Action, Target: x.TargetSlug, State: string(x.State), RiskClass: x.RiskClass,
		RequestedBy: x.RequestedBy, RequestedVia: x.RequestedVia, OnBehalfOf: x.OnBehalfOf, RoomID: x.RoomID,
		Reason: oneLine(redact.String(x.Reason), 500), CreatedAt: x.CreatedAt.UTC().Format(time.RFC3339),
		Error: oneLine(redact.String(x.Error), 600),
	}
	if len(x.Params) > 0 && string(x.Params) != "{}" && json.Valid(x.Params) {
		out.Params = json.RawMessage(x.Params)
	}
	if x.PlanID != nil {
		out.PlanID, out.Position = x.PlanID.String(), x.Position
	}
	if a := x.Approval; a != nil {
		out.Decision, out.DecidedBy = a.Decision, a.DecidedBy
	}
	var r tasks.Result
	if len(x.Result) > 0 && json.Unmarshal(x.Result, &r) == nil {
		out.Result = &ExecutionResult{Status: string(r.Status), ExitCode: r.ExitCode, FailedPhase: r.FailedPhase, Snapshot: r.Snapshot}
	}
	return out
}
