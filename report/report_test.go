package report_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/inventory"
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

// TestBriefJudgesBackups: the daily brief judges each guest's backups as
// the last inventory read them, worst group first: a job selects it and
// it has none; its newest is too old, with its age; no job selects it;
// its job's storage could not be listed. A guest only a pool's job may
// select (/cluster/backup lists no pool's members), a template and a
// guest whose host could not read its backup jobs are not judged, nor
// counted. Without backup_max_age, or without facts, there is no line.
func TestBriefJudgesBackups(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st := seeded(t)
	now := time.Now().UTC().Truncate(time.Second)
	brief := func(maxAge time.Duration) string {
		t.Helper()
		r, err := report.Build(ctx, st, report.Daily, report.Options{Now: now, BackupMaxAge: maxAge})
		if err != nil {
			t.Fatal(err)
		}
		return r.Markdown
	}
	if md := brief(36 * time.Hour); strings.Contains(md, "Backups") {
		t.Errorf("no inventory has read a backup, yet the brief judges them:\n%s", md)
	}

	job := []string{"backup-nightly"}
	runs, err := st.ClaimInventoryRuns(ctx, now, 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	applied := false
	for _, r := range runs {
		if r.Host != "hubris" {
			continue
		}
		cs := []inventory.Container{
			{VMID: 110, Status: "running", Backup: &inventory.Backup{Jobs: job, Last: now.Add(-time.Hour)}},
			{VMID: 111, Status: "running", Backup: &inventory.Backup{Jobs: []string{}, ByPool: []string{"backup-pool"}}},
			{VMID: 112, Status: "running", Backup: &inventory.Backup{Jobs: job, Unread: []string{"nas"}}},
			{VMID: 113, Status: "stopped", Template: true, Backup: &inventory.Backup{Jobs: []string{}}},
			{VMID: 114, Status: "running"},
			{VMID: 131, Status: "stopped", Backup: &inventory.Backup{Jobs: []string{}, Last: now.Add(-time.Hour)}},
		}
		vms := []inventory.VM{
			{VMID: 200, Status: "running", Backup: &inventory.Backup{Jobs: job, Last: now.Add(-50 * time.Hour)}},
			{VMID: 201, Status: "running", Backup: &inventory.Backup{Jobs: job}},
		}
		if _, err := st.ApplyInventory(ctx, store.InventoryObservation{RunID: r.ID, HostID: r.HostID, At: now, Containers: cs, VMs: vms, Horizon: time.Hour}); err != nil {
			t.Fatal(err)
		}
		applied = true
	}
	if !applied {
		t.Fatal("no inventory run of hubris to apply")
	}
	got := brief(36 * time.Hour)
	want := strings.Join([]string{
		"**Backups**: 4 of 6 guests without one from the last 36h.",
		"- 🔴 no backup, though a job selects it: `vm:hubris/201` opnsense",
		"- 🟠 newest too old: `vm:hubris/200` homeassistant 2d02h",
		"- ⚪ in no backup job: `lxc:hubris/131` teddycloud",
		"- ❔ backup storage not read: `lxc:hubris/112` adguard",
	}, "\n")
	if !strings.Contains(got, want) {
		t.Errorf("the daily brief's backups:\n%s\nwant:\n%s", got, want)
	}
	if got := brief(0); strings.Contains(got, "Backups") {
		t.Errorf("without backup_max_age the brief judges backups:\n%s", got)
	}
	weekly, err := report.Build(ctx, st, report.Weekly, report.Options{Now: now, BackupMaxAge: 36 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(weekly.Markdown, "Backups") {
		t.Errorf("the weekly report judges backups; the daily brief does:\n%s", weekly.Markdown)
	}
}
