package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

// hostile is markup that would run if a page ever let it through.
const hostile = `<img src=x onerror=alert(1)>`

// activity is what populate created, for tests to look at.
type activity struct {
	pending, running, failed store.Execution
	session                  uuid.UUID
}

// populate gives the seeded fleet some history: check results with
// metrics, a signal, an agent session whose plans are pending, running
// and failed, and a knowledge document, with hostile text in a plan's
// reason, a document and an execution's output.
func (b *bundle) populate(t testing.TB) activity {
	t.Helper()
	return b.populateWith(t, hostile)
}

// populateWith is populate with mark where the hostile markup goes.
func (b *bundle) populateWith(t testing.TB, hostile string) activity {
	t.Helper()
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	seed.Knowledge = append(seed.Knowledge, fleetseed.Doc{Slug: "hostile-doc", Title: "Jellyfin transcoding " + hostile, Kind: "doc",
		Tags: []string{"jellyfin"}, Entities: []string{"service:jellyfin"}, Body: "Jellyfin transcoding stalls; the fix was " + hostile + " nothing."})
	if _, err := b.st.ApplySeed(b.ctx, seed); err != nil {
		t.Fatal(err)
	}
	// Every check answers; jellyfin's fails, with a hostile detail.
	now := time.Now()
	due, err := b.st.ClaimDueChecks(b.ctx, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range due {
		ck := c.ID
		health, detail := "healthy", "ok"
		if c.Slug == "jellyfin-http" {
			health, detail = "unhealthy", "GET /health: 502 "+hostile
		}
		for i := range 6 {
			err := b.st.RecordCheck(b.ctx, store.CheckObservation{CheckID: ck.String(), TargetID: c.TargetID.String(),
				Health: health, Detail: detail, At: now.Add(time.Duration(i-6) * time.Minute),
				Metrics: map[string]float64{"latency_ms": float64(20 + i*i)}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	sess, err := b.st.EnsureAgentSession(b.ctx, "!ops:nomos.test", "")
	if err != nil {
		t.Fatal(err)
	}
	calls := json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"request_execution","arguments":"{\"action\":\"restart\",\"target\":\"service:jellyfin\",\"reason\":\"` + strings.ReplaceAll(hostile, `"`, `\"`) + `\"}"}}]`)
	if _, err := b.st.AppendAgentMessages(b.ctx, sess.ID,
		store.AgentMessage{Role: store.AgentRoleUser, Content: "jellyfin is down again"},
		store.AgentMessage{Role: store.AgentRoleAssistant, Content: "", ToolCalls: calls},
		store.AgentMessage{Role: store.AgentRoleTool, ToolCallID: "call_1", Content: "requested: plan abcd " + hostile},
	); err != nil {
		t.Fatal(err)
	}
	link := &store.SessionLink{SessionID: sess.ID}
	mk := func(state store.ExecutionState, reason string) store.Execution {
		x, err := b.st.CreateExecution(b.ctx, store.NewExecution{
			Request: store.Request{
				ID: uuid.Must(uuid.NewV7()), Action: "restart", TargetSlug: "service:jellyfin",
				Params:    json.RawMessage(`{}`),
				Steps:     []string{"pct exec 101 -- systemctl restart jellyfin.service"},
				RiskClass: "reversible_low", PlanHash: strings.Repeat("b", 64), PlanCode: "wxyz",
				State: state, RequestedBy: "agent", RequestedVia: "agent", Reason: reason,
				ExpiresAt: now.Add(20 * time.Minute),
			},
			Session: link,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a := activity{session: sess.ID}
	a.pending = mk(store.StateAwaitingApproval, "jellyfin-http fails: "+hostile)
	a.running = mk(store.StateRunning, "retry")
	a.failed = mk(store.StateRunning, "again")
	tail := "restarting\n" + hostile + "\n"
	errText := "exit 1"
	b.move(t, a.failed.ID, store.StateRunning, store.StateFailed, func(tr *store.Transition) { tr.ProgressTail, tr.Error = &tail, &errText })
	return a
}

// pagesOf lists a path for every page the populated fleet has.
func pagesOf(a activity) []string {
	return []string{
		"/", "/e/host:strong", "/e/lxc:strong/101", "/e/service:jellyfin", "/executions", "/executions?state=failed&risk=reversible_low",
		"/executions/" + a.pending.ID.String(), "/executions/" + a.failed.ID.String(), "/signals", "/agent",
		"/agent/" + a.session.String(), "/audit", "/audit?actor=agent&entity=service:jellyfin", "/knowledge?q=jellyfin+transcoding",
		"/events", "/events?view=flat",
	}
}

func TestEveryPageShowsHostileTextAsText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.populate(t)
	escaped := "&lt;img src=x onerror=alert(1)&gt;"
	for path, want := range map[string][]string{
		"/":                                    {"jellyfin-http: GET /health: 502 " + escaped, "awaiting_approval", "running", "unhealthy"},
		"/executions/" + a.pending.ID.String(): {"jellyfin-http fails: " + escaped, "agent session"},
		"/executions/" + a.failed.ID.String():  {escaped, "execution.failed"},
		"/e/service:jellyfin":                  {"Jellyfin transcoding " + escaped, "latency_ms", "<svg class=\"spark\"", "jellyfin-http", "lxc:strong/101"},
		"/knowledge?q=jellyfin+transcoding":    {"Jellyfin transcoding " + escaped, "<mark>", "service:jellyfin"},
		"/agent/" + a.session.String():         {"request_execution", "answers call_1", escaped},
		"/signals":                             {"check:jellyfin-http", "jellyfin-http (http)"},
	} {
		body := b.get(t, path, http.StatusOK)
		containsAll(t, path, body, want...)
		containsNone(t, path, body, hostile, "onerror=alert(1)>")
	}
	for _, p := range pagesOf(a) {
		body := b.get(t, p, http.StatusOK)
		if strings.Contains(body, hostile) {
			t.Errorf("%s carries the markup unescaped", p)
		}
	}
}

// TestQueriesDoNotGrowWithTheFleet counts each page's queries on the demo
// fleet, then on a fleet with 300 more containers, services, checks and
// executions: the counts are the same, and small.
func TestQueriesDoNotGrowWithTheFleet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.populate(t)
	small := map[string]int64{}
	for _, p := range pagesOf(a) {
		small[p] = b.count(t, p)
	}
	if _, err := b.st.ApplySeed(b.ctx, generatedFleet(300, 2)); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		x := b.plan(t, fmt.Sprintf("service:app%d", 1001+i), "", store.StateRunning)
		b.move(t, x.ID, store.StateRunning, store.StateSucceeded, nil)
	}
	const most = 8
	for _, p := range pagesOf(a) {
		big := b.count(t, p)
		t.Logf("%-60s %d queries", p, big)
		if big != small[p] {
			t.Errorf("%s: %d queries on the demo fleet, %d on a bigger one", p, small[p], big)
		}
		if big > most {
			t.Errorf("%s: %d queries, want at most %d", p, big, most)
		}
	}
}

// generatedFleet is n containers over ten hosts, each running one service
// watched by checksPer checks.
func generatedFleet(n, checksPer int) *fleetseed.Seed {
	seed := &fleetseed.Seed{}
	const hosts = 10
	vmid := 1000
	for h := range hosts {
		host := fleetseed.Host{Name: fmt.Sprintf("node%02d", h), SSH: fmt.Sprintf("127.0.0.1:%d", 2200+h), Cores: 32, MemoryMB: 131072, Storage: "local-zfs"}
		for i := range n / hosts {
			vmid++
			svc := fmt.Sprintf("app%d", vmid)
			host.Containers = append(host.Containers, fleetseed.Container{
				VMID: vmid, Hostname: fmt.Sprintf("ct%d", vmid), IP: fmt.Sprintf("10.%d.%d.%d/16", 50+h, i/250, 1+i%250),
				Gateway: fmt.Sprintf("10.%d.0.1", 50+h), Cores: 1, MemoryMB: 512, DiskGB: 8, Status: "running",
				Services: []fleetseed.Service{{Name: svc, Unit: "app.service", Port: 8080, HealthPath: "/"}},
			})
			for c := range checksPer {
				seed.Checks = append(seed.Checks, fleetseed.Check{Slug: fmt.Sprintf("%s-%d", svc, c), Target: "service:" + svc, Kind: "tcp",
					Interval: 60, Spec: map[string]any{"port": 8080 + c}})
			}
		}
		seed.Hosts = append(seed.Hosts, host)
	}
	return seed
}
