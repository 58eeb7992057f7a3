package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// A revalidation the primary planned for one incarnation of x never
// stamps another: the primary decides to revalidate x (a ZooKeeper leader
// election) with floor F, and its store write is slow; meanwhile an
// operator advances x (above the store: F), workers take from F, x is
// deleted and a worker registers x again. The planned revalidation must
// leave the new registration to its birth (Initialise, above the deletion
// record), not stamp it at F, below IDs the first incarnation handed out.
func TestAPlannedRevalidationLeavesANewIncarnationToItsBirth(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	dir := t.TempDir()
	pstore, pgate := gatedFileStore(t, dir)
	r := &fileRig{t: t, servers: ens.Servers(), root: "/rv/all-sequences", store: pstore}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = "/rv/cluster"
	cfg.Runway = time.Second
	cfg.MinReserve = 100
	cfg.SweepInterval = 200 * time.Millisecond
	cfg.StoreTimeout = time.Minute
	p, err := primary.New(cfg, primary.Deps{Sequences: r.client(ens.Servers(), 30*time.Second), Store: pstore, Holder: "p1", Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan error, 1)
	go func() { pdone <- p.Run(pctx) }()
	t.Cleanup(func() { pcancel(); <-pdone })
	opStore := fileStore(t, dir)
	op := r.client(ens.Servers(), 30*time.Second)
	worker := r.client(ens.Servers(), 30*time.Second)
	waitFor(t, "the root", func() bool { ok, _, _ := op.ZK().Session().Exists(ctx, r.root); return ok })
	seen := ids{}
	if err := worker.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	got, err := worker.Take(ctx, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "first incarnation", got)
	time.Sleep(time.Second) // let the primary settle
	g := pgate.arm()
	ens.Stop(0)
	if err := ens.Start(0); err != nil {
		g.fail(t, err)
	}
	waitGate(t, "the primary's store write after the election", g.hit)
	g1 := g
	g = pgate.arm()
	close(g1.release)
	waitGate(t, "the primary's second store write after the election", g.hit)
	st, _, _ := op.Inspect(ctx, "x")
	t.Logf("x before the advance: next %d ceiling %d epoch %d", st.Next, st.Ceiling, st.ZKEpoch)
	a, err := primary.Advance(ctx, op, opStore, "x", st.Next+1, 100)
	if err != nil {
		g.fail(t, err)
	}
	t.Logf("advanced: next %d ceiling %d", a.State.Next, a.State.Ceiling)
	for i := 0; i < 3; i++ {
		got, err := worker.Take(ctx, "x", 20)
		if err != nil {
			g.fail(t, err)
		}
		seen.add(t, "the advanced first incarnation", got)
	}
	dead, err := op.Operator().Delete(ctx, "x", opStore)
	if err != nil {
		g.fail(t, err)
	}
	t.Logf("deleted up to %d", dead)
	if err := worker.Register(ctx, "x", seqzk.Registration{}); err != nil {
		g.fail(t, err)
	}
	// A worker of the new incarnation waits for the primary to initialise it.
	fresh := r.client(ens.Servers(), 10*time.Second)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type took struct {
		got state.Ranges
		err error
	}
	ch := make(chan took, 1)
	go func() { got, err := fresh.Take(cctx, "x", 20); ch <- took{got, err} }()
	time.Sleep(200 * time.Millisecond)
	close(g.release)
	tk := <-ch
	got, err = tk.got, tk.err
	if err != nil {
		t.Fatalf("take from the second incarnation: %v", err)
	}
	t.Logf("second incarnation took %v", got)
	seen.add(t, "the second incarnation", got)
	t.Logf("stats: %+v", p.Stats())
}
