package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
)

// Regression (a repro of issue 26, "restore beside a running primary"):
// ZooKeeper loses two sequences while a primary runs (their znodes and the
// root's own data, as a restore from an older copy of the root would). The
// primary's restore reads their records, computes their states (stored
// ceiling + 1), writes the store, and then creates them in ZooKeeper.
// Meanwhile an operator runs 'seqkeeper restore' (safe beside a running
// primary), which re-creates both at the same stored ceiling + 1; clients
// take IDs from one of them, and the operator deletes it. The primary's
// transaction then failed on the sequence that still existed, and its
// one-by-one fallback created the deleted name again at the same next, so
// its first IDs were handed out again. Every birth is now guarded by the
// name's deletion record as read when it was decided: the delete's record
// makes the primary's create fail. The primary's store write is held here
// to widen the window.
func TestPrimaryRestoreCannotOvertakeADelete(t *testing.T) {
	parallelUnderShort(t)
	dir := t.TempDir()
	r, _, c, pgate := gatedPrimary(t, dir, nil, "s", "t")
	ctx := context.Background()
	time.Sleep(500 * time.Millisecond)

	// ZooKeeper loses both znodes; the primary's restore is held at its
	// store write.
	g := pgate.arm()
	loseZnodes(t, c, "s", "t")
	waitGate(t, "the primary's restore store write", g.hit)

	// The operator: seqkeeper restore, takes, seqkeeper delete s.
	ostore := fileStore(t, dir)
	rep, err := reconcile.Compare(ctx, c, ostore)
	if err != nil {
		g.fail(t, err)
	}
	rep.Plan()
	for _, f := range rep.Findings {
		if f.Action != reconcile.RecreateZnode {
			close(g.release)
			t.Fatalf("the operator's restore finds %s %s (%s); want it lost", f.Sequence, f.Level, f.Problem)
		}
	}
	if err := reconcile.Apply(ctx, c, ostore, rep, 100); err != nil {
		g.fail(t, err)
	}
	old, err := c.Take(ctx, "s", 50)
	if err != nil {
		g.fail(t, err)
	}
	tomb, err := c.Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	t.Logf("operator restored s and t; took %v from s; deleted s (tombstone ceiling %d)", old, tomb)
	close(g.release)

	time.Sleep(2 * time.Second)
	exists, _, err := c.ZK().Exists(ctx, r.root+"/s")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ostore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2 s after the primary's store write: znode s exists=%v; store record deleted=%v ceiling=%d", exists, rec.Deleted(), rec.Ceiling)
	if !exists {
		return
	}
	t.Errorf("deleted sequence s exists again in ZooKeeper: want it gone")
	got, err := c.Take(ctx, "s", 50)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %v from the re-created s", got)
	for _, o := range old {
		for _, n := range got {
			if n.Start <= o.End && o.Start <= n.End {
				t.Errorf("re-created s handed out %v, overlapping %v the deleted incarnation handed out (tombstone ceiling %d)", n, o, tomb)
			}
		}
	}
}
