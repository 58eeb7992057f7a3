package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// reserveRows are the settings BenchmarkReserve compares, as serve's
// environment over its defaults. The first row is the baseline.
var reserveRows = []struct {
	name string
	env  map[string]string
}{
	{"defaults", nil},
	{"min=max=100", map[string]string{"SEQKEEPER_MIN_RESERVE": "100", "SEQKEEPER_MAX_RESERVE": "100"}},
	{"min=1/max=20/runway=10s", map[string]string{"SEQKEEPER_MIN_RESERVE": "1", "SEQKEEPER_MAX_RESERVE": "20", "SEQKEEPER_RUNWAY": "10s"}},
	{"max=1000", map[string]string{"SEQKEEPER_MAX_RESERVE": "1000"}},
	{"max=10000", map[string]string{"SEQKEEPER_MAX_RESERVE": "10000"}},
}

// BenchmarkReserve is what a worker meets when the reserve is capped: one
// replica of 'seqkeeper serve' (the built binary, its defaults but for the
// row's settings, a MinIO store), one sequence, and one caller taking 5
// IDs at a time through the replica's HTTP route, one request after
// another, for -bench.dur per row. The sidecar's batches empty a capped
// reserve at once, so its takes wait for raises: the rows show whether the
// primary raises as soon as the takers reach the ceiling (a raise's round
// trip) or leaves them waiting (a sweep, the store's pace). Each row
// reports its IDs/s, its ratio to the first row's in the same run
// (vs-defaults) and its slowest request (max-ms). Beside it, the replica's
// slowest store PUT and ZooKeeper multi() in the row (put-max-ms and
// multi-max-ms, the upper bounds of their histograms' buckets, from its
// /metrics): a raise is one of each, so a request slower than their sum
// waited on more than a raise's round trip.
//
//	go test -run '^$' -bench 'Reserve' ./bench/ -bench.dur=20s
func BenchmarkReserve(b *testing.B) {
	var baseline float64
	for _, row := range reserveRows {
		b.Run(row.name, func(b *testing.B) {
			ids, lat, slowest := reserveRow(b, row.env)
			b.ReportMetric(ids, "IDs/s")
			if baseline == 0 {
				baseline = ids
			}
			b.ReportMetric(ids/baseline, "vs-defaults")
			b.ReportMetric(millis(lat.quantile(0.99)), "p99-ms")
			b.ReportMetric(millis(lat.quantile(1)), "max-ms")
			b.ReportMetric(slowest["seqkeeper_store_request_duration_seconds/put"], "put-max-ms")
			b.ReportMetric(slowest["seqkeeper_zookeeper_request_duration_seconds/multi"], "multi-max-ms")
		})
	}
}

// reserveRow runs one row of BenchmarkReserve and returns its IDs a
// second, every request's latency, and the replica's slowest requests in
// the row (slowestRequests).
func reserveRow(b *testing.B, settings map[string]string) (float64, durations, map[string]float64) {
	const count = 5
	z := testenv.ZooKeeper(b)
	s3 := testenv.ObjectStore(b)
	env := map[string]string{
		// serve's own defaults, not the test cluster's quick ones: a
		// stall the length of a sweep must show.
		"SEQKEEPER_RUNWAY": "60s", "SEQKEEPER_SWEEP_INTERVAL": "10s", "SEQKEEPER_CEILING_WAIT": "30s",
		"AWS_ACCESS_KEY_ID": s3.AccessKey, "AWS_SECRET_ACCESS_KEY": s3.SecretKey,
	}
	for k, v := range settings {
		env[k] = v
	}
	sub := &testenv.ZK{Servers: z.Servers, Root: z.Path(fmt.Sprintf("reserve-%d", b.N))}
	c := testenv.StartCluster(b, sub, testenv.ClusterOptions{Replicas: 1, Env: env,
		Store: fmt.Sprintf("s3://%s/reserve?endpoint=%s&region=%s", s3.Bucket, url.QueryEscape(s3.Endpoint), s3.Region)})
	zc := testenv.Connect(b, z.Servers, 10*time.Second)
	admin, err := seqzk.NewClient(zc, seqzk.Options{Root: c.Root})
	if err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 30*time.Second, "the root", func() bool { ok, _, _ := zc.Session().Exists(context.Background(), c.Root); return ok })
	if err := admin.Register(context.Background(), "r", seqzk.Registration{}); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{}
	b.Cleanup(hc.CloseIdleConnections)
	u := fmt.Sprintf("%s/v1/sequences/r/ids?count=%d", c.URL(0), count)
	call := func(int) error { return postIDs(hc, u) }
	// The first take waits for the primary to initialise the sequence.
	if err := call(0); err != nil {
		b.Fatal(err)
	}
	before := histograms(b, c.URL(0))
	all, elapsed := forTime(b, 1, call)
	return float64(len(all)*count) / elapsed.Seconds(), all, slowestRequests(before, histograms(b, c.URL(0)))
}

// histograms reads the request latency histograms of the replica at base
// from its /metrics, by "name/op".
func histograms(b *testing.B, base string) map[string]*dto.Histogram {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	hs := map[string]*dto.Histogram{}
	for _, name := range []string{"seqkeeper_store_request_duration_seconds", "seqkeeper_zookeeper_request_duration_seconds"} {
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					hs[name+"/"+l.GetValue()] = m.GetHistogram()
				}
			}
		}
	}
	return hs
}

// slowestRequests is, for each histogram of after, the upper bound in
// milliseconds of the lowest bucket that holds every request made since
// before (+Inf as -1).
func slowestRequests(before, after map[string]*dto.Histogram) map[string]float64 {
	out := map[string]float64{}
	for key, h := range after {
		var was []*dto.Bucket
		total := h.GetSampleCount()
		if hb := before[key]; hb != nil {
			was, total = hb.GetBucket(), total-hb.GetSampleCount()
		}
		out[key] = -1
		for i, bk := range h.GetBucket() {
			n := bk.GetCumulativeCount()
			if i < len(was) {
				n -= was[i].GetCumulativeCount()
			}
			if n == total {
				out[key] = bk.GetUpperBound() * 1000
				break
			}
		}
	}
	return out
}
