package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// reserveRows are the settings BenchmarkReserve compares, each with the
// primary's defaults otherwise. The first row is the baseline.
var reserveRows = []struct {
	name string
	tune func(*config.Primary)
}{
	{"defaults", nil},
	{"min=max=100", func(c *config.Primary) { c.MinReserve, c.MaxReserve = 100, 100 }},
	{"min=1/max=20/runway=10s", func(c *config.Primary) {
		c.MinReserve, c.MaxReserve, c.Runway = 1, 20, 10*time.Second
	}},
	{"max=1000", func(c *config.Primary) { c.MaxReserve = 1000 }},
	{"max=10000", func(c *config.Primary) { c.MaxReserve = 10_000 }},
}

// BenchmarkReserve is what a worker meets when the reserve is capped: one
// primary (its defaults but for the row's settings), one sequence, and one
// caller taking 5 IDs at a time through the sidecar's HTTP route, one
// request after another, for -bench.dur per row. A capped reserve is
// emptied by a few takes, so every few requests wait for a raise: the
// rows show whether the primary raises as soon as the takers reach the
// ceiling (a raise's round trip) or leaves them waiting for a sweep.
// Each row reports its IDs/s, its ratio to the first row's (vs-defaults,
// the same run) and its slowest request (max-ms).
//
//	go test -run '^$' -bench 'Reserve' ./bench/ -bench.dur=20s
func BenchmarkReserve(b *testing.B) {
	var baseline float64
	for _, row := range reserveRows {
		b.Run(row.name, func(b *testing.B) {
			ids, lat := reserveRow(b, row.tune)
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
func reserveRow(b *testing.B, tune func(*config.Primary)) (float64, durations) {
	const count = 5
	e := newEnv(b)
	// One session for the primary and the sidecar, as in 'seqkeeper serve'.
	e.primaryZK = e.session()
	startPrimary(b, e, openStore(b, testenv.ObjectStore(b)), tune)
	if err := e.admin().Register(context.Background(), "r", seqzk.Registration{}); err != nil {
		b.Fatal(err)
	}
	seqs, err := sequence.NewClient(e.primaryZK, sequence.Options{Root: e.root})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Options{Sequences: seqs, Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	url := fmt.Sprintf("%s/v1/sequences/r/ids?count=%d", ts.URL, count)
	call := func(int) error {
		resp, err := ts.Client().Post(url, "", nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// The first take waits for the primary to initialise the sequence.
	if err := call(0); err != nil {
		b.Fatal(err)
	}
	all, elapsed := forTime(b, 1, call)
	return float64(len(all)*count) / elapsed.Seconds(), all
}
