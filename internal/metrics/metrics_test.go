package metrics_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomoshq/nomos/internal/metrics"
)

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestEachFamilyRecords: every method feeds its own family, with the
// labels it was given; series that always exist read 0 before anything.
func TestEachFamilyRecords(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, reg)
	for _, want := range []string{
		`nomos_llm_tokens_total{kind="prompt"} 0`,
		`nomos_llm_request_duration_seconds_count{result="error"} 0`,
		`nomos_matrix_send_duration_seconds_count{result="ok"} 0`,
		`nomos_matrix_sync_duration_seconds_count 0`,
	} {
		if !strings.Contains(before, want) {
			t.Errorf("before anything, /metrics lacks %s:\n%s", want, before)
		}
	}

	m.Approval("denied", "destructive", 90*time.Second)
	m.ExecutionEnded("failed", "config_mutation", 3*time.Second)
	m.MatrixSend(metrics.ResultError, 20*time.Millisecond)
	m.MatrixSync(5 * time.Millisecond)
	m.LLMRequest(metrics.ResultOK, 2*time.Second)
	m.LLMTokens(120, 30)
	m.MCPCall("list_lxcs", metrics.ResultRefused)
	got := scrape(t, reg)
	for _, want := range []string{
		`nomos_approval_wait_duration_seconds_sum{decision="denied",risk_class="destructive"} 90`,
		`nomos_execution_duration_seconds_sum{risk_class="config_mutation",state="failed"} 3`,
		`nomos_matrix_send_duration_seconds_count{result="error"} 1`,
		`nomos_matrix_sync_duration_seconds_count 1`,
		`nomos_llm_request_duration_seconds_count{result="ok"} 1`,
		`nomos_llm_tokens_total{kind="prompt"} 120`,
		`nomos_llm_tokens_total{kind="completion"} 30`,
		`nomos_mcp_calls_total{result="refused",tool="list_lxcs"} 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, got)
		}
	}
}

// TestNilRecordsNothing: a part built without Metrics works as before.
func TestNilRecordsNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Approval("approved", "read_only", time.Second)
	m.ExecutionEnded("succeeded", "read_only", time.Second)
	m.MatrixSend(metrics.ResultOK, time.Second)
	m.MatrixSync(time.Second)
	m.LLMRequest(metrics.ResultOK, time.Second)
	m.LLMTokens(1, 1)
	m.MCPCall("list_lxcs", metrics.ResultOK)
}
