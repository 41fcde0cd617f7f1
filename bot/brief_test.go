package bot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"maunium.net/go/mautrix/event"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/report"
	"github.com/nomoshq/nomos/store"
)

// seedBriefFacts gives the brief an execution decided today and an open
// signal.
func (b *bundle) seedBriefFacts(t *testing.T) {
	t.Helper()
	x, err := b.store.CreateExecution(b.ctx, store.NewExecution{Request: store.Request{
		ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: "service:jellyfin", Params: json.RawMessage(`{}`),
		Steps: []string{"true"}, RiskClass: "reversible_low", PlanHash: strings.Repeat("a", 64), PlanCode: "k7q2",
		State: store.StateAwaitingApproval, RequestedBy: b.operator.UserID.String(), RequestedVia: "chat", ExpiresAt: time.Now().Add(time.Hour),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Transition(b.ctx, store.Transition{ID: x.ID, From: []store.ExecutionState{store.StateAwaitingApproval}, To: store.StateSucceeded,
		Audit:    store.AuditEntry{Actor: b.operator.UserID.String(), Action: "test"},
		Decision: &store.Approval{Decision: "approved", DecidedBy: b.operator.UserID.String(), Method: "reaction", PlanHash: x.PlanHash, DecidedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	gitea, err := b.store.EntityBySlug(b.ctx, "service:gitea")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.RaiseSignal(b.ctx, store.NewSignal{EntityID: gitea.ID, Kind: "check:gitea-http", Severity: "critical", Summary: "GET /healthz refused"}); err != nil {
		t.Fatal(err)
	}
}

// TestBriefInTheRoom: "brief" posts the daily brief now, naming the
// day's executions and the open signals, as a rendered notice; "brief
// weekly" the weekly report; a guest is refused.
func TestBriefInTheRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedBriefFacts(t)
	ask := b.say(t, b.operator, "brief", "")
	brief := b.waitFor(t, b.botSays("**Daily brief**", "`k7q2` `restart` `service:jellyfin`: succeeded", "`service:gitea` `check:gitea-http`"))
	m := brief.Content.AsMessage()
	if m.MsgType != event.MsgNotice || m.RelatesTo.GetReplyTo() != ask || !strings.Contains(m.FormattedBody, "<strong>Daily brief</strong>") {
		t.Errorf("the brief is a %s replying to %q with HTML %q; want a notice replying to %s, its Markdown rendered", m.MsgType, m.RelatesTo.GetReplyTo(), m.FormattedBody, ask)
	}
	b.say(t, b.operator, "weekly report", "")
	b.waitFor(t, b.botSays("**Weekly report**", "**Most restarted**", "`service:jellyfin`: once"))
	b.say(t, b.guest, "brief", "")
	b.waitFor(t, b.botSays(b.guest.UserID.String(), "only the operators and the readers"))
	if n := countContaining(b.botBodies(t), "Daily brief"); n != 1 {
		t.Errorf("%d daily briefs in the room, want the operator's one", n)
	}
}

// TestBriefScheduleAcrossFailover drives the daily schedule with an
// injected clock over two bots leading in turn against one database and
// one homeserver: the day's brief is posted once by the leader, not again
// by the standby that takes over, and a brief that fell due while no bot
// led is posted once, late, by the next leader.
func TestBriefScheduleAcrossFailover(t *testing.T) {
	t.Parallel()
	// A day in the past, so that the bot's first sync (stamped by this
	// clock) is older than every message it must handle.
	day := time.Now().UTC().Add(-48 * time.Hour).Truncate(24 * time.Hour)
	clock := testenv.NewClock(day.Add(7*time.Hour + 59*time.Minute))
	sched, err := report.ParseSchedule("08:00", "off", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	tune := func(c *bot.Config) {
		c.Clock, c.Briefs, c.ScheduleTick = clock.Now, &sched, 50*time.Millisecond
	}
	b := setup(t, withAlerts(), withConfig(tune), func(b *bundle) { b.lead = true })
	b.seedBriefFacts(t)
	first, firstElector := b.stopBot, b.elector
	until(t, "the first bot leads", firstElector.Leading)
	b.startBot(t) // the standby
	second, secondElector := b.stopBot, b.elector

	briefs := func() int { return countContaining(b.botBodies(t), "**Daily brief**") }
	if n := briefs(); n != 0 {
		t.Fatalf("%d briefs before 08:00", n)
	}
	clock.Set(day.Add(8*time.Hour + 30*time.Second))
	b.waitFor(t, b.botSays("**Daily brief**", "`k7q2`", "`service:gitea`"))

	// The leader dies; the standby takes over in the same period.
	first()
	until(t, "the standby leads", secondElector.Leading)
	clock.Set(day.Add(9 * time.Hour))
	time.Sleep(time.Second) // many passes of the schedule
	if n := briefs(); n != 1 {
		t.Fatalf("%d daily briefs after the failover, want 1", n)
	}

	// No bot leads when the next one falls due; the next leader posts it
	// once, late.
	second()
	clock.Set(day.Add(24*time.Hour + 11*time.Hour))
	b.startBot(t)
	until(t, "the missed brief is posted", func() bool { return briefs() == 2 })
	time.Sleep(time.Second)
	if n := briefs(); n != 2 {
		t.Errorf("%d daily briefs after the missed one, want 2", n)
	}
	var posted int
	if err := b.storeQuery(t, `SELECT count(*) FROM report_briefs WHERE kind = 'daily' AND event_id IS NOT NULL`, &posted); err != nil || posted != 2 {
		t.Errorf("report_briefs records %d posted daily briefs (%v), want 2", posted, err)
	}
}

// until polls cond until it holds, failing the test after a minute.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
