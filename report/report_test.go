package report_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/report"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// seeded is a store over a fresh database with the demo fleet.
func seeded(t *testing.T) *store.Store {
	t.Helper()
	st := testenv.Store(t)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySeed(testenv.Context(t), seed); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReportBuild: the daily brief names the day's executions, who
// decided them, the open signals and what is unhealthy; the weekly
// report its trends; both link the status page and invent no LLM cost.
func TestReportBuild(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st := seeded(t)
	now := time.Now()
	x, err := st.CreateExecution(ctx, store.NewExecution{Request: store.Request{
		ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: "service:jellyfin", Params: json.RawMessage(`{}`),
		Steps: []string{"true"}, RiskClass: "reversible_low", PlanHash: strings.Repeat("a", 64), PlanCode: "k7q2",
		State: store.StateAwaitingApproval, RequestedBy: "@op:hs", RequestedVia: "chat", ExpiresAt: now.Add(10 * time.Minute),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, store.Transition{ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateSucceeded,
		Audit:    store.AuditEntry{Actor: "@op2:hs", Action: "test"},
		Decision: &store.Approval{Decision: "approved", DecidedBy: "@op2:hs", Method: "reaction", PlanHash: x.PlanHash, DecidedAt: now}}); err != nil {
		t.Fatal(err)
	}
	gitea, err := st.EntityBySlug(ctx, "service:gitea")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RaiseSignal(ctx, store.NewSignal{EntityID: gitea.ID, Kind: "check:gitea-http", Severity: "critical", Summary: "GET /healthz refused", At: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordCheck(ctx, store.CheckObservation{TargetID: gitea.ID.String(), Health: "unhealthy", Detail: "refused", At: now}); err != nil {
		t.Fatal(err)
	}
	o := report.Options{Now: now.Add(time.Minute), StatusURL: "https://nomos.example.org/"}
	daily, err := report.Build(ctx, st, report.Daily, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**Daily brief**", "1 execution: 1 succeeded", "✅ `k7q2` `restart` `service:jellyfin`: succeeded; asked by @op:hs, approved by @op2:hs",
		"**Signals**: 1 signal open.", "🔴 `service:gitea` `check:gitea-http`: GET /healthz refused, open 1h01m",
		"**Now**: 1 unhealthy.", "🔴 `service:gitea` unhealthy: refused",
		"**Agent**: no sessions. LLM cost: not reported.",
		"[Signals](https://nomos.example.org/signals)",
	} {
		if !strings.Contains(daily.Markdown, want) {
			t.Errorf("the daily brief lacks %q:\n%s", want, daily.Markdown)
		}
	}
	if strings.Contains(daily.Markdown, "backup") {
		t.Errorf("the daily brief speaks of backups, which Nomos does not know:\n%s", daily.Markdown)
	}
	if n := strings.Count(daily.Markdown, "\n"); n > 25 {
		t.Errorf("the daily brief is %d lines, too long for a phone:\n%s", n, daily.Markdown)
	}
	weekly, err := report.Build(ctx, st, report.Weekly, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Weekly report**", "**Most restarted**", "`service:jellyfin`: once", "**Time to recover**", "**Flaky checks**"} {
		if !strings.Contains(weekly.Markdown, want) {
			t.Errorf("the weekly report lacks %q:\n%s", want, weekly.Markdown)
		}
	}
	if _, err := report.Build(ctx, st, "monthly", o); err == nil {
		t.Error("a monthly report was built")
	}
}

// TestBriefShowsStaleChecks: a service whose check went quiet shows in the
// daily brief twice, as its open health.stale signal and as stale now,
// never as healthy.
func TestBriefShowsStaleChecks(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	due, err := st.ClaimDueChecks(ctx, now.Add(-time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		if c.Slug == "caddy-http" {
			if err := st.RecordCheck(ctx, store.CheckObservation{CheckID: c.ID.String(), TargetID: c.TargetID.String(), Health: "healthy", Detail: "200", At: now.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.MarkStale(ctx, now); err != nil {
		t.Fatal(err)
	}
	daily, err := report.Build(ctx, st, report.Daily, report.Options{Now: now.Add(time.Minute), StatusURL: "https://nomos.example.org/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`service:caddy` `health.stale`: no result from caddy-http since", "`service:caddy` stale"} {
		if !strings.Contains(daily.Markdown, want) {
			t.Errorf("the daily brief lacks %q:\n%s", want, daily.Markdown)
		}
	}
}
