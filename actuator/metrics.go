package actuator

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomoshq/nomos/tasks"
)

// Kinds of signed request, as the kind label says them.
const (
	kindOrder     = "order"
	kindProbe     = "probe"
	kindInventory = "inventory"
	kindPreview   = "preview"
)

// refusals are every reason a signed request is refused for, so each
// series exists, at 0, before the first refusal: an alert on a forged
// order sees a number from the start.
var refusals = []tasks.Refusal{
	tasks.RefusedBadSignature, tasks.RefusedExpired, tasks.RefusedMalformed, tasks.RefusedReplay,
	tasks.RefusedPlanMismatch, tasks.RefusedWrongActuator, tasks.RefusedTTLTooLong,
	tasks.RefusedWrongSite, tasks.RefusedNotApproved, tasks.RefusedUnconfirmed,
}

var (
	descJournalExecutions = prometheus.NewDesc("nomos_actuator_journal_executions",
		"Executions the journal has recorded as started.", nil, nil)
	descJournalUnfinished = prometheus.NewDesc("nomos_actuator_journal_unfinished",
		"Executions the journal saw start and not finish: running now, or to be reported outcome_unknown at the next start.", nil, nil)
	descJournalBytes = prometheus.NewDesc("nomos_actuator_journal_bytes",
		"Size of the journal file.", nil, nil)
)

// sshResults are the result label's values, one per way an SSH session
// ends (timedRunner.Run).
var sshResults = []string{"ok", "exit_status", "not_sent", "error"}

// metrics are the actuator's own figures, which only it sees: what it
// verified and refused, its journal and its SSH sessions.
type metrics struct {
	verified *prometheus.CounterVec
	refused  *prometheus.CounterVec
	ssh      *prometheus.HistogramVec
	// heldBack counts reads on the probe queue (probes, inventories,
	// previews) not run when they came, because their host held its share
	// of the probe workers (probeHosts).
	heldBack *prometheus.CounterVec
}

// Reasons a probe is held back, as the reason label says them.
const (
	heldHostBusy         = "host_busy"
	heldHostNotAnswering = "host_not_answering"
)

func newMetrics() *metrics {
	m := &metrics{
		verified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomos_actuator_requests_verified_total",
			Help: "Signed requests (orders, probes, inventory reads and previews) that verified and were carried out, by kind.",
		}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomos_actuator_requests_refused_total",
			Help: "Signed requests refused without running anything, by kind and reason; bad_signature means something other than the bot wrote to the queue.",
		}, []string{"kind", "reason"}),
		ssh: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nomos_actuator_ssh_session_duration_seconds",
			Help: "Time each SSH session took, from asking for it (connecting when need be) to the command's end, by result " +
				"(ok, exit_status for a non-zero exit, not_sent when nothing reached the host, error when the outcome was lost).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600},
		}, []string{"result"}),
		heldBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomos_actuator_probes_held_back_total",
			Help: "Reads on the probe queue (probes, inventories, previews) not run when they came because their host held its share of the probe workers, by reason: " +
				"host_busy (put back on the queue to wait) or host_not_answering (answered at once, not sent: a probe as unhealthy, an inventory or a preview with the error).",
		}, []string{"reason"}),
	}
	m.heldBack.WithLabelValues(heldHostBusy)
	m.heldBack.WithLabelValues(heldHostNotAnswering)
	for _, k := range []string{kindOrder, kindProbe, kindInventory, kindPreview} {
		m.verified.WithLabelValues(k)
	}
	for _, r := range refusals {
		m.refused.WithLabelValues(kindOrder, string(r))
	}
	for _, r := range sshResults {
		m.ssh.WithLabelValues(r)
	}
	return m
}

func (m *metrics) verify(kind string) { m.verified.WithLabelValues(kind).Inc() }

func (m *metrics) refuse(kind string, why tasks.Refusal) {
	m.refused.WithLabelValues(kind, string(why)).Inc()
}

// metricsCollector serves the actuator's metrics, reading the journal at
// each scrape.
type metricsCollector struct{ a *Actuator }

// Collector returns the actuator's metrics for a /metrics registry:
// signed requests verified and refused, the journal's size and SSH
// session latency. Labels carry no host, id or command.
func (a *Actuator) Collector() prometheus.Collector { return metricsCollector{a} }

func (c metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	c.a.metrics.verified.Describe(ch)
	c.a.metrics.refused.Describe(ch)
	c.a.metrics.ssh.Describe(ch)
	c.a.metrics.heldBack.Describe(ch)
	ch <- descJournalExecutions
	ch <- descJournalUnfinished
	ch <- descJournalBytes
}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	c.a.metrics.verified.Collect(ch)
	c.a.metrics.refused.Collect(ch)
	c.a.metrics.ssh.Collect(ch)
	c.a.metrics.heldBack.Collect(ch)
	started, unfinished := c.a.journal.counts()
	ch <- prometheus.MustNewConstMetric(descJournalExecutions, prometheus.GaugeValue, float64(started))
	ch <- prometheus.MustNewConstMetric(descJournalUnfinished, prometheus.GaugeValue, float64(unfinished))
	if fi, err := os.Stat(c.a.journal.path); err == nil {
		ch <- prometheus.MustNewConstMetric(descJournalBytes, prometheus.GaugeValue, float64(fi.Size()))
	}
}

// counts says how many executions started and how many of them did not
// finish.
func (j *journal) counts() (started, unfinished int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range j.order {
		if _, ok := j.finished[id]; !ok {
			unfinished++
		}
	}
	return len(j.order), unfinished
}

// timedRunner records how long each command's SSH session takes.
type timedRunner struct {
	Runner
	hist *prometheus.HistogramVec
}

var _ Runner = timedRunner{}

func (r timedRunner) Run(ctx context.Context, addr, command string, stdout, stderr io.Writer) (int, error) {
	start := time.Now()
	code, err := r.Runner.Run(ctx, addr, command, stdout, stderr)
	result := "ok"
	switch {
	case errors.Is(err, ErrNotSent):
		result = "not_sent"
	case err != nil:
		result = "error"
	case code != 0:
		result = "exit_status"
	}
	r.hist.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return code, err
}
