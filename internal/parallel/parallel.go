// Package parallel is the one bounded fan-out of seqkeeper: independent
// requests (ZooKeeper reads, writes and watches, store objects, allocator
// closes) sent side by side so that their round trips overlap.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Each calls fn(i) for every i in [0, n) on at most limit goroutines, in
// order of i as goroutines free up, and returns once every call has. A
// limit below 1 counts as 1. fn records its own results and errors, by
// index, so that the caller decides how they combine.
func Each(n, limit int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(limit, 1), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}
