package sequence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// BenchmarkNext compares Allocator.Next with a bare atomic counter, the
// limit for any in-memory ID source, in the same run:
//
//	go test -run '^$' -bench 'BenchmarkNext' ./sequence/
func BenchmarkNext(b *testing.B) {
	for _, goroutines := range []int{1, 8} {
		b.Run(fmt.Sprintf("atomic/goroutines=%d", goroutines), func(b *testing.B) {
			var n atomic.Int64
			runGoroutines(b, goroutines, func() error { n.Add(1); return nil })
		})
		b.Run(fmt.Sprintf("allocator/goroutines=%d", goroutines), func(b *testing.B) {
			e := newEnv(b)
			c := e.client(sequence.Options{})
			e.create(c, "bench", sequence.Registration{}, 1<<50)
			alloc, err := sequence.NewAllocator(c, "bench", sequence.AllocatorOptions{InitialBatch: 10_000, MaxBatch: 1_000_000})
			if err != nil {
				b.Fatal(err)
			}
			defer alloc.Close(context.Background())
			ctx := context.Background()
			runGoroutines(b, goroutines, func() error { _, err := alloc.Next(ctx); return err })
			s := alloc.Stats()
			b.ReportMetric(float64(s.Waits), "waits")
		})
	}
}

// runGoroutines calls f b.N times in total from the given number of
// goroutines and reports IDs/s.
func runGoroutines(b *testing.B, goroutines int, f func() error) {
	b.Helper()
	elapsed := spread(b, goroutines, func(int) error { return f() })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "IDs/s")
}

// spread calls op b.N times in total from n goroutines (op gets its
// goroutine's index), stops the timer, fails the benchmark on the first
// error, and returns the time the calls took.
func spread(b *testing.B, n int, op func(i int) error) time.Duration {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := op(i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return elapsed
}

// BenchmarkTake measures single-ID takes on a real ZooKeeper by 1 and 8
// clients (each its own session) on one sequence, with and without
// windows, beside a naive get-then-set compare-and-set loop on one znode:
//
//	go test -run '^$' -bench 'BenchmarkTake' -benchtime 2000x ./sequence/
func BenchmarkTake(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("naive/clients=%d", clients), func(b *testing.B) {
			e := newEnv(b)
			path := e.root + "/naive"
			setup := e.session(10 * time.Second).Conn()
			if _, err := setup.Create(path, make([]byte, 8), 0, zk.WorldACL(zk.PermAll)); err != nil {
				b.Fatal(err)
			}
			conns := make([]*zk.Conn, clients)
			for i := range conns {
				conns[i] = e.session(10 * time.Second).Conn()
			}
			var requests atomic.Int64
			runClients(b, clients, func(i int) error {
				for {
					data, stat, err := conns[i].Get(path)
					requests.Add(1)
					if err != nil {
						return err
					}
					next := make([]byte, 8)
					binary.BigEndian.PutUint64(next, binary.BigEndian.Uint64(data)+1)
					_, err = conns[i].Set(path, next, stat.Version)
					requests.Add(1)
					if !errors.Is(err, zk.ErrBadVersion) {
						return err
					}
				}
			}, func() int64 { return requests.Load() })
		})
		for _, windows := range []int{0, clients} {
			if clients == 1 && windows > 0 {
				continue
			}
			b.Run(fmt.Sprintf("sequence/clients=%d/windows=%d", clients, windows), func(b *testing.B) {
				e := newEnv(b)
				setup := e.client(sequence.Options{})
				e.create(setup, "take", sequence.Registration{Windows: windows}, 1<<50)
				for w := 0; w < windows; w++ {
					if _, err := setup.OpenWindow(context.Background(), "take", 1<<30); err != nil {
						b.Fatal(err)
					}
				}
				cs := make([]*sequence.Client, clients)
				for i := range cs {
					cs[i] = e.client(sequence.Options{})
					if _, err := cs[i].Take(context.Background(), "take", 1); err != nil { // warm caches
						b.Fatal(err)
					}
				}
				ctx := context.Background()
				runClients(b, clients, func(i int) error {
					_, err := cs[i].Take(ctx, "take", 1)
					return err
				}, func() int64 {
					var n int64
					for _, c := range cs {
						n += c.Stats().Requests
					}
					return n
				})
			})
		}
	}
}

// runClients runs b.N operations spread over clients goroutines and reports
// takes/s and ZooKeeper requests per take.
func runClients(b *testing.B, clients int, op func(i int) error, requests func() int64) {
	b.Helper()
	before := requests()
	elapsed := spread(b, clients, op)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "takes/s")
	b.ReportMetric(float64(requests()-before)/float64(b.N), "requests/take")
}
