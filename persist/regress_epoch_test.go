package persist

import (
	"os"
	"path/filepath"
	"testing"
)

// Regression (a repro of issue 26): losing the epoch object also lost the
// log's checkpoint, which it held: a reader then started at position 1,
// which the last compaction had deleted, stopped there, and no longer saw
// any segment above the old checkpoint. A tombstone (or any raise) written
// since the last compaction was gone from every read, though no object
// holding it was lost. Readers now list the log.
func TestLostEpochObjectHidesNoSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() Backend {
		b, err := NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := testCtx(t)
	s := newStore(t, open(), StoreOptions{Buckets: 8})
	epoch, err := s.AdvanceEpoch(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, epoch, Record{Name: "x", Ceiling: 100, Czxid: 7, Mzxid: 7})
	if res, err := s.Compact(ctx, epoch); err != nil || res.Deleted == 0 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	mustPut(t, s, epoch, Record{Name: "x", Ceiling: 200, Czxid: 7, Mzxid: 8})
	mustPut(t, s, epoch, Record{Name: "x", Ceiling: 200, Dead: 200})
	if r := mustGet(t, newStore(t, open(), StoreOptions{}), "x"); !r.Deleted() || r.Ceiling != 200 {
		t.Fatalf("before the loss: %+v", r)
	}
	if err := os.Remove(filepath.Join(dir, "epoch")); err != nil {
		t.Fatal(err)
	}
	fresh := newStore(t, open(), StoreOptions{})
	if r := mustGet(t, fresh, "x"); !r.Deleted() || r.Ceiling != 200 {
		t.Errorf("after losing only the epoch object, x reads as %+v; want the tombstone at 200", r)
	}
	// A new primary's seal sees the same.
	e2, err := fresh.AdvanceEpoch(ctx, "p2")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := fresh.Seal(ctx, e2)
	if err != nil {
		// The buckets carry epoch 1 and the new epoch is past it.
		t.Fatalf("seal at %d: %v", e2, err)
	}
	for _, r := range recs {
		if r.Name == "x" && (!r.Deleted() || r.Ceiling != 200) {
			t.Errorf("the seal of a new primary returns x as %+v; want the tombstone at 200", r)
		}
	}
}
