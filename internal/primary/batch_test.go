package primary_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// TestRoutineRaisesShareAStoreWrite: top-ups of reserves that still hold
// half of what they should wait up to StoreBatchDelay and go out in one
// store write; a reserve that runs dry is raised at once.
func TestRoutineRaisesShareAStoreWrite(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	store := fileStore(t, t.TempDir())
	r, p := startFilePrimary(t, z.Servers, z.Root, store, func(c *config.Primary) {
		c.MinReserve, c.MaxReserve = 1000, 1000
		c.StoreBatchDelay = 2 * time.Second
		c.SweepInterval = time.Hour // only events move the primary
		// A take of 300 must not look like demand that empties the
		// reserve within twice the delay: with the rig's runway of a
		// second, a take sampled a second after the birth is a rate of
		// about 190 a second, and its raise goes at once.
		c.Runway = time.Minute
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	const n = 20
	for i := range n {
		if err := c.Register(ctx, fmt.Sprintf("s%02d", i), seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
	}
	// Stamped, not only initialised: the stamp follows the store's record
	// of the birth, and on a loaded machine comes a while after.
	ceilings := make([]int64, n)
	waitFor(t, "every sequence stamped", func() bool {
		for i := range n {
			st, _, err := c.Describe(ctx, fmt.Sprintf("s%02d", i))
			if err != nil || !st.Validated() {
				return false
			}
			ceilings[i] = st.Ceiling
		}
		return true
	})
	puts := p.Stats().StorePuts
	// Leave each reserve between half and all of what the primary wants:
	// a routine top-up.
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		st, _, err := c.Describe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, name, st.Ceiling-st.Next+1-700); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	raised := func() bool {
		for i := range n {
			st, _, err := c.Describe(ctx, fmt.Sprintf("s%02d", i))
			if err != nil || st.Ceiling <= ceilings[i] {
				return false
			}
		}
		return true
	}
	waitFor(t, "the routine raises", raised)
	if d := time.Since(start); d < time.Second {
		t.Errorf("routine raises landed after %s, before the batch delay could have gathered them", d)
	}
	if got := p.Stats().StorePuts - puts; got > 2 {
		t.Errorf("%d routine raises took %d store writes, want 1 (2 if a take straddled the delay)", n, got)
	}
	// A reserve emptied: raised at once, without waiting for the delay.
	st, _, err := c.Describe(ctx, "s00")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if _, err := c.Take(ctx, "s00", st.Ceiling-st.Next+1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the urgent raise", func() bool {
		got, _, err := c.Describe(ctx, "s00")
		return err == nil && got.Ceiling > st.Ceiling
	})
	if d := time.Since(at); d > 1500*time.Millisecond {
		t.Errorf("an emptied reserve was raised after %s; it must not wait for the batch delay", d)
	}
}
