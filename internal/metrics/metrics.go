// Package metrics holds the Prometheus collectors that the bot's parts
// feed as they work: approval and execution latency (executions), Matrix
// send and sync latency (bot), LLM request latency and tokens
// (bot/agent) and MCP tool calls (mcpserver). The status page reads the
// rest of /metrics from the database at each scrape; these are the
// figures only the running process sees.
//
// One Metrics is made per process, handed to each part's Config and
// registered with the /metrics registry. A nil *Metrics records nothing,
// so a part built without one needs no stand-in. Labels take values from
// fixed sets only (states, classes, tool names the server registered), so
// nothing a user types can grow the number of series.
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a request, as the result label says them.
const (
	ResultOK    = "ok"
	ResultError = "error"
	// ResultRefused is an MCP call the server refused to run: a read-scope
	// token calling a tool that requests an execution.
	ResultRefused = "refused"
)

// Metrics is the set of collectors. It is a prometheus.Collector: register
// it once.
type Metrics struct {
	approval   *prometheus.HistogramVec
	execution  *prometheus.HistogramVec
	matrixSend *prometheus.HistogramVec
	matrixSync prometheus.Histogram
	llm        *prometheus.HistogramVec
	llmTokens  *prometheus.CounterVec
	mcpCalls   *prometheus.CounterVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// New returns a Metrics with every collector empty.
func New() *Metrics {
	m := &Metrics{
		approval: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomos_approval_wait_duration_seconds",
			Help:    "Time from a plan's card to an operator's decision on it, by decision and risk class.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200},
		}, []string{"decision", "risk_class"}),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomos_execution_duration_seconds",
			Help:    "Time from an execution's approval, when its order is signed and sent, to its end, by end state and risk class.",
			Buckets: []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"state", "risk_class"}),
		matrixSend: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomos_matrix_send_duration_seconds",
			Help:    "Time the homeserver took to accept each event the bot sent (cards, edits, replies, reactions), by result.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
		matrixSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nomos_matrix_sync_duration_seconds",
			Help:    "Time the bot took to handle each /sync response (decrypting and dispatching its events); the long-poll wait is not counted.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
		llm: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nomos_llm_request_duration_seconds",
			Help:    "Time each request to the language model took, by result.",
			Buckets: []float64{0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120},
		}, []string{"result"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomos_llm_tokens_total",
			Help: "Tokens the language model reported using, by kind (prompt or completion).",
		}, []string{"kind"}),
		mcpCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomos_mcp_calls_total",
			Help: "MCP tool calls, from the agent and external clients, by tool and result (ok, error or refused).",
		}, []string{"tool", "result"}),
	}
	// Series that always exist read 0 before anything happens, so an
	// alert on them sees a number rather than nothing.
	for _, r := range []string{ResultOK, ResultError} {
		m.matrixSend.WithLabelValues(r)
		m.llm.WithLabelValues(r)
	}
	m.llmTokens.WithLabelValues("prompt")
	m.llmTokens.WithLabelValues("completion")
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.approval, m.execution, m.matrixSend, m.matrixSync, m.llm, m.llmTokens, m.mcpCalls}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// BuildInfo returns nomos_build_info, the constant 1 labelled with the
// binary's version and commit and the Go release that built it: the
// series a dashboard joins on to say which build each process runs.
func BuildInfo(version, commit string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "nomos_build_info",
		Help:        "Always 1; its labels say which build of Nomos the process runs (version, commit, goversion).",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// Approval records an operator's decision on a plan, d after its card.
func (m *Metrics) Approval(decision, riskClass string, d time.Duration) {
	if m == nil {
		return
	}
	m.approval.WithLabelValues(decision, riskClass).Observe(max(d, 0).Seconds())
}

// ExecutionEnded records an execution that ended in state, d after its
// approval.
func (m *Metrics) ExecutionEnded(state, riskClass string, d time.Duration) {
	if m == nil {
		return
	}
	m.execution.WithLabelValues(state, riskClass).Observe(max(d, 0).Seconds())
}

// MatrixSend records one event sent to the homeserver.
func (m *Metrics) MatrixSend(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.matrixSend.WithLabelValues(result).Observe(d.Seconds())
}

// MatrixSync records the handling of one /sync response.
func (m *Metrics) MatrixSync(d time.Duration) {
	if m == nil {
		return
	}
	m.matrixSync.Observe(d.Seconds())
}

// LLMRequest records one request to the language model.
func (m *Metrics) LLMRequest(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.llm.WithLabelValues(result).Observe(d.Seconds())
}

// LLMTokens adds the tokens one completion reported.
func (m *Metrics) LLMTokens(prompt, completion int64) {
	if m == nil {
		return
	}
	if prompt > 0 {
		m.llmTokens.WithLabelValues("prompt").Add(float64(prompt))
	}
	if completion > 0 {
		m.llmTokens.WithLabelValues("completion").Add(float64(completion))
	}
}

// MCPCall counts one call of a registered MCP tool.
func (m *Metrics) MCPCall(tool, result string) {
	if m == nil {
		return
	}
	m.mcpCalls.WithLabelValues(tool, result).Inc()
}
