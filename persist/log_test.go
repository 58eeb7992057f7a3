package persist

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
)

// TestCompactFoldsAndDeletes: Compact moves the log into the bucket objects
// and deletes the folded segments; what a reader sees does not change, and
// a compaction with nothing to fold writes nothing.
func TestCompactFoldsAndDeletes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b := &counting{Backend: open()}
		s := newStore(t, b, StoreOptions{Buckets: 8})
		for i := range 20 {
			mustPut(t, s, 1, rec(fmt.Sprintf("n%d", i%7), int64(100*i), int64(i)))
		}
		if p := s.Pending(); p != 20 {
			t.Fatalf("Pending() = %d after 20 writes, want 20", p)
		}
		before, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Compact(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Segments != 20 || res.Deleted != 20 || res.Buckets == 0 || s.Pending() != 0 {
			t.Fatalf("compact: %+v (pending %d), want 20 segments folded and deleted", res, s.Pending())
		}
		for pos := int64(1); pos <= 20; pos++ {
			if _, _, err := b.Get(ctx, segmentKey(pos)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("segment %d after compaction: %v, want not found", pos, err)
			}
		}
		fresh := newStore(t, open(), StoreOptions{})
		after, err := fresh.Load(ctx)
		if err != nil || !reflect.DeepEqual(after, before) {
			t.Fatalf("load after compaction (%v):\n%+v\nbefore:\n%+v", err, after, before)
		}
		// Folded records live in the buckets alone now.
		st, err := fresh.readBucket(ctx, mustLayout(t, fresh), bucketOf("n6", 8))
		if err != nil || len(st.obj.recs) == 0 {
			t.Fatalf("bucket of n6: %v, %v", st, err)
		}
		mustPut(t, s, 1, rec("n0", 5000, 99))
		if r := mustGet(t, fresh, "n0"); r.Ceiling != 5000 {
			t.Fatalf("a write after compaction: %+v", r)
		}
		if _, err := s.Compact(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Idle: nothing to fold, nothing written.
		puts := b.puts.Load()
		if _, err := s.Compact(ctx, 1); err != nil || b.puts.Load() != puts {
			t.Fatalf("an idle compaction: %v, %d PUTs", err, b.puts.Load()-puts)
		}
	})
}

func mustLayout(t *testing.T, s *Store) *layout {
	t.Helper()
	l, err := s.layout(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestStaleWriterAtAFoldedPosition: a writer whose view of the tail is old
// creates its segment at a position a compaction has already folded and
// deleted. Readers list the log, so the segment is read there, and the
// next compaction folds it.
func TestStaleWriterAtAFoldedPosition(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		stale := newStore(t, open(), StoreOptions{})
		mustPut(t, stale, 1, rec("a", 10, 1)) // position 1; its tail is 2
		other := newStore(t, open(), StoreOptions{})
		for i := range 4 {
			mustPut(t, other, 1, rec("b", int64(10+i), int64(1+i))) // 2..5
		}
		if res, err := other.Compact(ctx, 1); err != nil || res.Deleted != 5 {
			t.Fatalf("compact: %+v, %v", res, err)
		}
		mustPut(t, stale, 1, rec("a", 99, 2)) // at position 2, folded and deleted
		if _, _, err := open().Get(ctx, segmentKey(2)); err != nil {
			t.Fatalf("the stale writer's segment: %v", err)
		}
		if r := mustGet(t, newStore(t, open(), StoreOptions{}), "a"); r.Ceiling != 99 {
			t.Fatalf("the stale writer's record was lost: %+v", r)
		}
		if res, err := other.Compact(ctx, 1); err != nil || res.Segments != 1 {
			t.Fatalf("compact the stale writer's segment: %+v, %v", res, err)
		}
		if r := mustGet(t, newStore(t, open(), StoreOptions{}), "a"); r.Ceiling != 99 {
			t.Fatalf("after folding the stale writer's segment: %+v", r)
		}
	})
}

// crashing is a real backend that stops doing anything after a number of
// requests, like a process that died: every later request fails without
// reaching the storage.
type crashing struct {
	Backend
	left atomic.Int64
}

var errCrashed = errors.New("crashed")

func (c *crashing) alive() bool { return c.left.Add(-1) >= 0 }

func (c *crashing) Get(ctx context.Context, key string) ([]byte, string, error) {
	if !c.alive() {
		return nil, "", errCrashed
	}
	return c.Backend.Get(ctx, key)
}

func (c *crashing) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if !c.alive() {
		return "", errCrashed
	}
	return c.Backend.Put(ctx, key, data, ifMatch)
}

func (c *crashing) Delete(ctx context.Context, key string) error {
	if !c.alive() {
		return errCrashed
	}
	return c.Backend.Delete(ctx, key)
}

func (c *crashing) List(ctx context.Context, prefix string) ([]string, error) {
	if !c.alive() {
		return nil, errCrashed
	}
	return c.Backend.List(ctx, prefix)
}

// TestCompactionCrash: a compaction that stops after any number of requests
// (before, between or after its listing, its bucket writes and its
// deletes) loses nothing, and the next compaction finishes the work.
func TestCompactionCrash(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		// How many requests a whole compaction of this log takes.
		total := compactionCrash(t, open, math.MaxInt64)
		if total < 10 {
			t.Fatalf("a compaction took %d requests; the log was not set up", total)
		}
		for n := range total {
			t.Run(fmt.Sprintf("after=%d", n), func(t *testing.T) {
				t.Parallel()
				compactionCrash(t, open, n)
			})
		}
	})
}

// compactionCrash builds a store with a folded part and a log, runs a
// compaction that crashes after n requests, and checks that a new store
// reads the same, can write, and finishes the compaction. It returns how
// many requests the crashing compaction made.
func compactionCrash(t *testing.T, open func() Backend, n int64) int64 {
	ctx := testCtx(t)
	b := isolated(t, open())
	s := newStore(t, b, StoreOptions{Buckets: 4, Parallelism: 1})
	mustPut(t, s, 1, rec("a", 10, 1), rec("b", 10, 1))
	if _, err := s.Compact(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		mustPut(t, s, 1, rec(fmt.Sprintf("c%d", i%3), int64(100+i), int64(2+i)), rec("a", int64(20+i), int64(2+i)))
	}
	want, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &crashing{Backend: b}
	c.left.Store(n)
	_, cerr := newStore(t, c, StoreOptions{Buckets: 4, Parallelism: 1}).Compact(ctx, 1)
	if cerr != nil && !errors.Is(cerr, errCrashed) {
		t.Fatalf("crash after %d requests: %v", n, cerr)
	}
	after := newStore(t, b, StoreOptions{})
	if got, err := after.Load(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("crash after %d requests: load %v\n%+v\nwant\n%+v", n, err, got, want)
	}
	mustPut(t, after, 1, rec("c0", 1000, 50))
	if _, err := after.Compact(ctx, 1); err != nil {
		t.Fatalf("crash after %d requests: the next compaction: %v", n, err)
	}
	if got := mustGet(t, newStore(t, b, StoreOptions{}), "c0"); got.Ceiling != 1000 {
		t.Fatalf("crash after %d requests: c0 = %+v", n, got)
	}
	if keys, err := b.List(ctx, logPrefix); err != nil || len(keys) != 0 {
		t.Fatalf("crash after %d requests: segments left behind after the next compaction: %v, %v", n, keys, err)
	}
	return n - max(c.left.Load(), 0)
}

// TestMigrateFromBucketLayout starts from a store written by seqkeeper
// before the log (format v1: testdata/v1-store, written by commit f731982
// with 16 buckets): this build reads it as it is, writes to it, migrates
// the epoch object on its first write (after which a build of the bucket
// layout refuses the store instead of missing the log) and compacts into
// the old bucket objects.
func TestMigrateFromBucketLayout(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b := isolated(t, open())
		err := filepath.WalkDir("testdata/v1-store", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			key, _ := filepath.Rel("testdata/v1-store", path)
			_, err = b.Put(ctx, filepath.ToSlash(key), data, "")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		s := newStore(t, b, StoreOptions{})
		recs, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 44 {
			t.Fatalf("read %d records from the old layout, want 44", len(recs))
		}
		byName := map[string]Record{}
		for _, r := range recs {
			byName[r.Name] = r
		}
		if r := byName["seq-00"]; r.Ceiling != 1500 || r.Mzxid != 0x100000500 || r.Epoch != 1 || r.Start != 1 {
			t.Errorf("seq-00: %+v", r)
		}
		if r := byName["gone"]; !r.Deleted() || r.Ceiling != 5000 {
			t.Errorf("the tombstone: %+v", r)
		}
		if r := byName["legacy"]; !r.Legacy || r.Ceiling != 777 {
			t.Errorf("the legacy counter: %+v", r)
		}
		if r := byName["bounded"]; r.Start != 10 || r.End != 100 {
			t.Errorf("the bounded sequence: %+v", r)
		}
		if e, holder, err := s.Epoch(ctx); e != 1 || holder != "replica-old" || err != nil {
			t.Fatalf("epoch: %d %q %v", e, holder, err)
		}

		// A new primary takes over: the epoch object is migrated.
		e, err := s.AdvanceEpoch(ctx, "replica-new")
		if err != nil || e != 2 {
			t.Fatalf("advance: %d, %v", e, err)
		}
		sealed, err := s.Seal(ctx, e)
		if err != nil || !reflect.DeepEqual(sealed, recs) {
			t.Fatalf("seal: %v\n%+v\nwant\n%+v", err, sealed, recs)
		}
		data, _, err := b.Get(ctx, epochKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := splitHeader(data, epochMagic, 1); !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("a reader of the bucket layout would take the migrated epoch object: %v", err)
		}
		mustPut(t, s, e, rec("seq-01", 9000, 0x200000001), rec("fresh", 5, 0x200000002))
		if _, err := s.Compact(ctx, e); err != nil {
			t.Fatal(err)
		}
		got, err := newStore(t, b, StoreOptions{}).Load(ctx)
		if err != nil || len(got) != 45 {
			t.Fatalf("after a write and a compaction: %d records, %v", len(got), err)
		}
		for _, r := range got {
			want, ok := byName[r.Name]
			switch {
			case r.Name == "seq-01" && r.Ceiling != 9000, r.Name == "fresh" && r.Ceiling != 5:
				t.Errorf("%s: %+v", r.Name, r)
			case ok && r.Name != "seq-01" && r.Ceiling != want.Ceiling:
				t.Errorf("%s changed: %+v, was %+v", r.Name, r, want)
			}
		}
	})
}

// TestPutLargerThanASegment: a Put of more records than one segment may
// hold (a restore of a million sequences is about 70 MB of text, more
// than any reader decompresses) is written as several segments, and a
// fresh store reads every record back. One segment of it all would have
// made every later read of the store fail as corrupt.
func TestPutLargerThanASegment(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		s := newStore(t, open(), StoreOptions{Buckets: 8})
		s.segmentBudget = 4 << 10
		recs := make([]Record, 1000)
		for i := range recs {
			recs[i] = rec(fmt.Sprintf("seq-%04d", i), int64(1000+i), 1)
		}
		mustPut(t, s, 1, recs...)
		if p := s.Pending(); p < 10 {
			t.Fatalf("%d segments for 1,000 records in 4 KiB each, want many", p)
		}
		got, err := newStore(t, open(), StoreOptions{}).Load(ctx)
		if err != nil || len(got) != len(recs) {
			t.Fatalf("load: %d records, %v; want %d", len(got), err, len(recs))
		}
		for i, r := range got {
			if r.Name != recs[i].Name || r.Ceiling != recs[i].Ceiling {
				t.Fatalf("record %d: %+v, want %s at %d", i, r, recs[i].Name, recs[i].Ceiling)
			}
		}
	})
}

// Losing the epoch object hides no segment: readers list the log, so a
// tombstone (or any raise) written since the last compaction is still in
// every read. (A reader that started from a checkpoint kept in the epoch
// object would start at position 1, which the last compaction deleted,
// stop there, and see no segment above the lost checkpoint.)
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
