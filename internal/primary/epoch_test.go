package primary_test

// The store's epoch: a deposed primary stops, and losing the epoch object
// neither stalls the next primary nor hides what the log holds.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// The fence: a primary deposed while idle (it has nothing to write, so no
// write is refused) must stop within a bounded time; and what it wrote
// after its successor took the epoch object, before its successor sealed
// the store, can only have raised ceilings.
func TestDeposedIdlePrimaryStops(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	run := r.start("old", func(c *config.Primary) { c.FenceCheckInterval = 200 * time.Millisecond })
	c := r.client(10 * time.Second)
	waitFor(t, "the primary leading", func() bool { return run.p.Status().Leading })
	if err := c.Register(context.Background(), "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(context.Background(), "x", 1); err != nil {
		t.Fatal(err)
	}
	before, err := r.store().Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store().AdvanceEpoch(context.Background(), "new"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-run.done:
		if !errors.Is(err, primary.ErrFenced) {
			t.Errorf("Run returned %v; want ErrFenced", err)
		}
		run.done <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatalf("the deposed primary is still running 5 s later (leading %v)", run.p.Status().Leading)
	}
	after, err := r.store().Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if after.Ceiling < before.Ceiling {
		t.Fatalf("stored ceiling went down from %d to %d", before.Ceiling, after.Ceiling)
	}
}

// The store's epoch object is lost while its buckets still carry the epoch
// of their last writer: a new primary's first epoch is then below theirs.
// The primary advances past the buckets' epoch at once and leads, rather
// than end each term fenced by its own store.
func TestLostEpochObjectDoesNotStall(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	seed := fileStore(t, dir)
	ctx := context.Background()
	var epoch int64
	for range 5 {
		e, err := seed.AdvanceEpoch(ctx, "earlier")
		if err != nil {
			t.Fatal(err)
		}
		epoch = e
	}
	if err := seed.Put(ctx, epoch, persist.Record{Name: "a", Ceiling: 100}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "epoch")); err != nil {
		t.Fatal(err)
	}
	// A new process: its store has seen no bucket yet.
	r, p := startFilePrimary(t, z.Servers, z.Root, fileStore(t, dir), nil)
	waitForUpTo(t, 10*time.Second, "the primary leading", func() bool { return p.Status().Leading })
	if got := p.Status().Epoch; got <= epoch {
		t.Fatalf("leading at epoch %d, not above the buckets' %d", got, epoch)
	}
	w := r.client(z.Servers, 10*time.Second)
	got, err := w.Take(ctx, "a", 1) // restored above its record
	if err != nil || got[0].Start <= 100 {
		t.Fatalf("take = %s, %v; want above 100", got, err)
	}
}

// Losing the epoch object hides no segment of the log, so no tombstone:
// readers list the log (no object says where it ends), and ZooKeeper's
// deletion record and the era say the name was deleted, not lost, whatever
// the store says. A hidden tombstone would let the next primary find the
// deleted sequence's older bucket record live, ZooKeeper lacking it, and
// restore it at that older ceiling + 1, below IDs the deleted sequence had
// handed out.
func TestLostEpochObjectHidesNoTombstone(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	p1, stop1 := stoppablePrimary(t, r, r.store, "p1", nil)
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p1.Status().Leading })
	if err := c.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	seen := ids{}
	got, err := c.Take(ctx, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "before the compaction", got)
	// The operator's (or the primary's) compaction folds what is logged so
	// far into the buckets and deletes the segments.
	compactor := fileStore(t, dir)
	if res, err := compactor.Compact(ctx, p1.Status().Epoch); err != nil || res.Segments == 0 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	folded, err := compactor.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// The sequence goes on: its raises land in new segments.
	var last int64
	for last <= folded.Ceiling+500 {
		got, err := c.Take(ctx, "x", 50)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "after the compaction", got)
		last = got[len(got)-1].End
	}
	tomb, err := c.Operator().Delete(ctx, "x", r.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bucket ceiling %d; IDs handed out up to %d; tombstone at %d (in the log)", folded.Ceiling, last, tomb)
	stop1()

	// One store object is lost: the epoch object.
	if err := os.Remove(filepath.Join(dir, "epoch")); err != nil {
		t.Fatal(err)
	}
	if rec, err := fileStore(t, dir).Get(ctx, "x"); err != nil || !rec.Deleted() || rec.Ceiling < tomb {
		t.Errorf("after losing the epoch object the store reads x as %+v (%v); want the tombstone at %d", rec, err, tomb)
	}

	p2, _ := stoppablePrimary(t, r, fileStore(t, dir), "p2", nil)
	waitForUpTo(t, 20*time.Second, "p2 leading", func() bool { return p2.Status().Leading })
	time.Sleep(time.Second) // start and a few sweeps: restore runs in both
	if ok, _, _ := c.ZK().Session().Exists(ctx, r.root+"/x"); ok {
		t.Errorf("the deleted sequence x is back in ZooKeeper (resurrected)")
		again, err := c.Take(ctx, "x", 50)
		if err != nil && !errors.Is(err, seqzk.ErrCeilingReached) {
			t.Fatal(err)
		}
		if err == nil {
			t.Logf("x resurrected hands out %s", again)
			dups := 0
			for _, rg := range again {
				for id := rg.Start; id <= rg.End; id++ {
					if _, ok := seen[id]; ok {
						dups++
					}
				}
			}
			if dups > 0 {
				t.Errorf("the resurrected x handed out %d IDs the deleted x had handed out already (%s; the old x went up to %d)", dups, again, last)
			}
		}
	}
}
