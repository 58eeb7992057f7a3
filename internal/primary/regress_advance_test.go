package primary_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/admin"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// Regression: an operator advances a sequence (the store and ZooKeeper get
// ceiling A, above the ceiling the running primary last wrote), clients
// take IDs above the old ceiling, and the sequence is deleted (tombstone
// at A) and created again before the primary has handled the advanced
// state. The primary started the new incarnation at its in-memory copy of
// the record's ceiling + 1, not at the tombstone's, so the new incarnation
// handed out IDs the old one issued. A registration's floor is now read
// afresh once it is seen. Here the primary's loop is held by a slow store
// write of another sequence while the operator's commands run.
func TestInitialisationStartsAboveAnAdvancedTombstone(t *testing.T) {
	parallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, pgate := gatedPrimary(t, dir, nil, "s", "other")
	ctx := context.Background()
	time.Sleep(500 * time.Millisecond) // the primary settles (no raise due)
	st, _, err := c.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	before := st.Ceiling

	// The primary's loop is busy with a store write for "other".
	g := pgate.arm()
	if _, err := c.Take(ctx, "other", 150); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "the primary's store write", g.hit)

	// The operator: advance s just past its ceiling, clients take, delete,
	// create again.
	ostore := fileStore(t, dir)
	a, err := primary.Advance(ctx, c, ostore, "s", before+1, 100)
	if err != nil {
		g.fail(t, err)
	}
	old, err := c.Take(ctx, "s", a.State.Ceiling-a.State.Next+1)
	if err != nil {
		g.fail(t, err)
	}
	tomb, err := c.Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	if _, err := admin.Create(ctx, c, "s", seqzk.Registration{}); err != nil {
		g.fail(t, err)
	}
	t.Logf("ceiling before advance %d; advanced to next %d ceiling %d (stored %d); old incarnation took %v; tombstone ceiling %d",
		before, a.State.Next, a.State.Ceiling, a.Stored, old, tomb)
	close(g.release)

	got, err := c.Take(ctx, "s", 100)
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ = c.Describe(ctx, "s")
	t.Logf("new incarnation took %v (state next %d ceiling %d)", got, st.Next, st.Ceiling)
	for _, o := range old {
		for _, n := range got {
			if n.Start <= o.End && o.Start <= n.End {
				t.Errorf("new incarnation handed out %v, overlapping %v the deleted one handed out (tombstone ceiling %d): want it to start above %d", n, o, tomb, tomb)
			}
		}
	}
}

// Regression: the same decision with a legacy 8-byte counter. Workers move
// the counter past the mark the primary last stored, the counter is
// deleted (tombstone at the counter, which seqzk.TombstoneCeiling takes
// as the highest ID it may have issued) and the name is created again in
// the text format before the primary has handled the counter's move. The
// new sequence started at the stored mark + 1, below IDs the counter
// handed out, with no ZooKeeper data loss involved.
func TestInitialisationStartsAboveALegacyCountersTombstone(t *testing.T) {
	parallelUnderShort(t)
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	pstore, pgate := gatedFileStore(t, dir)
	r, _ := startFilePrimary(t, z.Servers, z.Root, pstore, func(c *config.Primary) {
		c.StoreTimeout = time.Minute
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(ctx, r.root); return ok })
	if _, err := c.ZK().Create(ctx, r.root+"/old", binary.BigEndian.AppendUint64(nil, 7), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "other", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
	ostore := fileStore(t, dir)
	var mark int64
	waitFor(t, "the legacy counter's mark in the store", func() bool {
		rec, err := ostore.Get(ctx, "old")
		mark = rec.Ceiling
		return err == nil && rec.Ceiling > 7
	})
	time.Sleep(500 * time.Millisecond)

	g := pgate.arm()
	if _, err := c.Take(ctx, "other", 150); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "the primary's store write", g.hit)

	old, err := c.Take(ctx, "old", 2*(mark-7))
	if err != nil {
		g.fail(t, err)
	}
	tomb, err := c.Delete(ctx, "old", ostore)
	if err != nil {
		g.fail(t, err)
	}
	if _, err := admin.Create(ctx, c, "old", seqzk.Registration{}); err != nil {
		g.fail(t, err)
	}
	t.Logf("stored mark %d; the legacy counter handed out %v; tombstone ceiling %d", mark, old, tomb)
	close(g.release)

	got, err := c.Take(ctx, "old", 100)
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := c.Describe(ctx, "old")
	t.Logf("new sequence took %v (state next %d ceiling %d)", got, st.Next, st.Ceiling)
	for _, o := range old {
		for _, n := range got {
			if n.Start <= o.End && o.Start <= n.End {
				t.Errorf("new sequence handed out %v, overlapping %v the deleted legacy counter handed out (tombstone ceiling %d): want it to start above %d", n, o, tomb, tomb)
			}
		}
	}
}
