package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// BenchmarkAllocatorNext is the in-process row: Allocator.Next beside a
// bare atomic counter (the limit for any in-memory ID source) with 1, 2, 8
// and 64 goroutines, in the same run. Batches are large (up to 1,000,000)
// and warmed up, so this measures the allocator, not ZooKeeper:
//
//	go test -run '^$' -bench 'AllocatorNext' -count 5 ./bench/
func BenchmarkAllocatorNext(b *testing.B) {
	for _, g := range []int{1, 2, 8, 64} {
		b.Run(fmt.Sprintf("atomic/goroutines=%d", g), func(b *testing.B) {
			var n atomic.Int64
			parallel(b, g, func() error { n.Add(1); return nil })
		})
		b.Run(fmt.Sprintf("allocator/goroutines=%d", g), func(b *testing.B) {
			alloc := newAllocator(b, sequence.AllocatorOptions{InitialBatch: 10_000, MaxBatch: 1_000_000})
			ctx := context.Background()
			before := alloc.Stats().Waits
			parallel(b, g, func() error { _, err := alloc.Next(ctx); return err })
			b.ReportMetric(float64(alloc.Stats().Waits-before), "waits")
		})
	}
}

// newAllocator returns an allocator on a fresh sequence, warmed up for
// 300 ms so that its adaptive batch has grown.
func newAllocator(b *testing.B, opts sequence.AllocatorOptions) *sequence.Allocator {
	b.Helper()
	e := newEnv(b)
	e.create("bench", seqzk.Registration{})
	c := e.client()
	alloc, err := sequence.NewAllocator(c, "bench", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = alloc.Close(context.Background()) })
	ctx := context.Background()
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		for range 1000 {
			if _, err := alloc.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	return alloc
}

// parallel calls f b.N times in total from g goroutines (each its own
// share, so the harness adds no shared counter of its own) and reports
// IDs/s.
func parallel(b *testing.B, g int, f func() error) {
	b.Helper()
	elapsed := goroutines(b, g, func(i int) error {
		for range share(b.N, g, i) {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "IDs/s")
}

// BenchmarkNextLatency is the latency row: every Next is timed (two clock
// reads, about 20-40 ns, which the atomic line shows: it is timed the same
// way) while the allocator runs with its default options, so batches come
// from ZooKeeper every few milliseconds in a tight loop and each fetch
// takes milliseconds (ZooKeeper fsyncs every write). Reports p50, p99,
// p99.9 and the maximum, and how many calls had to wait for a fetch:
//
//	go test -run '^$' -bench 'NextLatency' -benchtime 20000000x ./bench/
func BenchmarkNextLatency(b *testing.B) {
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("atomic/goroutines=%d", g), func(b *testing.B) {
			var n atomic.Int64
			timed(b, g, func() error { n.Add(1); return nil })
		})
		b.Run(fmt.Sprintf("allocator/goroutines=%d", g), func(b *testing.B) {
			alloc := newAllocator(b, sequence.AllocatorOptions{})
			ctx := context.Background()
			before := alloc.Stats()
			timed(b, g, func() error { _, err := alloc.Next(ctx); return err })
			after := alloc.Stats()
			b.ReportMetric(float64(after.Waits-before.Waits), "waits")
			b.ReportMetric(float64(after.Batches-before.Batches), "batches")
			b.ReportMetric(float64(after.BatchSize), "batch-size")
		})
	}
}

// share is goroutine i's part of n calls spread over g goroutines.
func share(n, g, i int) int {
	if i == 0 {
		return n/g + n%g
	}
	return n / g
}

// timed is parallel with every call timed into a histogram.
func timed(b *testing.B, g int, f func() error) {
	b.Helper()
	hists := make([]*hist, g)
	for i := range hists {
		hists[i] = newHist()
	}
	elapsed := goroutines(b, g, func(i int) error {
		for range share(b.N, g, i) {
			t0 := time.Now()
			if err := f(); err != nil {
				return err
			}
			hists[i].add(time.Since(t0))
		}
		return nil
	})
	all := newHist()
	for _, h := range hists {
		all.merge(h)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "IDs/s")
	b.ReportMetric(float64(all.quantile(0.5)), "p50-ns")
	b.ReportMetric(float64(all.quantile(0.99)), "p99-ns")
	b.ReportMetric(float64(all.quantile(0.999)), "p99.9-ns")
	b.ReportMetric(micros(all.max()), "max-µs")
}

// BenchmarkZKRoundTrips is the ZooKeeper-cost row: ZooKeeper requests
// (Client.Stats().Requests: reads, writes, watches, the final push-back)
// per 1,000,000 IDs from a fresh allocator, adaptive batch (the defaults)
// versus a fixed batch of 1,000. "tight" calls Next in a loop; "paced"
// takes 200,000 IDs/s, a busy but realistic service, where the adaptive
// batch sizes itself to last BatchDuration:
//
//	go test -run '^$' -bench 'ZKRoundTrips' -benchtime 1x ./bench/
func BenchmarkZKRoundTrips(b *testing.B) {
	const ids = 1_000_000
	for _, pace := range []int{0, 200_000} {
		mode := "tight"
		if pace > 0 {
			mode = fmt.Sprintf("paced=%dk-per-s", pace/1000)
		}
		for _, batch := range []struct {
			name string
			opts sequence.AllocatorOptions
		}{
			{"adaptive", sequence.AllocatorOptions{}},
			{"fixed=1000", sequence.AllocatorOptions{InitialBatch: 1000, MinBatch: 1000, MaxBatch: 1000}},
		} {
			b.Run(mode+"/"+batch.name, func(b *testing.B) {
				e := newEnv(b)
				e.create("bench", seqzk.Registration{})
				c := e.client()
				ctx := context.Background()
				before := c.Stats().Requests
				b.ResetTimer()
				for range b.N {
					alloc, err := sequence.NewAllocator(c, "bench", batch.opts)
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					for i := range ids {
						if _, err := alloc.Next(ctx); err != nil {
							b.Fatal(err)
						}
						if pace > 0 && i%1000 == 999 {
							time.Sleep(time.Until(start.Add(time.Duration(i+1) * time.Second / time.Duration(pace))))
						}
					}
					if err := alloc.Close(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(c.Stats().Requests-before)/float64(b.N), "requests/1M-IDs")
			})
		}
	}
}
