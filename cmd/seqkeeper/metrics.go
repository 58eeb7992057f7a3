package main

import (
	"cmp"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// serveMetrics are serve's own metrics (the HTTP API registers its own in
// httpapi). Every series is bounded whatever the number of sequences:
// sequences get series of their own only for metrics_top_sequences.
type serveMetrics struct {
	reg *prometheus.Registry
	// zkLatency and storeLatency time every request to ZooKeeper and to
	// the store; they exist before the session and the store do.
	zkLatency, storeLatency *prometheus.HistogramVec
}

// requestBuckets span a local ZooKeeper read (0.5 ms) to a store write
// retried against a slow S3 (30 s).
var requestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newServeMetrics() *serveMetrics {
	m := &serveMetrics{
		reg: prometheus.NewRegistry(),
		zkLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seqkeeper_zookeeper_request_duration_seconds",
			Help:    "Latency of this replica's ZooKeeper requests, failed ones included, by op (get, children, exists, create, set, delete, sync, multi).",
			Buckets: requestBuckets,
		}, []string{"op"}),
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seqkeeper_store_request_duration_seconds",
			Help:    "Latency of this replica's store requests (S3: each one billed), failed ones included, by op (get, put, delete).",
			Buckets: requestBuckets,
		}, []string{"op"}),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.zkLatency, m.storeLatency, buildInfo())
	return m
}

func (m *serveMetrics) observeZK(op string, d time.Duration) {
	m.zkLatency.WithLabelValues(op).Observe(d.Seconds())
}

func (m *serveMetrics) observeStore(op string, d time.Duration) {
	m.storeLatency.WithLabelValues(op).Observe(d.Seconds())
}

// buildInfo is seqkeeper_build_info{version,revision,goversion} 1.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seqkeeper_build_info",
		Help: "Always 1; the labels say which seqkeeper build runs.",
		ConstLabels: prometheus.Labels{
			"version": buildVersion(), "revision": buildRevision(), "goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}

// collector exports a root's primary's, election's and store's state,
// and the session's, read at scrape time.
func (r *replica) collector(root *host.Root, topN int) prometheus.Collector {
	return replicaCollector{r.zk, root, topN}
}

type replicaCollector struct {
	zk   *zkclient.Client
	r    *host.Root
	topN int
}

// runwayBuckets sort sequences by how long their reserve lasts: an alert
// looks at the low ones, the 1-day cap is where idle sequences sit.
var runwayBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 900, 3600, 86400}

var (
	descLeader       = prometheus.NewDesc("seqkeeper_leader", "1 while this replica is the primary.", nil, nil)
	descTerms        = prometheus.NewDesc("seqkeeper_leadership_changes_total", "Terms this replica started or ended, by event; event=\"crashed_leader_deleted\" counts the crashed leaders whose candidate node it deleted (crash_probe).", []string{"event"}, nil)
	descZKDown       = prometheus.NewDesc("seqkeeper_zookeeper_disconnected_seconds", "How long this replica has been without a ZooKeeper session; 0 while it has one.", nil, nil)
	descRaises       = prometheus.NewDesc("seqkeeper_primary_raises_total", "Ceilings raised in ZooKeeper after the store accepted them.", nil, nil)
	descStorePuts    = prometheus.NewDesc("seqkeeper_store_writes_total", "Store writes by the primary, by result.", []string{"result"}, nil)
	descStoreReqs    = prometheus.NewDesc("seqkeeper_store_requests_total", "Requests this replica sent to the store backend (S3: each one billed), by op; op=\"put_conflict\" counts the PUTs that failed their precondition, op=\"delete\" the deletions of compacted log segments (not billed by S3), op=\"list\" the listings of the log and of the bucket objects.", []string{"op"}, nil)
	descStoreHealthy = prometheus.NewDesc("seqkeeper_store_healthy", "1 when the store answered this replica's last request (the primary's work, or a check once a minute), else 0.", nil, nil)
	descCompactions  = prometheus.NewDesc("seqkeeper_store_compactions_total", "Compactions of the store's log into its bucket objects by the primary, by result.", []string{"result"}, nil)
	descCompacted    = prometheus.NewDesc("seqkeeper_store_compacted_segments_total", "Store log segments folded into bucket objects by the primary.", nil, nil)
	descRevalidated  = prometheus.NewDesc("seqkeeper_primary_revalidations_total", "Sequences fast-forwarded after a ZooKeeper leader election or a re-created znode.", nil, nil)
	descRestored     = prometheus.NewDesc("seqkeeper_primary_restored_total", "Sequence znodes re-created from the store.", nil, nil)
	descRepaired     = prometheus.NewDesc("seqkeeper_primary_repaired_total", "Records the store or ZooKeeper had lost (one object lost or rolled back) that the primary wrote again from the other: tombstones, a live sequence's incarnation.", nil, nil)
	descHandDeleted  = prometheus.NewDesc("seqkeeper_primary_hand_deleted_total", "Sequences found missing from ZooKeeper with no data loss since the primary last saw them (deleted by hand, without a tombstone): not restored.", nil, nil)
	descStoreRepairs = prometheus.NewDesc("seqkeeper_store_repairs_total", "Store objects this replica found lost or rolled back and rebuilt (the meta and epoch objects).", nil, nil)
	descSequences    = prometheus.NewDesc("seqkeeper_sequences", "Sequences the primary maintains (0 on a standby).", nil, nil)
	descUnhealthy    = prometheus.NewDesc("seqkeeper_unhealthy_sequences", "Sequences the primary reports unhealthy, exhausted ones apart.", nil, nil)
	descExhausted    = prometheus.NewDesc("seqkeeper_exhausted_sequences", "Sequences that handed out every ID of their space (left out of the unhealthy count and the runways).", nil, nil)
	descRunway       = prometheus.NewDesc("seqkeeper_runway_seconds", "How long the sequences' reserves last at their recent rates: a histogram over the sequences the primary maintains (capped at a day for idle ones).", nil, nil)
	descRunwayMin    = prometheus.NewDesc("seqkeeper_runway_min_seconds", "The shortest runway of any sequence the primary maintains (absent on a standby).", nil, nil)
	descLegacyMin    = prometheus.NewDesc("seqkeeper_legacy_margin_min_ids", "Smallest gap seen between any legacy counter and its stored mark (absent without legacy counters).", nil, nil)
	descSeqRunway    = prometheus.NewDesc("seqkeeper_sequence_runway_seconds", "How long the reserve lasts at its recent rate, for the metrics_top_sequences sequences with the shortest runway.", []string{"sequence"}, nil)
	descSeqLegacy    = prometheus.NewDesc("seqkeeper_sequence_legacy_margin_ids", "Smallest gap seen between a legacy counter and its stored mark, for the legacy counters among the metrics_top_sequences with the shortest runway.", []string{"sequence"}, nil)
)

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerms, descZKDown, descRaises, descStorePuts, descStoreReqs,
		descStoreHealthy, descCompactions, descCompacted, descRevalidated, descRestored, descRepaired, descHandDeleted, descStoreRepairs,
		descSequences, descUnhealthy, descExhausted,
		descRunway, descRunwayMin, descLegacyMin, descSeqRunway, descSeqLegacy} {
		ch <- d
	}
}

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	r := c.r
	gauge(descLeader, boolFloat(r.Election().IsLeader()))
	es := r.Election().Stats()
	counter(descTerms, es.Terms, "elected")
	counter(descTerms, es.Resignations, "resigned")
	counter(descTerms, es.Losses, "lost")
	counter(descTerms, es.CrashDeletions, "crashed_leader_deleted")
	gauge(descZKDown, c.zk.DisconnectedFor().Seconds())
	ps := r.Primary().Stats()
	counter(descRaises, ps.Raises)
	counter(descStorePuts, ps.StorePuts, "ok")
	counter(descStorePuts, ps.StoreErrors, "error")
	rq := r.Store().Requests()
	counter(descStoreReqs, rq.Gets, "get")
	counter(descStoreReqs, rq.Puts, "put")
	counter(descStoreReqs, rq.PutConflicts, "put_conflict")
	counter(descStoreReqs, rq.Deletes, "delete")
	counter(descStoreReqs, rq.Lists, "list")
	counter(descStoreRepairs, r.Store().Repairs())
	gauge(descStoreHealthy, boolFloat(r.Store().Health().Healthy()))
	counter(descCompactions, ps.Compactions, "ok")
	counter(descCompactions, ps.CompactErrors, "error")
	counter(descCompacted, ps.Compacted)
	counter(descRevalidated, ps.Revalidated)
	counter(descRestored, ps.Restored)
	counter(descRepaired, ps.Repaired)
	counter(descHandDeleted, ps.HandDeleted)
	collectSequences(ch, r.Primary().StatusOf, c.topN)
}

// collectSequences exports the primary's view of its sequences (statusOf
// is primary.Primary.StatusOf): counts, a runway histogram and minima, and
// series of their own for the topN with the shortest runway. It keeps no
// list of them all.
func collectSequences(ch chan<- prometheus.Metric, statusOf func(keep func(*primary.SequenceStatus) bool) primary.Status, topN int) {
	n, unhealthy, exhausted := 0, 0, 0
	buckets := make(map[float64]uint64, len(runwayBuckets))
	sum := 0.0
	legacyMin, hasLegacy := int64(0), false
	short := shortest{n: max(topN, 1)}
	st := statusOf(func(s *primary.SequenceStatus) bool {
		n++
		switch {
		case s.Exhausted:
			exhausted++
			return false // it has no runway to run out of
		case !s.Healthy:
			unhealthy++
		}
		sum += s.RunwaySeconds
		for _, b := range runwayBuckets {
			if s.RunwaySeconds <= b {
				buckets[b]++
			}
		}
		if s.Legacy && (!hasLegacy || s.LegacyMargin < legacyMin) {
			legacyMin, hasLegacy = s.LegacyMargin, true
		}
		short.offer(s)
		return false
	})
	if !st.Leading {
		n, unhealthy, exhausted, sum, hasLegacy, short.top = 0, 0, 0, 0, false, nil
		clear(buckets)
	}
	ch <- prometheus.MustNewConstMetric(descSequences, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(descUnhealthy, prometheus.GaugeValue, float64(unhealthy))
	ch <- prometheus.MustNewConstMetric(descExhausted, prometheus.GaugeValue, float64(exhausted))
	ch <- prometheus.MustNewConstHistogram(descRunway, uint64(n-exhausted), sum, buckets)
	if hasLegacy {
		ch <- prometheus.MustNewConstMetric(descLegacyMin, prometheus.GaugeValue, float64(legacyMin))
	}
	if len(short.top) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(descRunwayMin, prometheus.GaugeValue, short.top[0].RunwaySeconds)
	if topN <= 0 {
		return
	}
	for _, s := range short.top {
		ch <- prometheus.MustNewConstMetric(descSeqRunway, prometheus.GaugeValue, s.RunwaySeconds, s.Name)
		if s.Legacy {
			ch <- prometheus.MustNewConstMetric(descSeqLegacy, prometheus.GaugeValue, float64(s.LegacyMargin), s.Name)
		}
	}
}

// shortest keeps the n sequences with the shortest runway offered (ties
// by name), shortest first, without sorting all of them.
type shortest struct {
	n   int
	top []primary.SequenceStatus
}

func (sh *shortest) offer(s *primary.SequenceStatus) {
	less := func(a, b primary.SequenceStatus) int {
		return cmp.Or(cmp.Compare(a.RunwaySeconds, b.RunwaySeconds), cmp.Compare(a.Name, b.Name))
	}
	if len(sh.top) == sh.n && less(*s, sh.top[sh.n-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(sh.top, *s, less)
	sh.top = slices.Insert(sh.top, i, *s)
	if len(sh.top) > sh.n {
		sh.top = sh.top[:sh.n]
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
