package main

import (
	"fmt"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nomoshq/nomos/internal/metrics"
)

// metricsRegistry is a role's /metrics registry: the Go runtime's and the
// process's figures, nomos_build_info, and the role's own collectors.
func metricsRegistry(own ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	all := append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.BuildInfo(version, commit),
	}, own...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return reg, nil
}

// botMetricsRegistry is the bot's: its parts' figures and asynq's own
// queue metrics (asynq_tasks_enqueued_total, asynq_queue_size, …, read
// through insp at each scrape), the names asynqmon and the dashboards
// written for asynq read. The status page adds its figures from the
// database (web.Server.Collector).
func botMetricsRegistry(m *metrics.Metrics, insp *asynq.Inspector) (*prometheus.Registry, error) {
	return metricsRegistry(m, asynqmetrics.NewQueueMetricsCollector(insp))
}
