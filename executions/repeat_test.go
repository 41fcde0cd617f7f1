package executions_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/store"
)

// TestRepeatedRequestPointsAtTheWaitingPlan: a second request for the same
// change (same action, target and parameters) while the first plan waits
// makes no second plan, from any route, and names the first; other
// parameters, another target or a decided plan make a new one.
func TestRepeatedRequestPointsAtTheWaitingPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.request(t, "restart", "jellyfin", "")
	for _, via := range []string{executions.ViaChat, executions.ViaMCP, executions.ViaAgent} {
		_, err := b.svc.Request(b.ctx, executions.Request{Action: "restart", Target: "service:jellyfin",
			RequestedBy: "@bob:localhost", Via: via, RoomID: "!ops:localhost", Reason: "again"})
		var waiting *executions.AlreadyWaitingError
		if !errors.As(err, &waiting) || !errors.Is(err, executions.ErrAlreadyWaiting) {
			t.Fatalf("via %s: err %v, want *AlreadyWaitingError", via, err)
		}
		pdiff(t, "the waiting plan's code, via "+via, first.Execution.PlanCode, waiting.Waiting.PlanCode)
		pdiff(t, "the waiting plan, via "+via, first.Execution.ID, waiting.Waiting.ID)
	}
	xs, err := b.store.ListExecutions(b.ctx, store.ExecutionFilter{States: []store.ExecutionState{store.StateAwaitingApproval}})
	if err != nil {
		t.Fatal(err)
	}
	pdiff(t, "plans waiting", 1, len(xs))

	// Another verb on the same unit is another change.
	reload := b.request(t, "systemctl", "service:jellyfin", `{"verb":"reload"}`)
	if reload.Execution.ID == first.Execution.ID {
		t.Fatal("a reload is not the restart")
	}
	// Once the first is decided, the same request makes a new plan.
	if _, err := b.svc.Deny(b.ctx, executions.Decision{ExecutionID: first.Execution.ID, By: operator, Method: policy.MethodReaction}); err != nil {
		t.Fatal(err)
	}
	again := b.request(t, "restart", "jellyfin", "")
	if again.Execution.ID == first.Execution.ID || again.Execution.State != store.StateAwaitingApproval {
		t.Fatalf("after a denial: %s %s, want a new waiting plan", again.Execution.ID, again.Execution.State)
	}
}

// TestRepeatedRequestAfterExpiry: a waiting plan whose approval window
// has closed (the reconciler has not run yet) is expired, and the repeat
// makes a fresh plan instead of pointing at one nobody can approve.
func TestRepeatedRequestAfterExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.request(t, "restart", "jellyfin", "")
	b.clock.Add(time.Until(first.Execution.ExpiresAt) + time.Hour)
	again := b.request(t, "restart", "jellyfin", "")
	if again.Execution.ID == first.Execution.ID {
		t.Fatal("the repeat pointed at an expired plan")
	}
	old, err := b.store.GetExecution(b.ctx, first.Execution.ID)
	if err != nil {
		t.Fatal(err)
	}
	pdiff(t, "the old plan's state", store.StateExpired, old.State)
}

// TestSameRequestAtOnceMakesOnePlan: identical requests racing each other
// (an operator double-sending, the agent and an MCP client at once) yield
// one plan; every other caller is pointed at it. The database's partial
// unique index decides, not a read before the insert.
func TestSameRequestAtOnceMakesOnePlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	var wg sync.WaitGroup
	made := make(chan string, n)
	pointed := make(chan string, n)
	failed := make(chan error, n)
	for range n {
		wg.Go(func() {
			p, err := b.svc.Request(b.ctx, executions.Request{Action: "pct_reboot", Target: "101",
				Params: json.RawMessage(`{}`), RequestedBy: operator, Via: executions.ViaChat, RoomID: "!ops:localhost"})
			var waiting *executions.AlreadyWaitingError
			switch {
			case errors.As(err, &waiting):
				pointed <- waiting.Waiting.PlanCode
			case err != nil:
				failed <- err
			default:
				made <- p.Execution.PlanCode
			}
		})
	}
	wg.Wait()
	close(made)
	close(pointed)
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	var codes []string
	for c := range made {
		codes = append(codes, c)
	}
	if len(codes) != 1 {
		t.Fatalf("%d plans made for one change: %v", len(codes), codes)
	}
	for c := range pointed {
		pdiff(t, "pointed at", codes[0], c)
	}
}
