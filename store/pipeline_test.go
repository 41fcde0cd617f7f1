package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// TestCreateBatchedFailureLosesNothing: the insert, its audit row and the
// notification go to Postgres in one batch with the read that follows.
// A second request under an existing id fails there, as a whole: the
// caller gets the error, and the first execution and its one audit row
// are as they were.
func TestCreateBatchedFailureLosesNothing(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	first := newExecution(t, s, "service:jellyfin", "@op:x", store.StateAwaitingApproval)
	_, err := s.CreateExecution(ctx, store.NewExecution{
		Request: store.Request{
			ID: first.ID, Action: "stop", TargetSlug: "service:gitea", Params: json.RawMessage(`{}`),
			Steps: []string{"false"}, RiskClass: "reversible_low", PlanHash: strings.Repeat("b", 64),
			PlanCode: "wxyz", State: store.StateAwaitingApproval, RequestedBy: "@mallory:x", RequestedVia: "chat",
			ExpiresAt: time.Now().Add(time.Hour),
		},
	}, nil)
	if err == nil {
		t.Fatal("a second execution under an existing id was created")
	}
	got, err := s.GetExecution(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{first.Action, first.TargetSlug, first.RequestedBy}, []string{got.Action, got.TargetSlug, got.RequestedBy}); diff != "" {
		t.Errorf("the first execution changed (-want +got):\n%s", diff)
	}
	audit, err := s.AuditFor(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	var requested []uuid.UUID
	for _, a := range audit {
		if a.Action == "execution.requested" {
			requested = append(requested, *a.ExecutionID)
		}
	}
	if diff := cmp.Diff([]uuid.UUID{first.ID}, requested); diff != "" {
		t.Errorf("requested audit rows (-want +got):\n%s", diff)
	}
}

// TestTransitionRefusedLeavesNothing: a transition is sent as two
// batches, the decision and the update in the first, so a refused one has
// already inserted its approval row when it learns that the update
// changed nothing. It must roll that back: on a pool of one connection,
// where a transaction left open would be what the next read sees, an
// approval of a cancelled execution is refused with its current state
// and leaves no decision and no audit row; a second decision is refused
// naming the first, which stays the only one.
func TestTransitionRefusedLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, store.Config{URL: testenv.DatabaseURL(t), MaxConns: 1, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	approve := func(x store.Execution, by string) (store.Execution, error) {
		return s.Transition(ctx, store.Transition{
			ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateApproved,
			Decision: &store.Approval{Decision: "approved", DecidedBy: by, Method: "reaction", PlanHash: x.PlanHash, DecidedAt: time.Now()},
			Audit:    store.AuditEntry{Actor: by, Action: "execution.approved"},
		})
	}
	actions := func(id uuid.UUID) []string {
		t.Helper()
		rows, err := s.AuditFor(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range rows {
			out = append(out, a.Action+" by "+a.Actor)
		}
		return out
	}

	cancelled := newExecution(t, s, "service:jellyfin", "@op:x", store.StateAwaitingApproval)
	if _, err := s.Transition(ctx, store.Transition{
		ID: cancelled.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateCancelled,
		Audit: store.AuditEntry{Actor: "@op:x", Action: "execution.cancelled"},
	}); err != nil {
		t.Fatal(err)
	}
	_, err = approve(cancelled, "@mallory:x")
	var conflict *store.StateConflictError
	if !errors.As(err, &conflict) || conflict.Current.State != store.StateCancelled {
		t.Fatalf("approving a cancelled execution: got %v, want a state conflict naming cancelled", err)
	}
	got, err := s.GetExecution(ctx, cancelled.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateCancelled || got.Approval != nil {
		t.Errorf("after a refused approval the execution is %s with decision %+v, want cancelled with none", got.State, got.Approval)
	}
	if diff := cmp.Diff([]string{"execution.requested by @op:x", "execution.cancelled by @op:x"}, actions(cancelled.ID)); diff != "" {
		t.Errorf("audit of the cancelled execution (-want +got):\n%s", diff)
	}

	decided := newExecution(t, s, "service:gitea", "@op:x", store.StateAwaitingApproval)
	if _, err := approve(decided, "@alice:x"); err != nil {
		t.Fatal(err)
	}
	_, err = approve(decided, "@mallory:x")
	var already *store.AlreadyDecidedError
	if !errors.As(err, &already) || already.Existing.DecidedBy != "@alice:x" {
		t.Fatalf("a second approval: got %v, want already decided by @alice:x", err)
	}
	got, err = s.GetExecution(ctx, decided.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateApproved || got.Approval == nil || got.Approval.DecidedBy != "@alice:x" {
		t.Errorf("after a second approval the execution is %s decided by %+v, want approved by @alice:x", got.State, got.Approval)
	}
	if diff := cmp.Diff([]string{"execution.requested by @op:x", "execution.approved by @alice:x"}, actions(decided.ID)); diff != "" {
		t.Errorf("audit of the approved execution (-want +got):\n%s", diff)
	}
}
