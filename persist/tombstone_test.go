package persist_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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

// A write that changes nothing (the store already holds as much) must not
// vouch for a deposed writer from its cache: it reads the bucket, which
// its successor's seal marked, and is fenced. Otherwise a deposed primary
// could go on to act in ZooKeeper on a floor below its successor's
// ceilings.
func TestNoOpPutOfADeposedWriterIsFenced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *persist.Store {
		b, err := persist.NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The epoch object is not read again within the test: only the
		// bucket can tell.
		s, err := persist.NewStore(b, persist.StoreOptions{Buckets: 4, EpochCheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	old, newer := open(), open()
	e1, err := old.AdvanceEpoch(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Put(ctx, e1, persist.Record{Name: "s", Ceiling: 300, Czxid: 1, Mzxid: 2}); err != nil {
		t.Fatal(err)
	}
	e2, err := newer.AdvanceEpoch(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Seal(ctx, e2); err != nil {
		t.Fatal(err)
	}
	if err := newer.Put(ctx, e2, persist.Record{Name: "s", Ceiling: 500, Czxid: 1, Mzxid: 3}); err != nil {
		t.Fatal(err)
	}
	// Less than the old writer's cache holds already: nothing to write.
	err = old.Put(ctx, e1, persist.Record{Name: "s", Ceiling: 200, Czxid: 1, Mzxid: 2})
	if !errors.Is(err, persist.ErrFenced) {
		t.Fatalf("the deposed writer's no-op put: %v; want ErrFenced", err)
	}
}
