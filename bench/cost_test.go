package bench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

var (
	costWarm    = flag.Duration("bench.costwarm", 70*time.Second, "StoreCost: warm-up before counting (a runway and more)")
	costMeasure = flag.Duration("bench.costdur", 2*time.Minute, "StoreCost: how long requests are counted")
)

// BenchmarkStoreCost is the S3 bill row: a primary with default settings
// (a 60 s runway, routine raises batched) keeps N busy sequences topped
// up while workers take from every one of them all the time (each
// sequence consumes about 50 IDs a second, so its reserve, 3,000 IDs, is
// sized by its rate, above the default minimum of 1,000). After a warm-up of a runway, it counts every request the store
// sends to the backend (persist.Store.Requests, what /metrics exports as
// seqkeeper_store_requests_total) and reports them per day, with the raises
// they paid for. The window is shorter than the compaction interval, so
// the log's compaction is measured apart (reportCompaction) and its cost
// per day reported beside. docs/operations.md turns them into dollars.
//
//	go test -run '^$' -bench 'StoreCost' -benchtime 1x ./bench/
func BenchmarkStoreCost(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("sequences=%d", n), func(b *testing.B) {
			for range b.N {
				storeCostOnce(b, n)
			}
		})
	}
}

func storeCostOnce(b *testing.B, n int) {
	ctx := context.Background()
	e := newEnv(b)
	admin := e.admin()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%05d", i)
		if err := admin.Register(ctx, names[i], seqzk.Registration{}); err != nil {
			b.Fatal(err)
		}
	}
	store := openStore(b, testenv.ObjectStore(b))
	p := startPrimary(b, e, store, nil)
	waitUntil(b, 5*time.Minute, "initialise", func() bool { return p.Stats().Initialised >= int64(n) })

	// Workers: every sequence gets a take of 100 IDs every 2 s, spread
	// evenly over the period.
	const workers, period, batch = 16, 2 * time.Second, 100
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var takeErr error
	for w := range workers {
		c := e.client()
		wg.Go(func() {
			mine := names[w*n/workers : (w+1)*n/workers]
			tick := time.NewTicker(period / time.Duration(len(mine)))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Take(ctx, mine[i%len(mine)], batch); err != nil {
					mu.Lock()
					takeErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	time.Sleep(*costWarm)
	before, reqsBefore := p.Stats(), store.Requests()
	b.ResetTimer()
	time.Sleep(*costMeasure)
	b.StopTimer()
	after, reqs := p.Stats(), store.Requests()
	close(stop)
	wg.Wait()
	if takeErr != nil {
		b.Fatal(takeErr)
	}
	day := float64(24*time.Hour) / float64(*costMeasure)
	b.ReportMetric(float64(reqs.Puts-reqsBefore.Puts)*day, "PUT/day")
	b.ReportMetric(float64(reqs.Gets-reqsBefore.Gets)*day, "GET/day")
	b.ReportMetric(float64(after.Raises-before.Raises)*day, "raises/day")
	b.ReportMetric(float64(after.StorePuts-before.StorePuts)*day, "store-writes/day")
	b.ReportMetric(float64(reqs.Puts-reqsBefore.Puts+reqs.Gets-reqsBefore.Gets)/float64(max(1, after.Raises-before.Raises)), "requests/raise")
	reportCompaction(b, store, float64(after.StorePuts-before.StorePuts)*day)
}
