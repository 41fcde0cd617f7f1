package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/store"
)

// TestRequestExecutionTakesAPlanOfSteps: the agent asks for stop then
// destroy as one plan. Both steps are recorded in order under one plan
// at its riskiest step's class, the first waiting for the operator and
// the second for the first; the agent is the requester, acting for the
// operator.
func TestRequestExecutionTakesAPlanOfSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := mcpserver.WithCaller(b.ctx, mcpserver.Caller{Via: mcpserver.ViaAgent, RequestedBy: operator})
	req := mcp.CallToolRequest{}
	req.Params.Name = "request_execution"
	req.Params.Arguments = map[string]any{"target": "lxc:strong/104", "reason": "the operator wants it gone",
		"steps": []any{map[string]any{"action": "pct_stop"}, map[string]any{"action": "pct_destroy", "params": map[string]any{}}}}
	res, err := b.client.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("a plan of steps was refused: %s", text)
	}
	var got mcpserver.Requested
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 2 || got.ExecutionID != got.Steps[0].ExecutionID || got.RiskClass != "destructive" || got.State != "awaiting_approval" {
		t.Fatalf("structured result %s", raw)
	}
	containsAll(t, "request_execution", text, "a plan of 2 steps (destructive)", "One approval covers every step",
		"type its confirmation phrase", "step 1: pct_stop on lxc:strong/104", "step 2: pct_destroy on lxc:strong/104", "End your turn now")
	head, err := b.store.GetExecution(b.ctx, uuid.MustParse(got.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := b.store.PlanSteps(b.ctx, head.ID)
	if err != nil || len(steps) != 2 {
		t.Fatalf("plan steps %d, %v", len(steps), err)
	}
	for i, want := range []store.ExecutionState{store.StateAwaitingApproval, store.StateWaiting} {
		x := steps[i]
		if x.State != want || x.RequestedBy != "agent" || x.OnBehalfOf != operator || x.Reason != "the operator wants it gone" {
			t.Errorf("step %d: %s by %s for %q (%q)", i+1, x.State, x.RequestedBy, x.OnBehalfOf, x.Reason)
		}
	}
	desc := b.ok(t, "get_execution", map[string]any{"id": steps[1].ID.String()})
	containsAll(t, "get_execution", desc, "step 2 of 2 of plan "+head.ID.String()+" (destructive; approved as one)")

	// The steps may come as a JSON string, as models sometimes send them.
	b.ok(t, "request_execution", map[string]any{"target": "jellyfin", "reason": "twice",
		"steps": `[{"action": "restart"}, {"action": "restart"}]`})
}

// TestRequestExecutionRefusesMalformedPlans: every malformed list of steps
// is refused with what to fix, and nothing is queued.
func TestRequestExecutionRefusesMalformedPlans(t *testing.T) {
	t.Parallel()
	b := setup(t)
	eleven := make([]any, 11)
	for i := range eleven {
		eleven[i] = map[string]any{"action": "restart", "target": "jellyfin"}
	}
	for name, tc := range map[string]struct {
		args map[string]any
		want string
	}{
		"both forms":       {map[string]any{"action": "restart", "target": "jellyfin", "steps": []any{map[string]any{"action": "restart"}}}, "either an action or a list of steps"},
		"too many":         {map[string]any{"target": "jellyfin", "steps": eleven}, "at most 10 steps"},
		"not a list":       {map[string]any{"target": "jellyfin", "steps": map[string]any{"action": "restart"}}, "steps must be a list"},
		"no action":        {map[string]any{"target": "jellyfin", "steps": []any{map[string]any{"target": "gitea"}}}, "step 1 needs an action"},
		"bad step params":  {map[string]any{"target": "101", "steps": []any{map[string]any{"action": "pct_exec", "params": "rm"}}}, "step 1: params must be an object"},
		"unknown target":   {map[string]any{"steps": []any{map[string]any{"action": "restart", "target": "jellyfin"}, map[string]any{"action": "restart", "target": "plex"}}}, `step 2 (restart): unknown target`},
		"string not JSON":  {map[string]any{"target": "jellyfin", "steps": "restart then restart"}, "steps must be a list"},
		"destroy a host":   {map[string]any{"steps": []any{map[string]any{"action": "pct_stop", "target": "lxc:strong/104"}, map[string]any{"action": "pct_destroy", "target": "host:strong"}}}, "step 2 (pct_destroy)"},
		"one empty target": {map[string]any{"steps": []any{map[string]any{"action": "restart"}}}, "nothing was queued"},
	} {
		tc.args["reason"] = "testing"
		text := b.fails(t, "request_execution", tc.args)
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s: %q does not say %q", name, text, tc.want)
		}
	}
	if n := executionCount(t, b); n != 0 {
		t.Errorf("%d executions after refused plans", n)
	}
}
