package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

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
