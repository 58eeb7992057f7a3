package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// BenchmarkContention is the contention row: single-ID takes (batch 1) by
// 1, 8 and 32 clients, each its own ZooKeeper session, on one sequence,
// with and without windows, beside a naive get-then-set compare-and-set
// loop on one znode, in the same run. Each case runs for -bench.dur and
// reports takes/s, ZooKeeper requests per take and take latency:
//
//	go test -run '^$' -bench 'Contention' ./bench/ -bench.dur=5s
func BenchmarkContention(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("naive/clients=%d", clients), func(b *testing.B) {
			e := newEnv(b)
			path := e.root + "/naive"
			if _, err := e.session().Session().Create(context.Background(), path, make([]byte, 8), 0); err != nil {
				b.Fatal(err)
			}
			conns := make([]*zkclient.Client, clients)
			for i := range conns {
				conns[i] = e.session()
			}
			ctx := context.Background()
			var requests atomic.Int64
			forDuration(b, clients, func(i int) error {
				for {
					data, stat, err := conns[i].Session().Get(ctx, path)
					requests.Add(1)
					if err != nil {
						return err
					}
					next := make([]byte, 8)
					binary.BigEndian.PutUint64(next, binary.BigEndian.Uint64(data)+1)
					_, err = conns[i].Session().Set(ctx, path, next, stat.Version)
					requests.Add(1)
					if !errors.Is(err, zkclient.ErrBadVersion) {
						return err
					}
				}
			}, requests.Load)
		})
		for _, windows := range []int{0, 8, 32} {
			if windows > clients {
				continue // more windows than clients: nothing to spread
			}
			b.Run(fmt.Sprintf("sequence/clients=%d/windows=%d", clients, windows), func(b *testing.B) {
				e := newEnv(b)
				setup := e.create("take", seqzk.Registration{Windows: windows})
				for range windows {
					if _, err := setup.Keeper().OpenWindow(context.Background(), "take", 1<<30); err != nil {
						b.Fatal(err)
					}
				}
				cs := make([]*sequence.Client, clients)
				for i := range cs {
					cs[i] = e.client()
					if _, err := cs[i].Take(context.Background(), "take", 1); err != nil { // warm the cache
						b.Fatal(err)
					}
				}
				ctx := context.Background()
				forDuration(b, clients, func(i int) error {
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

// forDuration runs op from clients goroutines for -bench.dur and reports
// takes/s, requests per take and the take latency quantiles.
func forDuration(b *testing.B, clients int, op func(i int) error, requests func() int64) {
	b.Helper()
	before := requests()
	all, elapsed := forTime(b, clients, op)
	n := int64(len(all))
	b.ReportMetric(float64(n)/elapsed.Seconds(), "takes/s")
	b.ReportMetric(float64(requests()-before)/float64(max(n, 1)), "requests/take")
	b.ReportMetric(millis(all.quantile(0.5)), "p50-ms")
	b.ReportMetric(millis(all.quantile(0.99)), "p99-ms")
}
