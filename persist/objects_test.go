package persist

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// copyStore puts the objects of a store directory in testdata into b.
func copyStore(t *testing.T, b Backend, dir string) {
	t.Helper()
	ctx := testCtx(t)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		key, _ := filepath.Rel(dir, path)
		_, err = b.Put(ctx, filepath.ToSlash(key), data, "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromTheCheckpointedLog starts from a store written by the
// seqkeeper before the lattice record (testdata/v2-store, written by
// commit 6ee620f with 4 buckets: meta v1, epoch v2 with a checkpoint,
// bucket and log objects v1, a tombstone folded into a bucket and another
// still in the log). This build reads it as it was meant, migrates the
// meta and epoch objects on its first write (after which the older build
// refuses the store instead of missing what it cannot read), and compacts
// the old segments into buckets of the new format.
func TestMigrateFromTheCheckpointedLog(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, open func() Backend) {
		ctx := testCtx(t)
		b := isolated(t, open())
		copyStore(t, b, "testdata/v2-store")
		check := func(when string, recs []Record) {
			t.Helper()
			byName := map[string]Record{}
			for _, r := range recs {
				byName[r.Name] = r
			}
			if len(recs) != 5 {
				t.Fatalf("%s: %d records, want 5: %+v", when, len(recs), recs)
			}
			for _, c := range []struct {
				name    string
				ceiling int64
				deleted bool
			}{{"orders", 9000, false}, {"legacy", 700, false}, {"gone", 300, true}, {"bounded", 200, true}, {"users", 2000, false}} {
				r := byName[c.name]
				if r.Ceiling != c.ceiling || r.Deleted() != c.deleted {
					t.Errorf("%s: %s = %+v; want ceiling %d, deleted %v", when, c.name, r, c.ceiling, c.deleted)
				}
			}
			if r := byName["legacy"]; !r.Legacy {
				t.Errorf("%s: the legacy counter: %+v", when, r)
			}
			if r := byName["users"]; r.Windows != 4 || r.Start != 1 || r.Mzxid != 0x100000031 {
				t.Errorf("%s: users: %+v", when, r)
			}
			if r := byName["bounded"]; r.Start != 100 || r.End != 200 || r.Windows != 2 {
				t.Errorf("%s: the deleted bounded sequence kept its settings: %+v", when, r)
			}
		}
		old, err := newStore(t, b, StoreOptions{}).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check("read as it is", old)

		s := newStore(t, b, StoreOptions{Root: "/all-sequences"})
		if e, holder, err := s.Epoch(ctx); e != 1 || holder != "old-primary" || err != nil {
			t.Fatalf("epoch: %d %q %v", e, holder, err)
		}
		e, err := s.AdvanceEpoch(ctx, "new-primary")
		if err != nil || e != 2 {
			t.Fatalf("advance: %d, %v", e, err)
		}
		sealed, err := s.Seal(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		check("sealed", sealed)
		for key, magic := range map[string]string{metaKey: metaMagic, epochKey: epochMagic} {
			data, _, err := b.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			// What the previous build reads: meta v1, epoch v2.
			if _, _, err := splitHeader(data, magic, map[string]int{metaMagic: 1, epochMagic: 2}[magic]); !errors.Is(err, ErrNewerFormat) {
				t.Errorf("the previous build would read the migrated %s object: %v", key, err)
			}
		}
		if res, err := s.Compact(ctx, e); err != nil || res.Segments < 3 {
			t.Fatalf("compact the old segments: %+v, %v", res, err)
		}
		again, err := newStore(t, b, StoreOptions{Root: "/all-sequences"}).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check("after compacting into the new format", again)
		if keys, err := b.List(ctx, logPrefix); err != nil || len(keys) != 0 {
			t.Fatalf("log after compaction: %q, %v", keys, err)
		}
		// The store now belongs to its root.
		if _, err := newStore(t, b, StoreOptions{Root: "/other"}).Load(ctx); !errors.Is(err, ErrOtherRoot) {
			t.Fatalf("another root on the migrated store: %v", err)
		}
	})
}

// TestLosingOneObject: the loss, or the rollback to an older version, of
// any one store object costs the store nothing it cannot rebuild itself
// (the epoch and meta objects), or only the records that object alone held
// (a bucket object, a log segment), which the primary then writes again
// from ZooKeeper (docs/fault-model.md). It is never read as "nothing was
// ever written", and never hides any other object.
func TestLosingOneObject(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (string, func(StoreOptions) *Store) {
		dir := t.TempDir()
		open := func(o StoreOptions) *Store {
			b, err := NewFile(dir)
			if err != nil {
				t.Fatal(err)
			}
			return newStore(t, b, o)
		}
		ctx := testCtx(t)
		s := open(StoreOptions{Buckets: 4, Root: "/r"})
		e, err := s.AdvanceEpoch(ctx, "p1")
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, e, Record{Name: "a", Ceiling: 100, Live: 1}, Record{Name: "b", Ceiling: 100, Live: 1}, Record{Name: "gone", Ceiling: 50, Live: 1})
		if _, err := s.Compact(ctx, e); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, e, Record{Name: "a", Ceiling: 300})
		mustPut(t, s, e, Record{Name: "gone", Ceiling: 80, Dead: 80})
		return dir, open
	}
	want := func(t *testing.T, s *Store, name string, ceiling int64, deleted bool) {
		t.Helper()
		r := mustGet(t, s, name)
		if r.Ceiling != ceiling || r.Deleted() != deleted {
			t.Errorf("%s = %+v; want ceiling %d, deleted %v", name, r, ceiling, deleted)
		}
	}
	t.Run("epoch", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		if err := os.Remove(filepath.Join(dir, "epoch")); err != nil {
			t.Fatal(err)
		}
		s := open(StoreOptions{Root: "/r"})
		want(t, s, "a", 300, false)
		want(t, s, "gone", 80, true)
		// The holder of the epoch writes next: it rebuilds the object.
		e, _, err := s.Epoch(testCtx(t))
		if err != nil || e != 1 {
			t.Fatalf("epoch after the loss and a read of the log: %d, %v; want 1", e, err)
		}
		mustPut(t, s, 1, Record{Name: "b", Ceiling: 150})
		if got, _, err := open(StoreOptions{}).Epoch(testCtx(t)); err != nil || got != 1 || s.Repairs() != 1 {
			t.Fatalf("after the next write: epoch %d, %v, repairs %d; want the object rebuilt at 1", got, err, s.Repairs())
		}
	})
	t.Run("epoch rolled back", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		s := open(StoreOptions{Root: "/r"})
		e, err := s.AdvanceEpoch(testCtx(t), "p2")
		if err != nil {
			t.Fatal(err)
		}
		old := encodeEpoch(epochState{epoch: 1, holder: "p1"})
		if err := os.WriteFile(filepath.Join(dir, "epoch"), old, 0o644); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, e, Record{Name: "b", Ceiling: 150})
		if got, holder, err := open(StoreOptions{}).Epoch(testCtx(t)); err != nil || got != e || s.Repairs() != 1 {
			t.Fatalf("after the next write: epoch %d (%q), %v, repairs %d; want %d rebuilt", got, holder, err, s.Repairs(), e)
		}
		// The deposed writer of epoch 1 is fenced again.
		if err := open(StoreOptions{}).Put(testCtx(t), 1, Record{Name: "b", Ceiling: 170}); !errors.Is(err, ErrFenced) {
			t.Fatalf("a deposed writer after the repair: %v", err)
		}
	})
	t.Run("meta", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		if err := os.Remove(filepath.Join(dir, "meta")); err != nil {
			t.Fatal(err)
		}
		// Not the default 256 buckets: the count comes from a bucket.
		s := open(StoreOptions{Root: "/r"})
		want(t, s, "b", 100, false)
		want(t, s, "gone", 80, true)
		if l := mustLayout(t, s); l.n != 4 || s.Repairs() != 1 {
			t.Fatalf("rebuilt with %d buckets, %d repairs", l.n, s.Repairs())
		}
		if _, err := open(StoreOptions{Root: "/other"}).Load(testCtx(t)); !errors.Is(err, ErrOtherRoot) {
			t.Fatalf("another root on the rebuilt store: %v", err)
		}
	})
	t.Run("meta after a read, before the first write", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		// An operator's store: it has read what it decides on, then the
		// object goes, and its first write must not fail on it.
		s := open(StoreOptions{Root: "/r"})
		want(t, s, "a", 300, false)
		if err := os.Remove(filepath.Join(dir, "meta")); err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, 1, Record{Name: "b", Ceiling: 150})
		if l := mustLayout(t, open(StoreOptions{Root: "/r"})); l.n != 4 || s.Repairs() != 1 {
			t.Fatalf("rebuilt with %d buckets, %d repairs", l.n, s.Repairs())
		}
		want(t, open(StoreOptions{Root: "/r"}), "b", 150, false)
	})
	t.Run("bucket", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		b := bucketOf("b", 4)
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(bucketKey(b)))); err != nil {
			t.Fatal(err)
		}
		// What the bucket alone held is gone; nothing else is.
		s := open(StoreOptions{Root: "/r"})
		if _, err := s.Get(testCtx(t), "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("b after losing its bucket: %v", err)
		}
		want(t, s, "a", 300, false)
		want(t, s, "gone", 80, true)
	})
	t.Run("segment", func(t *testing.T) {
		t.Parallel()
		dir, open := setup(t)
		keys, err := open(StoreOptions{}).b.List(testCtx(t), logPrefix)
		if err != nil || len(keys) != 2 {
			t.Fatalf("log: %q, %v", keys, err)
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(keys[0]))); err != nil {
			t.Fatal(err)
		}
		s := open(StoreOptions{Root: "/r"})
		want(t, s, "a", 100, false) // the raise to 300 was in the lost segment
		want(t, s, "gone", 80, true)
	})
}
