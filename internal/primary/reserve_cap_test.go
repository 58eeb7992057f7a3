package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A capped reserve is emptied by a few takes, so under steady demand its
// takers reach the ceiling again and again. Each time the primary must
// raise it at once: at the cost of a raise's round trip (a store write
// and a ZooKeeper write), never of a sweep and never of the store's pace.
// The taker shares the primary's ZooKeeper session, as the sidecar of
// 'seqkeeper serve' does: ZooKeeper 3.8 lets a one-shot watch end a
// persistent one of the same session (zkclient keeps them apart), which
// silenced the primary's watch of the sequence at the first wait. The
// sweep is the default 10 s, and the bound on one take, 2 s, is far above
// a raise's round trip on a loaded machine and far below a sweep.
func TestCappedReserveKeepsUpWithDemand(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	zc := r.session()
	seqs, err := seqzk.NewClient(zc, seqzk.Options{Root: r.root, CeilingWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = r.marker
	cfg.MinReserve, cfg.MaxReserve = 100, 100
	p, err := primary.New(cfg, primary.Deps{Sequences: seqs, Store: r.store(), Holder: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the root", func() bool { ok, _, _ := zc.Session().Exists(ctx, r.root); return ok })
	if err := seqs.Register(ctx, "capped", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	takeAll(t, seqs, "capped", 1)

	const bound, run = 2 * time.Second, 5 * time.Second
	var ids, takes int64
	var worst time.Duration
	for start := time.Now(); time.Since(start) < run; takes++ {
		t0 := time.Now()
		ids += takeAll(t, seqs, "capped", 150) // three quarters of a raise
		worst = max(worst, time.Since(t0))
	}
	st := p.Stats()
	t.Logf("%d IDs in %d takes of 150 in %s with the reserve capped at 100: %d raises, slowest take %s",
		ids, takes, run, st.Raises, worst.Round(time.Millisecond))
	if worst > bound {
		t.Fatalf("a take waited %s for a raise of a capped reserve under steady demand; want at most %s (a raise's round trip, not a sweep of %s)",
			worst.Round(time.Millisecond), bound, cfg.SweepInterval)
	}
	if st.Raises < takes/2 {
		t.Fatalf("%d raises for %d takes that each empty most of a capped reserve", st.Raises, takes)
	}
}
