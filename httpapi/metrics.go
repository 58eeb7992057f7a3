package httpapi

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus metrics. The names are part of the
// contract (docs/http-api.md). Every series is bounded whatever the number
// of sequences: sequences get series of their own only for the
// Options.TopSequences that served the most IDs.
type metrics struct {
	requests *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "seqkeeper_http_request_duration_seconds",
			Help: "Latency of HTTP API requests by route pattern and status code.",
			// From 50µs (an ID from memory) to 30s (a take waiting at the
			// ceiling for the primary).
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "code"}),
	}
	stats := func(f func() int64) func() float64 { return func() float64 { return float64(f()) } }
	collectors := []prometheus.Collector{
		m.requests,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_zookeeper_requests_total",
			Help: "ZooKeeper requests (round trips) made by this replica's sequence client.",
		}, stats(func() int64 { return s.seqs.Stats().Requests })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_cas_conflicts_total",
			Help: "Compare-and-set writes of this replica's sequence client that lost to another writer (each one is retried).",
		}, stats(func() int64 { return s.seqs.Stats().Conflicts })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_zookeeper_retries_total",
			Help: "Sequence operations of this replica's sequence client retried after a ZooKeeper connection error.",
		}, stats(func() int64 { return s.seqs.Stats().Retries })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_ids_served_total",
			Help: "IDs handed out by the HTTP API, all sequences.",
		}, stats(s.served.Load)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "seqkeeper_ids_recycled_total",
			Help: "IDs pushed back through the HTTP API, all sequences.",
		}, stats(s.recycled.Load)),
		allocatorCollector{s},
	}
	if s.multi() {
		// The roots' Servers export their own; this one has no sequences.
		collectors = collectors[:1]
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w (is another Server using this registry?)", err)
		}
	}
	return m, nil
}

var (
	descAllocators = prometheus.NewDesc("seqkeeper_allocators",
		"Sequences this replica's HTTP API holds an allocator for.", nil, nil)
	descTakes = prometheus.NewDesc("seqkeeper_allocator_takes_total",
		"Batches the HTTP API's allocators took from ZooKeeper, all sequences.", nil, nil)
	descWaits = prometheus.NewDesc("seqkeeper_allocator_waits_total",
		"ID requests that waited for ZooKeeper because their allocator's batches ran out, all sequences.", nil, nil)
	descSeqServed = prometheus.NewDesc("seqkeeper_sequence_ids_served_total",
		"IDs handed out by the HTTP API, for the metrics_top_sequences sequences that served the most.", []string{"sequence"}, nil)
	descSeqBatch = prometheus.NewDesc("seqkeeper_sequence_allocator_batch_size",
		"Current adaptive batch size of the allocator, for the metrics_top_sequences sequences that served the most.", []string{"sequence"}, nil)
	descSeqWaits = prometheus.NewDesc("seqkeeper_sequence_allocator_waits_total",
		"ID requests that waited for ZooKeeper, for the metrics_top_sequences sequences that served the most.", []string{"sequence"}, nil)
)

// allocatorCollector reports the allocators' counters at scrape time:
// sums, and the top sequences by IDs served when asked for.
type allocatorCollector struct{ s *Server }

func (c allocatorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAllocators, descTakes, descWaits, descSeqServed, descSeqBatch, descSeqWaits} {
		ch <- d
	}
}

func (c allocatorCollector) Collect(ch chan<- prometheus.Metric) {
	all := c.s.Allocators()
	var takes, waits int64
	for _, a := range all {
		takes += a.Batches
		waits += a.Waits
	}
	ch <- prometheus.MustNewConstMetric(descAllocators, prometheus.GaugeValue, float64(len(all)))
	ch <- prometheus.MustNewConstMetric(descTakes, prometheus.CounterValue, float64(takes))
	ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(waits))
	for _, a := range TopAllocators(all, c.s.topN) {
		ch <- prometheus.MustNewConstMetric(descSeqServed, prometheus.CounterValue, float64(a.Served), a.Sequence)
		ch <- prometheus.MustNewConstMetric(descSeqBatch, prometheus.GaugeValue, float64(a.BatchSize), a.Sequence)
		ch <- prometheus.MustNewConstMetric(descSeqWaits, prometheus.CounterValue, float64(a.Waits), a.Sequence)
	}
}

// TopAllocators returns the n allocators that served the most IDs (ties
// by name), most first.
func TopAllocators(all []AllocatorStatus, n int) []AllocatorStatus {
	if n <= 0 {
		return nil
	}
	top := slices.Clone(all)
	slices.SortFunc(top, func(a, b AllocatorStatus) int {
		return cmp.Or(cmp.Compare(b.Served, a.Served), cmp.Compare(a.Sequence, b.Sequence))
	})
	return top[:min(n, len(top))]
}
