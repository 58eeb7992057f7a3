package persist_test

import (
	"context"
	"sync"
	"testing"

	"github.com/seqkeeper/seqkeeper/persist"
)

// Regression (review finding 5): delete reads the sequence's ceiling, the
// primary raises it (store first), and the tombstone lands with the ceiling
// delete read. The tombstone must take all the same, keeping the raised
// ceiling, or a restore brings the deleted sequence back; and a tombstone
// that cannot take (the store describes another incarnation) must say so.
func TestTombstoneBeatsARacingRaise(t *testing.T) {
	t.Parallel()
	b, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Buckets: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ep, err := s.AdvanceEpoch(ctx, "primary")
	if err != nil {
		t.Fatal(err)
	}
	const czxid = 7
	if err := s.Put(ctx, ep, persist.Record{Name: "s", Ceiling: 100, Czxid: czxid, Mzxid: 9}); err != nil {
		t.Fatal(err)
	}
	// The primary raises many times while delete tombstones what it read.
	var wg sync.WaitGroup
	wg.Go(func() {
		for c := int64(200); c <= 2000; c += 100 {
			if err := s.Put(ctx, ep, persist.Record{Name: "s", Ceiling: c, Czxid: czxid, Mzxid: 9 + c}); err != nil {
				t.Error(err)
			}
		}
	})
	got, err := s.Tombstone(ctx, "s", 100, czxid)
	wg.Wait()
	if err != nil || !got.Deleted {
		t.Fatalf("tombstone: %+v, %v", got, err)
	}
	final, err := s.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !final.Deleted || final.Ceiling != 2000 {
		t.Fatalf("after the raises: %+v; want a tombstone with ceiling 2000", final)
	}

	// A record of a newer incarnation (another creation zxid, higher
	// ceiling): the old incarnation's tombstone does not take, and says so.
	if err := s.Put(ctx, ep, persist.Record{Name: "t", Ceiling: 500, Czxid: 20, Mzxid: 21}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tombstone(ctx, "t", 100, 3); err == nil || got.Deleted {
		t.Fatalf("tombstone of an older incarnation: %+v, %v; want an error and no tombstone", got, err)
	}
}
