package primary_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// Regression (found by the model test, seed 0x18eba2894e393fe1 op #5644: a
// deleted name back in ZooKeeper): a name deleted and registered again;
// the primary reads its floor (above the first tombstone) and writes the
// new incarnation's birth to the store, and that write is slow; meanwhile
// the registration is deleted (its tombstone read the store before the
// birth landed). The birth then landed with an incarnation above the
// second tombstone, so the store held the name live although ZooKeeper
// never initialised it (its guarded initialisation failed), and the next
// restore or import brought the deleted name back. The store now learns
// an incarnation only once ZooKeeper holds it.
func TestBirthOvertakenByADeleteStaysDeleted(t *testing.T) {
	parallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, pgate := gatedPrimary(t, dir, nil, "s")
	ctx := context.Background()
	ostore := fileStore(t, dir)
	first, err := c.Delete(ctx, "s", ostore)
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
	second, err := c.Delete(ctx, "s", ostore)
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
	if ok, _, _ := c.ZK().Exists(ctx, c.Path("s")); ok {
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
	if ok, _, _ := c.ZK().Exists(ctx, c.Path("s")); ok {
		t.Fatal("restore brought deleted sequence s back")
	}
}

// Regression (found by the model test, seed 0x18eba2894e393fe1 op #3876: a
// deleted adopted sequence back): the primary's audit read the store just
// after a delete's tombstone, and ZooKeeper's deletion record the delete
// had written, while its own view still held the znode the delete had
// removed in the same transaction (the watcher's event not handled yet).
// It took the znode for an incarnation born after the deletion and wrote
// its birth into the store, so the name was live again there, and the
// primary restored it. The audit now believes a znode newer than a
// deletion only if it was created after the deletion record was written.
func TestAuditDoesNotReviveWhatADeleteJustRemoved(t *testing.T) {
	parallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, pgate := gatedPrimary(t, dir, func(c *config.Primary) { c.AuditInterval = 300 * time.Millisecond }, "s")
	ctx := context.Background()
	time.Sleep(time.Second) // the primary settles: its next store write is an audit's seal

	g := pgate.arm()
	waitGate(t, "the audit's seal", g.hit)
	ostore := fileStore(t, dir)
	ceiling, err := c.Delete(ctx, "s", ostore)
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
	if ok, _, _ := c.ZK().Exists(ctx, c.Path("s")); ok {
		t.Error("deleted sequence s exists in ZooKeeper again")
	}
}
