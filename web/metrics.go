package web

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// QueueInspector reads asynq queues; *asynq.Inspector satisfies it.
type QueueInspector interface {
	Queues() ([]string, error)
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

var _ QueueInspector = (*asynq.Inspector)(nil)

var (
	descExecutions = prometheus.NewDesc("nomos_executions", "Executions by state and risk class.", []string{"state", "risk_class"}, nil)
	descSignals    = prometheus.NewDesc("nomos_signals_open", "Open signals by severity.", []string{"severity"}, nil)
	descEntities   = prometheus.NewDesc("nomos_entities", "Live hosts, LXCs and services by type and health.", []string{"type", "health"}, nil)
	descStale      = prometheus.NewDesc("nomos_stale_targets", "Checked targets whose checks stopped answering.", nil, nil)
	descQueueTasks = prometheus.NewDesc("nomos_queue_tasks", "Tasks in each asynq queue by state.", []string{"queue", "state"}, nil)
	descQueueAge   = prometheus.NewDesc("nomos_queue_oldest_pending_seconds", "Age of the oldest pending task in each asynq queue.", []string{"queue"}, nil)
	descStoreUp    = prometheus.NewDesc("nomos_store_up", "1 when the last scrape could read the database.", nil, nil)
	descQueueUp    = prometheus.NewDesc("nomos_queue_up", "1 when the last scrape could read the asynq queues.", nil, nil)
	descSSE        = prometheus.NewDesc("nomos_web_live_clients", "Pages following live updates.", nil, nil)
	descSSEDropped = prometheus.NewDesc("nomos_web_live_dropped_total", "Live clients dropped for falling behind.", nil, nil)
)

// opsCollector reads the database and the queues on each scrape, so
// /metrics is as fresh as the page and costs nothing between scrapes.
type opsCollector struct{ s *Server }

func (c opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExecutions, descSignals, descEntities, descStale, descQueueTasks, descQueueAge, descStoreUp, descQueueUp, descSSE, descSSEDropped} {
		ch <- d
	}
}

func (c opsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := c.s
	clients, dropped := s.hub.stats()
	ch <- prometheus.MustNewConstMetric(descSSE, prometheus.GaugeValue, float64(clients))
	ch <- prometheus.MustNewConstMetric(descSSEDropped, prometheus.CounterValue, float64(dropped))

	counts, err := s.store.CountOps(ctx)
	if err != nil {
		s.logger.Warn("metrics: read the database", "err", err)
		ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, 0)
	} else {
		ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, 1)
		for _, x := range counts.Executions {
			ch <- prometheus.MustNewConstMetric(descExecutions, prometheus.GaugeValue, float64(x.Count), string(x.State), x.RiskClass)
		}
		for _, sev := range []string{"critical", "warning", "info"} {
			ch <- prometheus.MustNewConstMetric(descSignals, prometheus.GaugeValue, float64(counts.OpenSignals[sev]), sev)
		}
		stale := 0
		for _, h := range counts.Health {
			ch <- prometheus.MustNewConstMetric(descEntities, prometheus.GaugeValue, float64(h.Count), h.Type, h.Health)
			if h.Health == "stale" {
				stale += h.Count
			}
		}
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, float64(stale))
	}
	if s.cfg.Queues == nil {
		return
	}
	if err := c.queues(ch); err != nil {
		s.logger.Warn("metrics: read the queues", "err", err)
		ch <- prometheus.MustNewConstMetric(descQueueUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descQueueUp, prometheus.GaugeValue, 1)
}

func (c opsCollector) queues(ch chan<- prometheus.Metric) error {
	known, err := c.s.cfg.Queues.Queues()
	if err != nil {
		return err
	}
	names := slices.Clone(c.s.cfg.QueueNames)
	for _, q := range known {
		if !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	slices.Sort(names)
	for _, q := range names {
		info := &asynq.QueueInfo{Queue: q}
		if slices.Contains(known, q) {
			if info, err = c.s.cfg.Queues.GetQueueInfo(q); err != nil {
				return err
			}
		}
		// aggregating: probe results waiting in their group for the bot to
		// take them as a batch (tasks.CheckResultGroup).
		for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "aggregating": info.Aggregating} {
			ch <- prometheus.MustNewConstMetric(descQueueTasks, prometheus.GaugeValue, float64(n), q, state)
		}
		ch <- prometheus.MustNewConstMetric(descQueueAge, prometheus.GaugeValue, info.Latency.Seconds(), q)
	}
	return nil
}

func (s *Server) registerMetrics() error {
	return s.reg.Register(opsCollector{s})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
}
