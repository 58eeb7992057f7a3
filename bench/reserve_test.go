package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

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
// (vs-defaults) and its slowest request (max-ms).
//
//	go test -run '^$' -bench 'Reserve' ./bench/ -bench.dur=20s
func BenchmarkReserve(b *testing.B) {
	var baseline float64
	for _, row := range reserveRows {
		b.Run(row.name, func(b *testing.B) {
			ids, lat := reserveRow(b, row.env)
			b.ReportMetric(ids, "IDs/s")
			if baseline == 0 {
				baseline = ids
			}
			b.ReportMetric(ids/baseline, "vs-defaults")
			b.ReportMetric(millis(lat.quantile(0.99)), "p99-ms")
			b.ReportMetric(millis(lat.quantile(1)), "max-ms")
		})
	}
}

// reserveRow runs one row of BenchmarkReserve and returns its IDs a
// second and every request's latency.
func reserveRow(b *testing.B, settings map[string]string) (float64, durations) {
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
	waitUntil(b, 30*time.Second, "the root", func() bool { ok, _, _ := zc.Exists(context.Background(), c.Root); return ok })
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
	all, elapsed := forTime(b, 1, call)
	return float64(len(all)*count) / elapsed.Seconds(), all
}
