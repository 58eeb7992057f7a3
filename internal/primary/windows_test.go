package primary_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Windows as a user meets them: a sequence created cold with windows and
// the default reserve, taken from by as many clients as windows. The
// primary opens one window per slot at once; the clients' demand then
// sizes the windows they refill, so they grow well past the first split of
// the reserve, clients keep to their slots (almost no conflicts), and
// every ID is unique and under a stored ceiling. The clients take 10 IDs
// at a time, so that the demand does not depend on how fast a loaded
// machine under -race takes one, and each takes at least minTakes times:
// the conflicts are counted over a fixed amount of work, not over however
// few takes the windows needed to grow on a quiet machine (the first
// refills, while the windows are small, cost a handful of conflicts
// whatever the horizon).
func TestWindowsGrowWithDemandUnderThePrimary(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", func(c *config.Primary) {
		c.Runway = config.DefaultRunway
		c.MinReserve = config.DefaultMinReserve
	})
	admin := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := admin.ZK().Session().Exists(ctx, r.root); return ok })
	const slots = 4
	if err := admin.Register(ctx, "hot", seqzk.Registration{Windows: slots}); err != nil {
		t.Fatal(err)
	}
	var first []seqzk.Window
	waitFor(t, "the first windows", func() bool {
		_, ws, err := admin.Inspect(ctx, "hot")
		first = ws
		return err == nil && len(ws) == slots
	})
	// The first reserve (2 x MinReserve) split as before: half of each
	// slot's share.
	initial := int64(2 * config.DefaultMinReserve / slots / 2)
	for k, w := range first {
		if !strings.HasPrefix(w.Name, "w-"+string(rune('0'+k))+"-") || w.State.End-w.State.Start+1 != initial {
			t.Fatalf("first windows %+v; want one of %d IDs in each slot", first, initial)
		}
	}

	l := newLedger()
	store := r.store()
	const minTakes = 250
	var stop atomic.Bool
	var wg sync.WaitGroup
	var takes, conflicts int64
	var mu sync.Mutex
	for i := range slots {
		c := r.client(10 * time.Second)
		wg.Go(func() {
			var mine []state.Ranges
			check := func() {
				rec, err := store.Get(ctx, "hot")
				if err != nil {
					t.Errorf("read the store: %v", err)
					return
				}
				for _, rs := range mine {
					l.took(rs, rec.Ceiling)
				}
				mine = mine[:0]
			}
			n := int64(0)
			for n < minTakes || !stop.Load() {
				got, err := c.Take(ctx, "hot", 10)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					break
				}
				n++
				// The store is read after the takes it checks: stored
				// ceilings only grow, so a take above it was handed out
				// above every ceiling stored before it.
				if mine = append(mine, got); len(mine) == 100 {
					check()
				}
			}
			check()
			mu.Lock()
			defer mu.Unlock()
			conflicts += c.Stats().Conflicts
			takes += n
		})
	}
	var sizes []int64
	grown := func() bool {
		_, ws, err := admin.Inspect(ctx, "hot")
		if err != nil {
			return false
		}
		sizes = sizes[:0]
		for _, w := range ws {
			sizes = append(sizes, w.State.End-w.State.Start+1)
		}
		return slices.Max(sizes) > 4*initial
	}
	waitForUpTo(t, time.Minute, "windows sized from demand, larger than 4 x the first", grown)
	stop.Store(true)
	wg.Wait()
	l.check(t)
	_, ws, err := admin.Inspect(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	open := make(map[string]bool)
	for _, w := range ws {
		open[w.Name[:strings.LastIndex(w.Name, "-")]] = true
	}
	t.Logf("%d IDs in %d takes, %d conflicts; windows %v", l.issuedNow(), takes, conflicts, sizes)
	if len(open) != slots {
		t.Errorf("windows %v: want every one of the %d slots open", ws, slots)
	}
	if conflicts*20 > takes {
		t.Errorf("%d conflicts in %d takes; want under 0.05 per take", conflicts, takes)
	}
}
