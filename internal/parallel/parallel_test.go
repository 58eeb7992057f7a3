package parallel

import (
	"sync/atomic"
	"testing"
	"time"
)

// Each calls fn once for each index, never on more than limit goroutines
// at once, and a limit below 1 still gets the work done.
func TestEachCallsEveryIndexOnceWithinTheLimit(t *testing.T) {
	for _, c := range []struct{ n, limit int }{{0, 4}, {1, 4}, {10, 3}, {100, 8}, {5, 0}} {
		calls := make([]atomic.Int32, c.n)
		var running, peak atomic.Int32
		Each(c.n, c.limit, func(i int) {
			r := running.Add(1)
			for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			calls[i].Add(1)
			running.Add(-1)
		})
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Fatalf("n=%d limit=%d: index %d called %d times", c.n, c.limit, i, got)
			}
		}
		if lim := int32(max(c.limit, 1)); peak.Load() > lim {
			t.Fatalf("n=%d limit=%d: %d calls at once", c.n, c.limit, peak.Load())
		}
		if c.n >= 10 && c.limit > 1 && peak.Load() < 2 {
			t.Fatalf("n=%d limit=%d: never ran two calls at once", c.n, c.limit)
		}
	}
}
