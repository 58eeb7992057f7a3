package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

// postIDs asks url (an ID route) for IDs and fails unless it answers 200.
func postIDs(c *http.Client, url string) error {
	resp, err := c.Post(url, "", nil)
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

// BenchmarkHTTP is the sidecar row: POST /v1/sequences/{name}/ids with
// count=1 and count=100 from 8 concurrent callers (a Go load generator on
// keep-alive connections) against one replica on loopback, for
// -bench.dur each. The replica's allocator runs with its defaults.
//
//	go test -run '^$' -bench 'HTTP' ./bench/ -bench.dur=5s
func BenchmarkHTTP(b *testing.B) {
	const callers = 8
	for _, count := range []int{1, 100} {
		b.Run(fmt.Sprintf("count=%d/callers=%d", count, callers), func(b *testing.B) {
			e := newEnv(b)
			e.create("bench", seqzk.Registration{})
			zc := e.session()
			seqs, err := sequence.NewClient(zc, sequence.Options{Root: e.root})
			if err != nil {
				b.Fatal(err)
			}
			srv, err := httpapi.New(httpapi.Options{Sequences: seqs, Registry: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			b.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
			url := fmt.Sprintf("%s/v1/sequences/bench/ids?count=%d", ts.URL, count)
			call := func() error { return postIDs(client, url) }
			// Warm up: connections, the allocator's first batches.
			for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			all, elapsed := forTime(b, callers, func(int) error { return call() })
			b.ReportMetric(float64(len(all)*count)/elapsed.Seconds(), "IDs/s")
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
			b.ReportMetric(micros(all.quantile(0.5)), "p50-µs")
			b.ReportMetric(micros(all.quantile(0.99)), "p99-µs")
		})
	}
}
