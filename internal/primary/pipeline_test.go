package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// TestPipelinedRaises: while one batch's raises are on their way to
// ZooKeeper, the next batch's ceilings go to the store, but not to
// ZooKeeper before the first batch landed; and a sequence that moved while
// its raise was in the air is decided again when it lands (with no sweep
// to catch it, a taker that emptied the raised reserve would wait for
// ever).
func TestPipelinedRaises(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	store := fileStore(t, t.TempDir())
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: store}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = z.Root + "/cluster"
	cfg.MinReserve, cfg.MaxReserve = 1000, 1000
	cfg.StoreBatchDelay = 0       // every raise goes at once
	cfg.SweepInterval = time.Hour // only events move the primary
	p, err := primary.New(cfg, primary.Deps{Sequences: r.client(z.Servers, 4*time.Second), Store: store, Holder: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	p.HoldLandings(release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
	})

	c := r.client(z.Servers, 10*time.Second)
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	for _, name := range []string{"a", "b"} {
		if err := c.Register(ctx, name, seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "initialised", func() bool { return p.Stats().Initialised >= 2 })
	describe := func(name string) state.State {
		t.Helper()
		st, _, err := c.Describe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stored := func(name string) int64 {
		rec, err := store.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Ceiling
	}
	take := func(name string, n int64) {
		t.Helper()
		if _, err := c.Take(ctx, name, n); err != nil {
			t.Fatal(err)
		}
	}

	// a's reserve falls below the low-water mark: its raise goes to the
	// store, then to ZooKeeper, and is held before it lands.
	a0 := describe("a")
	take("a", a0.Ceiling-a0.Next+1-500)
	waitFor(t, "a raised in ZooKeeper", func() bool { return describe("a").Ceiling > a0.Ceiling })
	a1 := describe("a")

	// a is emptied up to its new ceiling while its flight is in the air:
	// that event's decision waits for the landing.
	deferred := p.Stats().Deferred
	take("a", a1.Ceiling-a1.Next+1)
	waitFor(t, "a's decision put off", func() bool { return p.Stats().Deferred > deferred })

	// b's raise is decided and stored meanwhile, and waits for a's flight
	// to land before it goes to ZooKeeper.
	b0 := describe("b")
	take("b", b0.Ceiling-b0.Next+1-500)
	waitFor(t, "b's ceiling in the store", func() bool { return stored("b") > b0.Ceiling })
	time.Sleep(200 * time.Millisecond)
	if got := describe("b"); got.Ceiling != b0.Ceiling {
		t.Fatalf("b raised in ZooKeeper to %d before the flight ahead of it landed", got.Ceiling)
	}

	close(release)
	released = true
	waitFor(t, "b raised in ZooKeeper", func() bool { return describe("b").Ceiling > b0.Ceiling })
	waitFor(t, "a raised again after its flight landed", func() bool { return describe("a").Ceiling > a1.Ceiling })
	for _, name := range []string{"a", "b"} {
		if st := describe(name); st.Ceiling > stored(name) {
			t.Errorf("%s: ZooKeeper ceiling %d above the stored %d", name, st.Ceiling, stored(name))
		}
	}
}

// TestATakeRightAfterARaiseIsSeen: the watch's notification of the
// primary's own raise is not read (the raise's reply says what it
// wrote), but a take that lands right after the raise is read and
// decided, whether it comes from another session or from the primary's
// own (serve's sidecar): with no sweep to catch it, a take whose
// notification the primary skipped would leave its taker waiting at the
// ceiling for ever. First the take lands while the raise is held before
// it lands (so it is read while the raise's notification may still be
// queued), then in a loop of takes that each empty the reserve and wait
// for its raise.
func TestATakeRightAfterARaiseIsSeen(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	store := fileStore(t, t.TempDir())
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: store}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = z.Root + "/cluster"
	cfg.MinReserve, cfg.MaxReserve = 100, 100
	cfg.StoreBatchDelay = 0       // every raise goes at once
	cfg.SweepInterval = time.Hour // only events move the primary
	own := r.client(z.Servers, 4*time.Second)
	p, err := primary.New(cfg, primary.Deps{Sequences: own, Store: store, Holder: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	p.HoldLandings(release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
	})

	c := r.client(z.Servers, 10*time.Second)
	sidecar, err := seqzk.NewClient(own.ZK(), seqzk.Options{Root: r.root, CeilingWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "a", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "initialised", func() bool { return p.Stats().Initialised >= 1 })
	describe := func() state.State {
		t.Helper()
		st, _, err := c.Describe(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	empty := func(via *seqzk.Client) {
		t.Helper()
		st := describe()
		if _, err := via.Take(ctx, "a", st.Ceiling-st.Next+1); err != nil {
			t.Fatal(err)
		}
	}

	// Emptied: raised from the state the primary read (one transaction,
	// stamped), and held before it lands.
	a0 := describe()
	empty(c)
	waitFor(t, "a raised in ZooKeeper", func() bool { return describe().Ceiling > a0.Ceiling })
	a1 := describe()
	deferred := p.Stats().Deferred
	empty(c)
	waitFor(t, "the take right after the raise read, its decision put off", func() bool { return p.Stats().Deferred > deferred })
	close(release)
	released = true
	waitFor(t, "a raised again after its flight landed", func() bool { return describe().Ceiling > a1.Ceiling })

	raises := p.Stats().Raises
	for i := range 200 {
		via := c
		if i%2 == 1 {
			via = sidecar
		}
		// Each take empties the reserve, and waits for the raise the one
		// before it called for.
		if _, err := via.Take(ctx, "a", 1_000_000); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	if got := p.Stats().Raises - raises; got < 199 {
		t.Fatalf("%d raises for 200 takes that each emptied the reserve", got)
	}
	// ZooKeeper first: the last take called for one more raise, which
	// may land between the two reads, store first. Read in this order, a
	// ceiling in ZooKeeper above the store's is the invariant broken, not
	// a raise that landed in between.
	st := describe()
	rec, err := store.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if st.Ceiling > rec.Ceiling {
		t.Fatalf("ZooKeeper ceiling %d above the stored %d", st.Ceiling, rec.Ceiling)
	}
}
