package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// BenchmarkRoots measures several roots in one process: the
// same load, 8 clients each take emptying a reserve over 200 sequences in
// all (BenchmarkRaises' load), served by one root, then spread over four
// roots whose primaries share one ZooKeeper session (as 'seqkeeper serve'
// of a roots: list runs them), each with its own store, on the same
// ensemble. raises/s is the total of every root's primary. Before the
// load, the roots idle: heap-B/root, goroutines/root and idle-cpu-ms/s
// are what the primaries of the roots cost with their sequences
// initialised and nothing taken (heap after GC; process CPU time over
// -bench.dur). Run the two alternately:
//
//	go test -run '^$' -bench 'Roots' -count 4 ./bench/ -bench.dur=5s
func BenchmarkRoots(b *testing.B) {
	for _, roots := range []int{1, 4} {
		b.Run(fmt.Sprintf("roots=%d", roots), func(b *testing.B) {
			for range b.N {
				rootsOnce(b, roots)
			}
		})
	}
}

func rootsOnce(b *testing.B, roots int) {
	b.StopTimer()
	const sequences, clients = 200, 8
	ctx := context.Background()
	e := newEnv(b)
	heapBefore, goBefore := heapAfterGC(), runtime.NumGoroutine()
	shared := e.session()
	type served struct {
		env   *env
		p     *primary.Primary
		names []string
	}
	rs := make([]served, roots)
	for i := range rs {
		re := *e
		re.root = fmt.Sprintf("%s-r%d", e.root, i)
		re.primaryZK = shared
		// Registered on the shared session: a session per root would
		// count its buffers in the roots' heap.
		admin, err := seqzk.NewClient(shared, seqzk.Options{Root: re.root})
		if err != nil {
			b.Fatal(err)
		}
		if err := shared.EnsurePath(ctx, re.root); err != nil {
			b.Fatal(err)
		}
		for k := range sequences / roots {
			name := fmt.Sprintf("r%03d", k)
			if err := admin.Register(ctx, name, seqzk.Registration{}); err != nil {
				b.Fatal(err)
			}
			rs[i].names = append(rs[i].names, name)
		}
		rs[i].env = &re
		rs[i].p = startPrimary(b, &re, openStore(b, testenv.ObjectStore(b)), func(c *config.Primary) {
			c.MinReserve, c.Runway = 100, time.Nanosecond
		})
	}
	for _, r := range rs {
		waitUntil(b, time.Minute, "initialise", func() bool { return r.p.Stats().Initialised >= int64(len(r.names)) })
	}
	cpuBefore := cpuTime()
	time.Sleep(*runFor)
	idleCPU := cpuTime() - cpuBefore
	heap, gor := heapAfterGC(), runtime.NumGoroutine()

	cs := make([]*sequence.Client, clients)
	for i := range cs {
		cs[i] = rs[i%roots].env.client()
	}
	var before int64
	for _, r := range rs {
		before += r.p.Stats().Raises
	}
	deadline := time.Now().Add(*runFor)
	b.StartTimer()
	elapsed := goroutines(b, clients, func(i int) error {
		r := rs[i%roots]
		mine := clients / roots // clients on this root
		for k := 0; time.Now().Before(deadline); k++ {
			name := r.names[(i/roots)+mine*(k%(len(r.names)/mine))]
			if _, err := cs[i].Take(ctx, name, 1_000_000); err != nil {
				return err
			}
		}
		return nil
	})
	b.StopTimer()
	var raises int64
	for _, r := range rs {
		raises += r.p.Stats().Raises
	}
	b.ReportMetric(float64(raises-before)/elapsed.Seconds(), "raises/s")
	b.ReportMetric((float64(heap)-float64(heapBefore))/float64(roots), "heap-B/root")
	b.ReportMetric(float64(gor-goBefore)/float64(roots), "goroutines/root")
	b.ReportMetric(float64(idleCPU.Milliseconds())/runFor.Seconds(), "idle-cpu-ms/s")
}
