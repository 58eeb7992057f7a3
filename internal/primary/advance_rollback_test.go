package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// An advance that reads the store, loses its transaction, and reads
// ZooKeeper again after a rollback that lost a raise made meanwhile, must
// stamp the rolled-back state above the store's ceiling as it is now, not
// as it was at its first reading: that one lies below IDs the lost
// history handed out.
func TestAnAdvanceAcrossAZooKeeperRollbackStaysAboveTheLostHistory(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	r := &fileRig{t: t, root: "/adv/all-sequences"}
	dir := t.TempDir()
	gated, gb := gatedFileStore(t, dir)
	plain := fileStore(t, dir)
	boss := r.client(ens.Servers(), 30*time.Second) // stands in for the primary
	if err := boss.ZK().EnsurePath(ctx, r.root); err != nil {
		t.Fatal(err)
	}
	put := func(c int64) {
		t.Helper()
		if err := seqzk.PutAtCurrentEpoch(ctx, plain, persist.Record{Name: "x", Ceiling: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := boss.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	put(1000)
	if err := boss.Meta().EnsureMeta(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := boss.Meta().ReadDeletion(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boss.Keeper().Initialise(ctx, "x", 1, 1000, d); err != nil {
		t.Fatal(err)
	}
	if _, err := boss.Keeper().Restamp(ctx, "x", 0, 1, 1000, false); err != nil { // the birth stored: put(1000)
		t.Fatal(err)
	}
	seen := ids{}
	worker := r.client(ens.Servers(), 30*time.Second)
	op := r.client(ens.Servers(), 30*time.Second) // the operator; its session predates the copy
	got, err := worker.Take(ctx, "x", 10)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "before the copy", got)
	copyDir := ens.Snapshot(t, 0)
	waitFor(t, "sessions", func() bool {
		return boss.ZK().HasSession() && op.ZK().HasSession() && worker.ZK().HasSession()
	})
	put(2000)
	if _, err := boss.Keeper().Revalidate(ctx, "x", 1001, 2000); err != nil {
		t.Fatal(err)
	}
	g := gb.arm()
	type res struct {
		a   primary.Advanced
		err error
	}
	done := make(chan res, 1)
	go func() {
		a, err := primary.Advance(ctx, op, gated, "x", 1500, 100)
		done <- res{a, err}
	}()
	select {
	case <-g.hit:
	case <-time.After(30 * time.Second):
		t.Fatal("advance never wrote the store")
	}
	// The lost history: the primary raises (store first), workers take.
	put(5000)
	if _, err := boss.Keeper().Raise(ctx, "x", 5000); err != nil {
		g.fail(t, err)
	}
	for i := 0; i < 6; i++ {
		got, err := worker.Take(ctx, "x", 500)
		if err != nil {
			g.fail(t, err)
		}
		seen.add(t, "the lost history", got)
	}
	ens.Rollback(t, 0, copyDir)
	now := r.client(ens.Servers(), 10*time.Second)
	for i := 0; i < 300; i++ { // ordinary traffic: zxids move past the lost history's
		if _, err := now.ZK().Session().Set(ctx, r.root, nil, -1); err != nil {
			g.fail(t, err)
		}
	}
	waitFor(t, "the operator's session", func() bool { return op.ZK().HasSession() })
	close(g.release)
	out := <-done
	if out.err != nil {
		t.Fatalf("advance: %v", out.err)
	}
	t.Logf("advance: replaced next %d, wrote next %d ceiling %d epoch %d, stored %d", out.a.Replaced.Next, out.a.State.Next, out.a.State.Ceiling, out.a.State.ZKEpoch, out.a.Stored)
	fresh := r.client(ens.Servers(), 10*time.Second)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err = fresh.Take(cctx, "x", 100)
	if err != nil {
		t.Fatalf("take after the advance: %v", err)
	}
	seen.add(t, "a worker after the advance", got)
}
