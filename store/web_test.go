package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/nomoshq/nomos/store"
)

func newExecution(t *testing.T, s *store.Store, target, by string, state store.ExecutionState) store.Execution {
	t.Helper()
	x, err := s.CreateExecution(t.Context(), store.NewExecution{
		Request: store.Request{
			ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: target, Params: json.RawMessage(`{}`),
			Steps: []string{"true"}, RiskClass: "reversible_low", PlanHash: strings.Repeat("a", 64),
			PlanCode: "abcd", State: state, RequestedBy: by, RequestedVia: "chat",
			ExpiresAt: time.Now().Add(time.Hour),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestExecutionPageKeyset: pages are disjoint, newest first, cover every
// match once, and a row added meanwhile does not shift them.
func TestExecutionPageKeyset(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	var want []uuid.UUID
	for i := range 7 {
		x := newExecution(t, s, "service:jellyfin", fmt.Sprintf("@op%d:x", i%2), store.StateAwaitingApproval)
		want = append(want, x.ID)
	}
	newExecution(t, s, "service:gitea", "@op0:x", store.StateAwaitingApproval)
	slices.Reverse(want)
	var got []uuid.UUID
	q := store.ExecutionQuery{Target: "service:jellyfin", Limit: 3}
	for pages := 0; ; pages++ {
		rows, next, err := s.ExecutionPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rows {
			got = append(got, x.ID)
		}
		if pages == 0 { // a newer row must not shift the next page
			newExecution(t, s, "service:jellyfin", "@op0:x", store.StateAwaitingApproval)
		}
		if next == nil {
			break
		}
		q.After = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged executions (-want +got):\n%s", diff)
	}
	rows, _, err := s.ExecutionPage(ctx, store.ExecutionQuery{RequestedBy: "@op1:x", States: []store.ExecutionState{store.StateAwaitingApproval}})
	if err != nil || len(rows) != 3 {
		t.Errorf("requested by @op1 = %d rows, %v; want 3", len(rows), err)
	}
	if rows, _, _ := s.ExecutionPage(ctx, store.ExecutionQuery{RiskClass: "destructive"}); len(rows) != 0 {
		t.Errorf("destructive = %d rows, want none", len(rows))
	}
}

func TestAuditPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	for range 5 {
		x := newExecution(t, s, "service:jellyfin", "@op:x", store.StateAwaitingApproval)
		if _, err := s.Transition(ctx, store.Transition{ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval},
			To: store.StateDenied, Audit: store.AuditEntry{Actor: "@boss:x", Action: "execution.denied"}}); err != nil {
			t.Fatal(err)
		}
	}
	newExecution(t, s, "service:gitea", "@op:x", store.StateAwaitingApproval)
	var ids []int64
	q := store.AuditQuery{Entity: "service:jellyfin", Limit: 4}
	for {
		rows, next, err := s.AuditPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.EntitySlug != "service:jellyfin" {
				t.Errorf("row %d is about %s", r.ID, r.EntitySlug)
			}
			ids = append(ids, r.ID)
		}
		if next == 0 {
			break
		}
		q.Before = next
	}
	if len(ids) != 10 || !slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }) {
		t.Errorf("jellyfin's audit = %v, want 10 rows newest first", ids)
	}
	denied, _, err := s.AuditPage(ctx, store.AuditQuery{Actor: "@boss:x", Action: "execution.denied"})
	if err != nil || len(denied) != 5 {
		t.Errorf("denials by @boss = %d, %v; want 5", len(denied), err)
	}
	future, _, err := s.AuditPage(ctx, store.AuditQuery{From: time.Now().Add(time.Hour)})
	if err != nil || len(future) != 0 {
		t.Errorf("rows from the future = %d, %v", len(future), err)
	}
}

// TestSignalHistoryCountsFlaps: a check that fails, recovers and fails
// again within the window is counted twice; an old raise is not.
func TestSignalHistoryCountsFlaps(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	jf := entityID(t, s, "service:jellyfin")
	now := time.Now()
	for _, at := range []time.Duration{-5 * time.Hour, -40 * time.Minute, -10 * time.Minute} {
		if _, _, err := s.RaiseSignal(ctx, store.NewSignal{EntityID: jf.ID, Kind: "check:jellyfin-http", Severity: "critical", Summary: "down", At: now.Add(at)}); err != nil {
			t.Fatal(err)
		}
		if at != -10*time.Minute {
			if err := s.ResolveSignal(ctx, jf.ID, "check:jellyfin-http", now.Add(at+time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.SignalHistory(ctx, now.Add(-24*time.Hour), now.Add(-time.Hour), 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Open() || got[0].Raises != 2 {
		t.Fatalf("history = %+v, want the open signal first counting 2 raises in the hour", got)
	}
}
