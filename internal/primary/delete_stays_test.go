package primary_test

// A delete stays done: no write decided before it (a birth, an audit's
// repair, a restore, a raise after a rotation) brings the name back.

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A name deleted and registered again; the primary reads its floor (above
// the first tombstone) and initialises the new incarnation, and its store
// write is slow; meanwhile the registration is deleted (its tombstone read
// the store before the birth landed). The store learns an incarnation only
// once ZooKeeper holds it, so it never holds the name live above the
// second tombstone, and no later restore or import brings the deleted name
// back.
func TestBirthOvertakenByADeleteStaysDeleted(t *testing.T) {
	testenv.ParallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, pgate := gatedPrimary(t, dir, nil, "s")
	ctx := context.Background()
	ostore := fileStore(t, dir)
	first, err := c.Operator().Delete(ctx, "s", ostore)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the primary settles

	// Registered again; the primary's birth store write is held.
	g := pgate.arm()
	if err := c.Register(ctx, "s", seqzk.Registration{}); err != nil {
		g.fail(t, err)
	}
	waitGate(t, "the primary's birth store write", g.hit)
	second, err := c.Operator().Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	close(g.release) // the birth lands; its initialisation finds the delete
	time.Sleep(2 * time.Second)

	rec, err := ostore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tombstones %d then %d; the store holds live %d dead %d ceiling %d", first, second, rec.Live, rec.Dead, rec.Ceiling)
	if !rec.Deleted() {
		t.Fatalf("the store holds deleted sequence s live (incarnation %d above the tombstone %d): a restore would bring it back", rec.Live, rec.Dead)
	}
	if ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("s")); ok {
		t.Fatal("deleted sequence s exists in ZooKeeper")
	}
	// An operator's restore finds nothing to bring back.
	rep, err := reconcile.Compare(ctx, c, ostore)
	if err != nil {
		t.Fatal(err)
	}
	rep.Plan()
	if err := reconcile.Apply(ctx, c, ostore, rep, 100); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("s")); ok {
		t.Fatal("restore brought deleted sequence s back")
	}
}

// The primary's audit reads the store just after a delete's tombstone, and
// ZooKeeper's deletion record the delete wrote, while its own view still
// holds the znode the delete removed in the same transaction (the
// watcher's event not handled yet). The audit believes a znode newer than
// a deletion only if it was created after the deletion record was written,
// so it does not take that znode for a new incarnation, write its birth
// into the store, and restore the deleted name.
func TestAuditDoesNotReviveWhatADeleteJustRemoved(t *testing.T) {
	testenv.ParallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, pgate := gatedPrimary(t, dir, func(c *config.Primary) { c.AuditInterval = 300 * time.Millisecond }, "s")
	ctx := context.Background()
	time.Sleep(time.Second) // the primary settles: its next store write is an audit's seal

	g := pgate.arm()
	waitGate(t, "the audit's seal", g.hit)
	ostore := fileStore(t, dir)
	ceiling, err := c.Operator().Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	close(g.release) // the audit reads the tombstone, with the znode still in its view
	time.Sleep(2 * time.Second)

	rec, err := ostore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Deleted() {
		t.Errorf("the store holds deleted sequence s live (incarnation %d, tombstone %d from a delete at ceiling %d)", rec.Live, rec.Dead, ceiling)
	}
	if ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("s")); ok {
		t.Error("deleted sequence s exists in ZooKeeper again")
	}
}

// ZooKeeper loses two sequences while a primary runs (their znodes and the
// root's own data, as a restore from an older copy of the root would). The
// primary's restore reads their records, computes their states (stored
// ceiling + 1), writes the store, and then creates them in ZooKeeper.
// Meanwhile an operator runs 'seqkeeper restore' (safe beside a running
// primary), which re-creates both at the same stored ceiling + 1; clients
// take IDs from one of them, and the operator deletes it. The primary's
// transaction fails on the sequence that still exists, and its one-by-one
// fallback must not create the deleted name again at the same next: every
// birth is guarded by the name's deletion record as read when it was
// decided, so the delete's record makes the primary's create fail. The
// primary's store write is held here to widen the window.
func TestPrimaryRestoreCannotOvertakeADelete(t *testing.T) {
	testenv.ParallelUnderShort(t)
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
	tomb, err := c.Operator().Delete(ctx, "s", ostore)
	if err != nil {
		g.fail(t, err)
	}
	t.Logf("operator restored s and t; took %v from s; deleted s (tombstone ceiling %d)", old, tomb)
	close(g.release)

	time.Sleep(2 * time.Second)
	exists, _, err := c.ZK().Session().Exists(ctx, r.root+"/s")
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

// The primary rotates a sequence onto a fresh znode (creation zxid Y) and
// decides a raise for it, whose store write is slow; meanwhile the
// sequence is deleted, and the delete's tombstone reaches the store first.
// A tombstone ends the incarnation (a rotation keeps it), so the late
// raise, which carries the znode it was decided for, cannot clear the
// tombstone, and the primary does not re-create the deleted sequence. (A
// delete that read the znode before the rotation reads it again: its
// transaction is guarded by the version it read.)
func TestRotationCannotUndoADelete(t *testing.T) {
	testenv.ParallelUnderShort(t)
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	pstore, pgate := gatedFileStore(t, dir)
	const rotateAt = 30
	r, p := startFilePrimary(t, z.Servers, z.Root, pstore, func(c *config.Primary) {
		c.RotateVersion = rotateAt
		c.MinReserve = 1000
		c.StoreTimeout = time.Minute
		c.SweepInterval = time.Second
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	czxid := func() int64 {
		_, stat, err := c.ZK().Session().Get(ctx, r.root+"/s")
		if err != nil {
			t.Fatal(err)
		}
		return stat.Czxid
	}
	if _, err := c.Take(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	czxidX := czxid()
	// The primary rotates the sequence (czxid Y), one take a write.
	for p.Stats().Rotated == 0 {
		if _, err := c.Take(ctx, "s", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	czxidY := czxid()
	if czxidY == czxidX {
		t.Fatalf("rotation did not change the creation zxid")
	}

	// A take that calls for a raise; the primary decides it (czxid Y) and
	// its store write is held.
	raise := pgate.arm()
	if _, err := c.Take(ctx, "s", 1500); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "the primary's raise store write", raise.hit)

	// delete: the znode goes, then the tombstone reaches the store.
	dstore, _ := gatedFileStore(t, dir)
	ceiling, err := c.Operator().Delete(ctx, "s", dstore)
	if err != nil {
		close(raise.release)
		t.Fatalf("delete: %v", err)
	}
	t.Logf("delete returned: tombstone ceiling %d (znode rotated from %#x to %#x)", ceiling, czxidX, czxidY)
	rec, err := dstore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store after delete: deleted=%v ceiling=%d czxid=%#x", rec.Deleted(), rec.Ceiling, rec.Czxid)

	// The primary's raise store write lands.
	close(raise.release)
	time.Sleep(3 * time.Second)

	rec, err = dstore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	exists, _, err := c.ZK().Session().Exists(ctx, r.root+"/s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 s after the raise's store write: store deleted=%v ceiling=%d czxid=%#x; znode exists=%v", rec.Deleted(), rec.Ceiling, rec.Czxid, exists)
	if !rec.Deleted() {
		t.Errorf("the store's record of deleted sequence s is live again (ceiling %d, czxid %#x): want the tombstone kept", rec.Ceiling, rec.Czxid)
	}
	if exists {
		t.Errorf("deleted sequence s exists again in ZooKeeper: want it gone")
	}
}
