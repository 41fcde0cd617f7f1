package web

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	descExecutions = prometheus.NewDesc("nomos_executions", "Executions by state and risk class.", []string{"state", "risk_class"}, nil)
	descSignals    = prometheus.NewDesc("nomos_signals_open", "Open signals by severity.", []string{"severity"}, nil)
	descEntities   = prometheus.NewDesc("nomos_entities", "Live hosts, LXCs and services by type and health.", []string{"type", "health"}, nil)
	descStale      = prometheus.NewDesc("nomos_stale_targets", "Checked targets whose checks stopped answering.", nil, nil)
	descStoreUp    = prometheus.NewDesc("nomos_store_up", "1 when the last scrape could read the database.", nil, nil)
	descSSE        = prometheus.NewDesc("nomos_web_live_clients", "Pages following live updates.", nil, nil)
	descSSEDropped = prometheus.NewDesc("nomos_web_live_dropped_total", "Live clients dropped for falling behind.", nil, nil)
)

// opsCollector reads the database on each scrape, so
// /metrics is as fresh as the page and costs nothing between scrapes.
type opsCollector struct{ s *Server }

func (c opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExecutions, descSignals, descEntities, descStale, descStoreUp, descSSE, descSSEDropped} {
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
}

func (s *Server) registerMetrics() error {
	return s.reg.Register(s.Collector())
}

// Collector is what the page adds to /metrics: the fleet's figures read
// from the database at each scrape, and its live clients. New registers
// it with Config.Registry.
func (s *Server) Collector() prometheus.Collector { return opsCollector{s} }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
}
