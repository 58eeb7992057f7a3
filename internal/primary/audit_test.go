package primary_test

// The audit: what the store lost is written again, and an object that
// cannot be read at start is read at a later sweep.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// The store loses an object (deleted, or rolled back) while ZooKeeper keeps
// its data: the audit finds the ceilings missing and persists them again,
// idle sequences included, so that a later ZooKeeper data loss does not hit
// both.
func TestAuditRepersistsWhatTheStoreLost(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	pause := &sync.RWMutex{}
	store, err := persist.NewStore(pausedBackend{b, pause}, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, p := startFilePrimary(t, z.Servers, z.Root, store, func(c *config.Primary) {
		c.SweepInterval, c.AuditInterval = 100*time.Millisecond, 300*time.Millisecond
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		if err := c.Register(ctx, n, seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, n, 1); err != nil {
			t.Fatal(err)
		}
	}
	// The primary first has nothing left to raise: every ceiling stays
	// put for a second (ten sweeps). A raise it made after the loss would
	// put that record back by itself, and the audit would rightly count
	// one fewer lost.
	ceilings := func() []int64 {
		var out []int64
		for _, n := range names {
			st, _, err := c.Describe(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st.Ceiling)
		}
		return out
	}
	for prev, deadline := ceilings(), time.Now().Add(30*time.Second); ; {
		time.Sleep(time.Second)
		cur := ceilings()
		if slices.Equal(prev, cur) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ceilings still move after 30 s: %v", cur)
		}
		prev = cur
	}
	// Every bucket object and log segment goes: the store lost
	// everything it held. The next write of the primary lands beyond the
	// hole in the log, where no reader looks until the audit's seal
	// claims the first missing position again. The store's writes wait
	// meanwhile, so that none is half done (a temporary file about to be
	// renamed into place) while the objects go.
	pause.Lock()
	buckets, err := filepath.Glob(filepath.Join(dir, "buckets", "*"))
	segments, err2 := filepath.Glob(filepath.Join(dir, "log", "*"))
	if err != nil || err2 != nil || len(buckets)+len(segments) == 0 {
		pause.Unlock()
		t.Fatalf("store objects: %v %v, %v %v", buckets, segments, err, err2)
	}
	for _, b := range append(buckets, segments...) {
		if err := os.Remove(b); err != nil {
			pause.Unlock()
			t.Fatal(err)
		}
	}
	pause.Unlock()
	for _, n := range names {
		st, _, err := c.Describe(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, n+" persisted again", func() bool {
			rec, err := store.Get(ctx, n)
			return err == nil && rec.Ceiling >= st.Ceiling
		})
	}
	if p.Stats().StoreLost < int64(len(names)) {
		t.Fatalf("StoreLost %d; want at least %d", p.Stats().StoreLost, len(names))
	}
}

// A store object that cannot be read when a primary starts (here a bucket
// object that is a symbolic link to itself: every read fails, neither
// "corrupt" nor "not found") leaves
// only its own sequences alone, and only until it can be read again: the
// primary starts, serves the other sequences, and picks the object up at a
// later sweep.
func TestUnreadableBucketAtStartIsReadAgain(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	store := fileStore(t, dir)
	ctx := context.Background()
	epoch, err := store.AdvanceEpoch(ctx, "seed")
	if err != nil {
		t.Fatal(err)
	}
	// Two sequences the store knows and ZooKeeper lacks: the primary
	// restores them, except the one whose bucket it cannot read.
	recs := []persist.Record{{Name: "a", Ceiling: 100}, {Name: "b", Ceiling: 200}}
	if err := store.Put(ctx, epoch, recs...); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Compact(ctx, epoch); err != nil { // into the buckets
		t.Fatal(err)
	}
	objs, err := filepath.Glob(filepath.Join(dir, "buckets", "*"))
	if err != nil || len(objs) != 2 {
		t.Fatalf("want two bucket objects, got %v %v", objs, err)
	}
	blocked := objs[0]
	data, err := os.ReadFile(blocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(blocked), blocked); err != nil {
		t.Fatal(err)
	}
	r, _ := startFilePrimary(t, z.Servers, z.Root, store, nil)
	w := r.client(z.Servers, 10*time.Second)
	exists := func(n string) bool {
		ok, _, _ := w.ZK().Session().Exists(context.Background(), r.root+"/"+n)
		return ok
	}
	waitFor(t, "one sequence restored", func() bool { return exists("a") || exists("b") })
	time.Sleep(time.Second)
	if exists("a") && exists("b") {
		t.Fatal("both restored although one bucket could not be read")
	}
	// The object becomes readable again, at once: an object missing for a
	// moment would be an object the store lost.
	tmp := filepath.Join(dir, "restored.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, blocked); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both restored", func() bool { return exists("a") && exists("b") })
	for _, n := range []string{"a", "b"} {
		got, err := w.Take(ctx, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"a": 100, "b": 200}[n]; got[0].Start <= want {
			t.Fatalf("%s restored at %d, at or below its stored ceiling %d", n, got[0].Start, want)
		}
	}
}
