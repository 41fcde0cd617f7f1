package bot_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomoshq/nomos/bot"
	"github.com/nomoshq/nomos/bot/agent"
	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/internal/metrics"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/web"
)

// TestMetricsFollowTheWork: what the bot's parts do shows on the status
// page's /metrics, each family fed by the action it measures (a question
// to the agent, a tool call, a card, an approval, an execution), and
// /readyz reads the sync loop as healthy once it syncs, and says how long
// ago it last synced.
func TestMetricsFollowTheWork(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	llm := testenv.NewScriptedLLM(t)
	llm.Script(
		testenv.ToolCall("list_lxcs", `{}`),
		testenv.Reply("All containers are healthy except teddycloud (131), which is stopped."),
	)
	b := setup(t, withLLM(llm), func(b *bundle) {
		b.tune = func(c *bot.Config) { c.Metrics = m }
		b.agentTune = func(c *agent.Config) { c.Metrics = m }
		b.mcpTune = func(c *mcpserver.Config) { c.Metrics = m }
		b.execTune = func(c *executions.Config) { c.Metrics = m }
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	page, err := web.New(web.Config{Store: b.store, Registry: reg, Logger: testenv.Logger(t),
		Ready: []web.ReadyCheck{{Name: "homeserver_sync", Check: b.bot.SyncHealth}}, LastSync: b.bot.LastSync})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	defer srv.Close()

	b.say(t, b.operator, "Which containers are unhealthy?", "")
	b.waitFor(t, b.botSays("teddycloud (131), which is stopped"))
	b.say(t, b.operator, "restart jellyfin", "")
	card := b.waitFor(t, b.botSays("restart jellyfin", "awaiting approval"))
	if _, err := b.operator.Client.SendReaction(b.ctx, b.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, b.cardEdited(card.ID, "succeeded"))

	for _, want := range []struct {
		series string
		least  float64
	}{
		{`nomos_llm_request_duration_seconds_count{result="ok"}`, 2},
		{`nomos_llm_tokens_total{kind="prompt"}`, 1},
		{`nomos_llm_tokens_total{kind="completion"}`, 1},
		{`nomos_mcp_calls_total{result="ok",tool="list_lxcs"}`, 1},
		{`nomos_matrix_send_duration_seconds_count{result="ok"}`, 2},
		{`nomos_matrix_sync_duration_seconds_count`, 1},
		{`nomos_approval_wait_duration_seconds_count{decision="approved",risk_class="reversible_low"}`, 1},
		{`nomos_execution_duration_seconds_count{risk_class="reversible_low",state="succeeded"}`, 1},
	} {
		// The execution's end is recorded just after its new state is
		// written, which may be just after the card shows it.
		waitSample(t, srv.URL+"/metrics", want.series, want.least)
	}
	body := scrape(t, srv.URL+"/metrics")
	for _, series := range []string{`nomos_llm_request_duration_seconds_count{result="error"}`, `nomos_matrix_send_duration_seconds_count{result="error"}`} {
		if got, ok := sample(body, series); !ok || got != 0 {
			t.Errorf("/metrics: %s = %v (found %v), want 0: nothing failed", series, got, ok)
		}
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"homeserver_sync":"ok"`) ||
		!strings.Contains(string(body), `"last_sync_age_seconds":`) {
		t.Errorf("/readyz = %d %s, want the sync loop ok and the age of its last answer for the watchdog", resp.StatusCode, body)
	}
}

func scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// waitSample scrapes url until series reads at least least.
func waitSample(t testing.TB, url, series string, least float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		body := scrape(t, url)
		got, ok := sample(body, series)
		if ok && got >= least {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("/metrics: %s = %v (found %v), want at least %v", series, got, ok, least)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sample reads one series from a /metrics text body.
func sample(body, series string) (float64, bool) {
	for line := range strings.Lines(body) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && name == series {
			f, err := strconv.ParseFloat(val, 64)
			return f, err == nil
		}
	}
	return 0, false
}
