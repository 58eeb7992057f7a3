package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Every metric a running primary exports passes the Prometheus client
// library's linter (units in names, _total on counters only, base units,
// help text), and the ones the docs promise are there.
func TestMetricsLint(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	r := c.serveWith("a", "--metrics-top-sequences", "2")
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "lint")
	eventually(t, "IDs", func() bool { _, code := r.ids(t, "lint", 3); return code == http.StatusOK })
	var body []byte
	eventually(t, "a primary's metrics", func() bool {
		resp, err := http.Get("http://" + r.addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return strings.Contains(string(body), "seqkeeper_leader 1") && strings.Contains(string(body), `seqkeeper_sequence_runway_seconds{sequence="lint"}`)
	})
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		"seqkeeper_build_info{", "seqkeeper_store_request_duration_seconds_bucket{op=\"put\"",
		"seqkeeper_zookeeper_request_duration_seconds_bucket{op=\"get\"", "seqkeeper_store_healthy 1",
		"seqkeeper_zookeeper_disconnected_seconds 0", "seqkeeper_runway_seconds_count 1", "seqkeeper_runway_min_seconds ",
		"seqkeeper_sequences 1", "seqkeeper_ids_served_total 3", "seqkeeper_sequence_ids_served_total{sequence=\"lint\"} 3",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// The linter does catch what it should: a counter without _total and a
// duration in milliseconds (so the test above can fail).
func TestLintCatchesBadNames(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		prometheus.NewCounter(prometheus.CounterOpts{Name: "seqkeeper_bad_things", Help: "x"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "seqkeeper_wait_milliseconds", Help: "x"}),
	)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) < 2 {
		t.Fatalf("promlint found %v; want the counter without _total and the non-base unit", problems)
	}
}

// sequencesCollector is collectSequences as a collector, for counting its
// series.
type sequencesCollector struct {
	st   primary.Status
	topN int
}

func (c sequencesCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }
func (c sequencesCollector) Collect(ch chan<- prometheus.Metric) {
	collectSequences(ch, c.st.Filter, c.topN)
}

func statusOf(n int) primary.Status {
	st := primary.Status{Leading: true, Sequences: make([]primary.SequenceStatus, n)}
	for i := range st.Sequences {
		st.Sequences[i] = primary.SequenceStatus{Name: fmt.Sprintf("s%06d", i), RunwaySeconds: float64(60 + i%1000),
			Healthy: i%10 != 0, Legacy: i%100 == 0, LegacyMargin: int64(1000 + i)}
	}
	return st
}

// At 100,000 sequences the primary exports as many series as at 10: the
// series count is bounded by a constant, and with metrics_top_sequences N
// at most N sequences get series of their own (the shortest runways).
func TestSeriesBoundedAt100kSequences(t *testing.T) {
	t.Parallel()
	count := func(n, topN int) int {
		reg := prometheus.NewRegistry()
		reg.MustRegister(sequencesCollector{statusOf(n), topN})
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		series := 0
		for _, f := range families {
			series += len(f.GetMetric())
		}
		return series
	}
	small, large := count(10, 0), count(100_000, 0)
	if small != large {
		t.Fatalf("series at 10 sequences %d, at 100,000 %d: want the same bound", small, large)
	}
	t.Logf("series at 10 and 100,000 sequences: %d", large)
	if got := count(100_000, 5); got > large+2*5 {
		t.Fatalf("with top 5: %d series; want at most %d", got, large+10)
	}
	if n := testutil.CollectAndCount(sequencesCollector{statusOf(100_000), 5}, "seqkeeper_sequence_runway_seconds"); n != 5 {
		t.Fatalf("top 5: %d per-sequence runway series", n)
	}
	out, err := testutil.CollectAndFormat(sequencesCollector{statusOf(100_000), 3}, expfmt.TypeTextPlain, "seqkeeper_sequence_runway_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`sequence="s000000"} 60`, `sequence="s001000"} 60`, `sequence="s002000"} 60`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("top 3 by shortest runway lack %s:\n%s", want, out)
		}
	}
}

// What the ZooKeeper latency histogram costs a request: Get round trips
// against the test ZooKeeper, plain and observed, in one process.
//
//	go test -run '^$' -bench ZooKeeperGetObserved -count 5 ./cmd/seqkeeper/
func BenchmarkZooKeeperGetObserved(b *testing.B) {
	z := testenv.ZooKeeper(b)
	m := newServeMetrics()
	for _, tc := range []struct {
		name    string
		observe func(string, time.Duration)
	}{{"plain", nil}, {"observed", m.observeZK}} {
		b.Run(tc.name, func(b *testing.B) {
			zc, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{ObserveRequest: tc.observe})
			if err != nil {
				b.Fatal(err)
			}
			defer zc.Close()
			ctx := context.Background()
			for b.Loop() {
				if _, _, err := zc.Session().Get(ctx, "/"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An exhausted sequence ends there: it is counted apart, and neither
// pins the shortest runway at 0 nor counts as unhealthy, so no alert
// pages for it forever.
func TestExhaustedSequencesPageNoOne(t *testing.T) {
	t.Parallel()
	st := primary.Status{Leading: true, Sequences: []primary.SequenceStatus{
		{Name: "done", Exhausted: true, Problem: "exhausted"},
		{Name: "live", Healthy: true, RunwaySeconds: 45},
		{Name: "stuck", RunwaySeconds: 30, Problem: "the last store write failed"},
	}}
	out, err := testutil.CollectAndFormat(sequencesCollector{st, 0}, expfmt.TypeTextPlain,
		"seqkeeper_unhealthy_sequences", "seqkeeper_exhausted_sequences", "seqkeeper_runway_min_seconds", "seqkeeper_runway_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seqkeeper_unhealthy_sequences 1\n", "seqkeeper_exhausted_sequences 1\n",
		"seqkeeper_runway_min_seconds 30\n", "seqkeeper_runway_seconds_count 2\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}
