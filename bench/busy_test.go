package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

var (
	busySequences = flag.Int("bench.busy", 100_000, "BenchmarkBusy: the sequences, each taken from once a minute")
	busyTake      = flag.Int64("bench.busytake", 1000, "BenchmarkBusy: the IDs of each take (a worker's batch)")
	busyFor       = flag.Duration("bench.busyfor", 10*time.Minute, "BenchmarkBusy: how long the load runs")
)

// BenchmarkBusy measures a busy load: -bench.busy sequences (100,000),
// each taken from once a minute (-bench.busytake IDs a take, a worker's
// batch), by 64 takers on 8 sessions, with one primary at its default
// settings, for -bench.busyfor (10 minutes). Every 5 s it reads each
// sequence's reserve as the primary sees it and keeps the shortest runway
// (IDs left ÷ the sequence's demand), and it times every take: a take
// that found its reserve empty waited for a raise (take-max-ms). It reports the process's CPU (takers
// included) per second of load, the heap after GC with the primary
// following every sequence, and the store's requests, per day at this
// load.
//
//	SEQKEEPER_TEST_ZK_HEAP=1g go test -run '^$' -bench 'Busy' -benchtime 1x -timeout 30m ./bench/
func BenchmarkBusy(b *testing.B) {
	n, take := *busySequences, *busyTake
	const takers, sessions = 64, 8
	ctx := context.Background()
	e := newEnv(b)
	admin := e.admin()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("b%06d", i)
	}
	register(b, admin, names)
	store := openStore(b, testenv.ObjectStore(b))
	heapBefore := heapAfterGC()
	p := startPrimary(b, e, store, nil) // default settings
	waitUntil(b, 10*time.Minute, "initialise", func() bool { return p.Stats().Initialised >= int64(n) })
	clients := make([]*seqzk.Client, sessions)
	for i := range clients {
		clients[i] = e.admin()
	}

	period := time.Minute / time.Duration(n/takers) // between one taker's takes
	var took, failed atomic.Int64
	lat := make([]durations, takers)
	var minRunway atomic.Int64
	minRunway.Store(math.MaxInt64)
	demand := float64(take) / 60 // IDs a second per sequence
	sample := func() {
		p.StatusOf(func(s *primary.SequenceStatus) bool {
			if runway := time.Duration(float64(s.Ceiling-s.Next+1) / demand * float64(time.Second)); runway < time.Duration(minRunway.Load()) {
				minRunway.Store(int64(runway))
			}
			return false
		})
	}
	st0, req0, cpu0 := p.Stats(), store.Requests(), cpuTime()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	deadline := time.Now().Add(*busyFor)
	elapsed := goroutines(b, takers, func(i int) error {
		c := clients[i%sessions]
		next := time.Now().Add(time.Duration(i) * period / takers)
		for k := i; time.Now().Before(deadline); k += takers {
			time.Sleep(time.Until(next))
			next = next.Add(period)
			t0 := time.Now()
			if _, err := c.Take(ctx, names[k%n], take); err != nil {
				failed.Add(1)
				continue
			}
			lat[i] = append(lat[i], time.Since(t0))
			took.Add(1)
		}
		return nil
	})
	close(stop)
	<-sampled
	sample()
	st1, req1, cpu1 := p.Stats(), store.Requests(), cpuTime()
	heap := heapAfterGC()
	var all durations
	for _, l := range lat {
		all = append(all, l...)
	}
	secs := elapsed.Seconds()
	perDay := 86400 / secs
	b.ReportMetric(float64(took.Load())/secs, "takes/s")
	b.ReportMetric(float64(failed.Load()), "failed-takes")
	b.ReportMetric(millis(all.quantile(0.999)), "take-p99.9-ms")
	b.ReportMetric(millis(all.quantile(1)), "take-max-ms")
	b.ReportMetric(time.Duration(minRunway.Load()).Seconds(), "min-runway-s")
	b.ReportMetric(float64(st1.Raises-st0.Raises)/secs, "raises/s")
	b.ReportMetric((cpu1-cpu0).Seconds()/secs, "CPU-s/s")
	b.ReportMetric((float64(heap)-float64(heapBefore))/float64(n), "B/sequence")
	b.ReportMetric(float64(req1.Puts-req0.Puts)*perDay, "store-PUTs/day")
	b.ReportMetric(float64(req1.Gets-req0.Gets)*perDay, "store-GETs/day")
	b.ReportMetric(float64(st1.StorePuts-st0.StorePuts)/secs, "store-writes/s")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
