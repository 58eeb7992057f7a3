package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus metrics. The names are part of the
// contract (docs/http-api.md).
type metrics struct {
	requests *prometheus.HistogramVec
	served   *prometheus.CounterVec
	recycled *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "seqkeeper_http_request_duration_seconds",
			Help: "Latency of HTTP API requests by route pattern and status code.",
			// From 50µs (an ID from memory) to 30s (a take waiting at the
			// ceiling for the primary).
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "code"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seqkeeper_ids_served_total",
			Help: "IDs handed out by the HTTP API, by sequence.",
		}, []string{"sequence"}),
		recycled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seqkeeper_ids_recycled_total",
			Help: "IDs pushed back through the HTTP API, by sequence.",
		}, []string{"sequence"}),
	}
	stats := func(f func() int64) func() float64 { return func() float64 { return float64(f()) } }
	collectors := []prometheus.Collector{
		m.requests, m.served, m.recycled,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_zookeeper_requests_total",
			Help: "ZooKeeper requests (round trips) made by this replica's sequence client.",
		}, stats(func() int64 { return s.seqs.Stats().Requests })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_cas_conflicts_total",
			Help: "Compare-and-set writes of this replica's sequence client that lost to another writer.",
		}, stats(func() int64 { return s.seqs.Stats().Conflicts })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_cas_retries_total",
			Help: "Sequence operations retried after a ZooKeeper connection error.",
		}, stats(func() int64 { return s.seqs.Stats().Retries })),
		allocatorCollector{s},
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w (is another Server using this registry?)", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

var (
	descTakes = prometheus.NewDesc("seqkeeper_allocator_takes_total",
		"Batches the HTTP API's allocators took from ZooKeeper, by sequence.", []string{"sequence"}, nil)
	descBatch = prometheus.NewDesc("seqkeeper_allocator_batch_size",
		"Current adaptive batch size of the HTTP API's allocator, by sequence.", []string{"sequence"}, nil)
	descWaits = prometheus.NewDesc("seqkeeper_allocator_waits_total",
		"ID requests that had to wait for ZooKeeper because the allocator's batches ran out, by sequence.", []string{"sequence"}, nil)
)

// allocatorCollector reports the allocators' own counters at scrape time.
type allocatorCollector struct{ s *Server }

func (c allocatorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTakes
	ch <- descBatch
	ch <- descWaits
}

func (c allocatorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.s.Allocators() {
		ch <- prometheus.MustNewConstMetric(descTakes, prometheus.CounterValue, float64(a.Batches), a.Sequence)
		ch <- prometheus.MustNewConstMetric(descBatch, prometheus.GaugeValue, float64(a.BatchSize), a.Sequence)
		ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(a.Waits), a.Sequence)
	}
}
