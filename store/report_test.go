package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/nomoshq/nomos/inventory"
	"github.com/nomoshq/nomos/store"
)

// reportExecution creates an execution of action on target in state at
// the env's clock, decided by approver when one is given.
func (e *discoveryEnv) reportExecution(t *testing.T, action, target, params string, state store.ExecutionState, approver string) store.Execution {
	t.Helper()
	x, err := e.s.CreateExecution(e.ctx, store.NewExecution{Request: store.Request{
		ID: uuid.Must(uuid.NewV7()), Action: action, TargetSlug: target, Params: json.RawMessage(params),
		Steps: []string{"true"}, RiskClass: "reversible_low", PlanHash: strings.Repeat("a", 64), PlanCode: "abcd",
		State: store.StateAwaitingApproval, RequestedBy: "@op:hs", RequestedVia: "chat", ExpiresAt: e.now.Add(time.Hour),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if state == store.StateAwaitingApproval {
		return x
	}
	tr := store.Transition{ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: state,
		Audit: store.AuditEntry{Actor: "@op:hs", Action: "test." + string(state)}}
	if approver != "" {
		tr.Decision = &store.Approval{Decision: "approved", DecidedBy: approver, Method: "reaction", PlanHash: x.PlanHash, DecidedAt: e.now}
		if state == store.StateDenied {
			tr.Decision.Decision = "denied"
		}
	}
	if x, err = e.s.Transition(e.ctx, tr); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestReportQueries: the brief's queries over seeded executions,
// signals and inventories see the window they are given and nothing
// older.
func TestReportQueries(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	start := e.now
	// Two days ago: outside a daily window, inside a weekly one.
	e.now = start.Add(-48 * time.Hour)
	e.reportExecution(t, "restart", "service:gitea", `{}`, store.StateSucceeded, "@op:hs")
	e.now = start
	since := start.Add(-24 * time.Hour)

	e.reportExecution(t, "restart", "service:jellyfin", `{}`, store.StateSucceeded, "@op2:hs")
	e.reportExecution(t, "systemctl", "service:jellyfin", `{"verb":"restart"}`, store.StateSucceeded, "@op2:hs")
	e.reportExecution(t, "restart", "service:gitea", `{}`, store.StateFailed, "@op:hs")
	e.reportExecution(t, "restart", "service:caddy", `{}`, store.StateDenied, "@op2:hs")
	pending := e.reportExecution(t, "restart", "service:postgres", `{}`, store.StateAwaitingApproval, "")

	states, err := e.s.ExecutionStatesSince(e.ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	wantStates := []store.StateCount{{store.StateSucceeded, 2}, {store.StateAwaitingApproval, 1}, {store.StateDenied, 1}, {store.StateFailed, 1}}
	if diff := gocmp.Diff(wantStates, states); diff != "" {
		t.Errorf("ExecutionStatesSince (-want +got):\n%s", diff)
	}
	plans, err := e.s.PlansSince(e.ctx, since, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 5 || plans[0].ID != pending.ID || plans[1].Approval == nil || plans[1].Approval.DecidedBy != "@op2:hs" || plans[1].Approval.Decision != "denied" {
		t.Errorf("PlansSince: %d plans, newest %+v then %+v; want 5, newest the pending one, then the denial by @op2", len(plans), plans[0].Request, plans[1].Approval)
	}

	jf := entityID(t, e.s, "service:jellyfin")
	gt := entityID(t, e.s, "service:gitea")
	for i := range 2 { // jellyfin's check flaps twice: 4 flips
		at := start.Add(-time.Duration(10-i) * time.Hour)
		if _, _, err := e.s.RaiseSignal(e.ctx, store.NewSignal{EntityID: jf.ID, Kind: "check:jellyfin-http", Severity: "critical", Summary: "down", At: at}); err != nil {
			t.Fatal(err)
		}
		if err := e.s.ResolveSignal(e.ctx, jf.ID, "check:jellyfin-http", at.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// gitea's check failed once and is still open: one flip, no flap.
	if _, _, err := e.s.RaiseSignal(e.ctx, store.NewSignal{EntityID: gt.ID, Kind: "check:gitea-http", Severity: "warning", Summary: "slow", At: start.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	flaps, err := e.s.FlappingSignals(e.ctx, since, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.SignalFlap{{EntitySlug: "service:jellyfin", Kind: "check:jellyfin-http", Times: 2}}, flaps); diff != "" {
		t.Errorf("FlappingSignals (-want +got):\n%s", diff)
	}
	flips, err := e.s.CheckFlipsSince(e.ctx, since, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.TargetCount{{Slug: "jellyfin-http", Count: 4}}, flips); diff != "" {
		t.Errorf("CheckFlipsSince (-want +got):\n%s", diff)
	}
	recov, err := e.s.RecoveriesSince(e.ctx, since, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.Recovery{{EntitySlug: "service:jellyfin", Recovered: 2, Mean: 10 * time.Minute}}, recov); diff != "" {
		t.Errorf("RecoveriesSince (-want +got):\n%s", diff)
	}

	restarts, err := e.s.RestartsSince(e.ctx, since, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.TargetCount{{Slug: "service:jellyfin", Count: 2}}, restarts); diff != "" {
		t.Errorf("RestartsSince a day (-want +got):\n%s", diff)
	}
	restarts, err = e.s.RestartsSince(e.ctx, start.Add(-7*24*time.Hour), 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.TargetCount{{Slug: "service:jellyfin", Count: 2}, {Slug: "service:gitea", Count: 1}}, restarts); diff != "" {
		t.Errorf("RestartsSince a week (-want +got):\n%s", diff)
	}

	// An inventory finds a new container on strong.
	cs := append(strong(), inventory.Container{VMID: 151, Status: "running", Hostname: "scratch"})
	e.apply(t, e.run(t, "strong"), cs)
	changes, err := e.s.InventoryChangesSince(e.ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Host != "strong" || len(changes[0].New) != 1 || changes[0].New[0].VMID != 151 {
		t.Errorf("InventoryChangesSince = %+v, want one run on strong finding CT 151", changes)
	}
	if later, err := e.s.InventoryChangesSince(e.ctx, e.now.Add(time.Minute)); err != nil || len(later) != 0 {
		t.Errorf("InventoryChangesSince after the run = %+v, %v; want none", later, err)
	}

	if err := e.s.RecordCheck(e.ctx, store.CheckObservation{TargetID: gt.ID.String(), Health: "degraded", Detail: "slow", At: e.now}); err != nil {
		t.Fatal(err)
	}
	problems, err := e.s.HealthProblems(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]store.HealthProblem{{Slug: "service:gitea", Health: "degraded", Detail: "slow"}}, problems); diff != "" {
		t.Errorf("HealthProblems (-want +got):\n%s", diff)
	}
}

// TestBriefClaimedOnce: one claim per kind and period; an unposted claim
// is given back, a posted one is kept.
func TestBriefClaimedOnce(t *testing.T) {
	t.Parallel()
	e := discoverySetup(t)
	claim := func(kind, period string) bool {
		t.Helper()
		ok, err := e.s.ClaimBrief(e.ctx, kind, period)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("daily", "2030-01-07") || claim("daily", "2030-01-07") {
		t.Fatal("a daily brief was claimed twice, or not at all")
	}
	if !claim("weekly", "2030-01-07") || !claim("daily", "2030-01-08") {
		t.Fatal("another kind or period shares a claim")
	}
	if err := e.s.UnclaimBrief(e.ctx, "daily", "2030-01-07"); err != nil {
		t.Fatal(err)
	}
	if !claim("daily", "2030-01-07") {
		t.Fatal("an unclaimed brief cannot be claimed again")
	}
	if err := e.s.SetBriefEvent(e.ctx, "daily", "2030-01-07", "!room", "$ev"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.UnclaimBrief(e.ctx, "daily", "2030-01-07"); err != nil {
		t.Fatal(err)
	}
	if claim("daily", "2030-01-07") {
		t.Error("a posted brief was given back and claimed again")
	}
}
