package primary_test

// A name deleted and created again: the new incarnation starts above every
// ID the old one may have handed out, and no write meant for the old one
// lands on the new.

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A worker's take, delayed on the network, reaches a sequence that was
// deleted (tombstone first) and registered again meanwhile, at the very
// version the worker cached. The write checks the marker of the state it
// came from, which died with the old znode, so it never lands (had it
// landed, the fence that followed would set next = stale ceiling + 1,
// below what the new incarnation had issued).
func TestDelayedWriteOnARecreatedSequence(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	ctx := context.Background()
	w := r.client(z.Servers, 10*time.Second)
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, z.Servers[0])
	x := r.client([]string{proxy.Addr()}, 20*time.Second)
	issued := ids{}
	for i := 0; i < 5; i++ {
		got, err := x.Take(ctx, "s", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "x before the delete", got)
	}
	conn := w.ZK()
	_, stat, err := conn.Session().Get(ctx, r.root+"/s")
	if err != nil {
		t.Fatal(err)
	}
	cached := stat.Version

	proxy.Pause() // x's next take is held on the network
	xdone := make(chan error, 1)
	go func() {
		got, err := x.Take(ctx, "s", 10)
		issued.add(t, "x's delayed take", got)
		xdone <- err
	}()
	time.Sleep(300 * time.Millisecond)

	ceiling, err := w.Operator().Delete(ctx, "s", r.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, stat, err := conn.Session().Get(ctx, r.root+"/s")
		if err != nil {
			t.Fatal(err)
		}
		if stat.Version == cached {
			break
		}
		if stat.Version > cached {
			t.Fatalf("set-up: version %d past x's cached %d", stat.Version, cached)
		}
		got, err := w.Take(ctx, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Start <= ceiling {
			t.Fatalf("the re-created sequence handed out %s, at or below its tombstone's ceiling %d", got, ceiling)
		}
		issued.add(t, "the new incarnation", got)
	}
	proxy.Resume()
	if err := <-xdone; err != nil {
		t.Logf("x's delayed take: %v", err)
	}
	for i := 0; i < 200; i++ {
		got, err := w.Take(ctx, "s", 20)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "the new incarnation, later", got)
	}
}

// An operator advances a sequence (the store and ZooKeeper get ceiling A,
// above the ceiling the running primary last wrote), clients take IDs
// above the old ceiling, and the sequence is deleted (tombstone at A) and
// created again before the primary has handled the advanced state. The new
// incarnation starts above the tombstone, not at the primary's in-memory
// copy of the record's ceiling + 1: a registration's floor is read afresh
// once it is seen. Here the primary's loop is held by a slow store write
// of another sequence while the operator's commands run.
func TestInitialisationStartsAboveAnAdvancedTombstone(t *testing.T) {
	testenv.ParallelUnderShort(t)
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
	tomb, err := c.Operator().Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	if _, err := c.Operator().Create(ctx, "s", seqzk.Registration{}); err != nil {
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

// The same decision with a legacy 8-byte counter. Workers move the counter
// past the mark the primary last stored, the counter is deleted (tombstone
// at the counter, which seqzk.TombstoneCeiling takes as the highest ID it
// may have issued) and the name is created again in the text format before
// the primary has handled the counter's move. The new sequence starts
// above the tombstone, not at the stored mark + 1, which is below IDs the
// counter handed out.
func TestInitialisationStartsAboveALegacyCountersTombstone(t *testing.T) {
	testenv.ParallelUnderShort(t)
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	pstore, pgate := gatedFileStore(t, dir)
	r, _ := startFilePrimary(t, z.Servers, z.Root, pstore, func(c *config.Primary) {
		c.StoreTimeout = time.Minute
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if _, err := c.ZK().Session().Create(ctx, r.root+"/old", binary.BigEndian.AppendUint64(nil, 7), 0); err != nil {
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
	tomb, err := c.Operator().Delete(ctx, "old", ostore)
	if err != nil {
		g.fail(t, err)
	}
	if _, err := c.Operator().Create(ctx, "old", seqzk.Registration{}); err != nil {
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

// A name deleted, registered again and deleted before anything was issued
// reports the tombstone the store holds (the first incarnation's higher
// ceiling), not start-1 (0).
func TestDeleteReportsTheStoredTombstone(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Take(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	first, err := w.Operator().Delete(ctx, "s", r.store)
	if err != nil || first < 10 {
		t.Fatalf("first delete: %d, %v", first, err)
	}
	if err := w.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	second, err := w.Operator().Delete(ctx, "s", r.store)
	// The primary may or may not have initialised the new registration
	// (above the first tombstone) before the second delete.
	if err != nil || second < first {
		t.Fatalf("second delete: %d, %v; want at least the stored tombstone %d", second, err, first)
	}
}
