package primary_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// takeAll takes n IDs of name, in as many takes as the ceiling needs, and
// returns how many it got.
func takeAll(t *testing.T, c *seqzk.Client, name string, n int64) int64 {
	t.Helper()
	var got int64
	for got < n {
		rs, err := c.Take(context.Background(), name, n-got)
		if err != nil {
			t.Fatalf("take %d of %s: %v", n-got, name, err)
		}
		for _, r := range rs {
			got += r.End - r.Start + 1
		}
	}
	return got
}

// settle waits until the primary has raised nothing for quiet.
func settle(t *testing.T, run *running, quiet time.Duration) {
	t.Helper()
	last, since := run.p.Stats().Raises, time.Now()
	waitFor(t, "no raise for "+quiet.String(), func() bool {
		if n := run.p.Stats().Raises; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

// Demand, not spikes: a few bursts must not leave a reserve
// sized as if the burst went on for a runway. At the default settings, one
// sequence gets about 12,800 IDs over some 20 seconds: two takes of 5,000
// and 200 takes of 14, one every 100 ms. Once the primary settles, the IDs
// reserved above next (what a ZooKeeper data loss would skip) are at most
// twice the largest burst, or a runway of the demand (all 12,800 were taken
// within the last runway), and never below what MinReserve demands.
// Before the rate was smoothed, the rate read 5,000 IDs/s after each burst
// and the ceiling went 600,000 ahead and more.
func TestReserveFitsBursts(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	var cfg config.Primary
	run := r.start("p1", func(c *config.Primary) {
		marker := c.MarkerPath
		*c = config.DefaultPrimary()
		c.MarkerPath = marker
		cfg = *c
	})
	c := r.client(30 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "bursts", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	const burst, small, smallTakes = 5000, 14, 200
	start := time.Now()
	var taken int64
	for i := range smallTakes {
		if i == 50 || i == 120 { // at 5 s and 12 s
			taken += takeAll(t, c, "bursts", burst)
		}
		taken += takeAll(t, c, "bursts", small)
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * 100 * time.Millisecond)))
	}
	took := time.Since(start)
	settle(t, run, 2*time.Second)
	st, _, err := c.Describe(ctx, "bursts")
	if err != nil {
		t.Fatal(err)
	}
	reserved := st.Ceiling - st.Next + 1
	bound := max(2*burst, taken, 2*cfg.MinReserve)
	var rate float64
	if s := run.p.Status(); len(s.Sequences) == 1 {
		rate = s.Sequences[0].Rate
	}
	t.Logf("%d IDs taken in %s (largest burst %d): %d IDs reserved above next (ceiling %d, next %d), rate %.1f IDs/s; bound %d",
		taken, took.Round(100*time.Millisecond), int64(burst), reserved, st.Ceiling, st.Next, rate, bound)
	if reserved > bound {
		t.Fatalf("%d IDs reserved after %d taken in bursts of at most %d: want at most %d (2 x the largest burst, or a runway of the demand)",
			reserved, taken, int64(burst), bound)
	}
}

// A steady demand still gets a runway: with a runway of 4 s, takes of 200
// IDs every 100 ms (2,000 IDs/s) never wait for the primary once the rate
// has warmed up (two runways: 86 % of it), and after four runways the
// raise target (twice the reserve) is about a runway of the demand.
func TestReserveReachesARunwayAtASteadyRate(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	const runway = 4 * time.Second
	run := r.start("p1", func(c *config.Primary) { c.Runway = runway })
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "steady", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	// Ten round trips a second: few enough that a loaded machine keeps
	// the demand steady, which is this test's premise (fifty a second
	// fell to half the rate, rising and falling, on two busy cores).
	const n, every = 200, 100 * time.Millisecond
	takeAll(t, c, "steady", n) // initialised
	start := time.Now()
	var taken, warmTaken int64
	warmWaits := int64(-1)
	const warm, end = 2 * runway, 4 * runway
	// A ticker drops the ticks a busy machine makes the loop miss: the
	// demand stays steady, or falls, but never turns into a burst of
	// takes catching up (which a reserve of one runway need not cover).
	tick := time.NewTicker(every)
	defer tick.Stop()
	for ; time.Since(start) < end; <-tick.C {
		if warmWaits < 0 && time.Since(start) >= warm {
			warmWaits, warmTaken = c.Stats().Waits, taken
		}
		taken += takeAll(t, c, "steady", n)
	}
	took := time.Since(start)
	waits := c.Stats().Waits - warmWaits
	// The demand since the warm-up, as the takes saw it (a loaded machine
	// may fall behind the 2,000 IDs/s asked for).
	rate := float64(taken-warmTaken) / (took - warm).Seconds()
	reserve := run.p.ReserveOf("steady")
	var smoothed float64
	if s := run.p.Status(); len(s.Sequences) == 1 {
		smoothed = s.Sequences[0].Rate
	}
	want := rate * runway.Seconds()
	t.Logf("%d IDs in %s, %.0f IDs/s after the warm-up (the primary's smoothed rate %.0f); reserve %d, raise target %d, a runway of demand %.0f; %d waits after the warm-up (%d in all)",
		taken, took.Round(10*time.Millisecond), rate, smoothed, reserve, 2*reserve, want, waits, c.Stats().Waits)
	if waits != 0 {
		t.Errorf("%d takes waited for the primary after the warm-up: want none", waits)
	}
	if target := float64(2 * reserve); target < 0.75*want || target > 1.3*want {
		t.Errorf("raise target %.0f: want about a runway of demand, %.0f", target, want)
	}
}

// A primary that takes over a busy sequence reads its demand over the time
// it has watched, not as if there had been none before its term: half a
// runway into the term, the raise target is most of a runway of the
// demand. Its rate was a mean started at zero, which after half a runway
// read 39 % of the demand, and a takeover that found reserves used up
// left takes waiting at the ceiling whenever a raise was slow
// (TestRollingUpgrade's roll forward under load).
func TestReserveAfterTakeoverFitsTheDemand(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	const runway = 8 * time.Second
	tune := func(c *config.Primary) { c.Runway = runway }
	// p1 leaves a reserve that outlasts a handover on a loaded machine:
	// takes that waited at the ceiling in p2's first seconds would be
	// demand no primary can see, and p2's mean would rightly count them
	// as seconds of less demand.
	run := r.start("p1", func(c *config.Primary) { tune(c); c.MinReserve = 20 * 2000 })
	c := r.client(10 * time.Second)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "steady", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	const n, every = 200, 100 * time.Millisecond // 2,000 IDs/s, as above
	takeAll(t, c, "steady", n)                   // initialised
	var taken atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A ticker, as in TestReserveReachesARunwayAtASteadyRate: takes
		// held up by the handover must not come back as a burst, which
		// the primary's mean of the term has not seen yet.
		tick := time.NewTicker(every)
		defer tick.Stop()
		for ; ctx.Err() == nil; <-tick.C {
			rs, err := c.Take(ctx, "steady", n)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("take: %v", err)
				}
				return
			}
			for _, r := range rs {
				taken.Add(r.End - r.Start + 1)
			}
		}
	}()
	time.Sleep(runway / 2)
	run.stop()
	<-run.done
	run.done <- nil
	run2 := r.start("p2", tune)
	// Half a runway from p2's first sample of the demand, not from its
	// start: until its samples cover a quarter runway the mean counts
	// that much on purpose (rateOf), and a loaded machine can delay the
	// first sample by seconds.
	waitFor(t, "p2's first sample", func() bool {
		s := run2.p.Status()
		return len(s.Sequences) == 1 && s.Sequences[0].Rate > 0
	})
	from, fromTaken := time.Now(), taken.Load()
	time.Sleep(runway / 2)
	reserve := run2.p.ReserveOf("steady")
	rate := float64(taken.Load()-fromTaken) / time.Since(from).Seconds()
	stop()
	<-done
	want := rate * runway.Seconds()
	t.Logf("half a runway into the new term: %.0f IDs/s taken, raise target %d (twice the reserve), a runway of demand %.0f", rate, 2*reserve, want)
	if target := float64(2 * reserve); target < 0.7*want {
		t.Errorf("raise target %.0f half a runway after a takeover: want most of a runway of demand (%.0f)", target, want)
	}
}
