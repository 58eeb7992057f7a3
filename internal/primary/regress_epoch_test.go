package primary_test

// Regression tests of paths through the store and the operators' commands
// that handed an ID out twice or brought a deleted name back
// (a repro of issue 26, "Never twice, by construction").

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

// stoppablePrimary runs a primary on store like startFilePrimary, but returns a
// function that stops it (and waits for it).
func stoppablePrimary(t *testing.T, r *fileRig, store *persist.Store, holder string, tune func(*config.Primary)) (*primary.Primary, func()) {
	t.Helper()
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = r.root[:len(r.root)-len("/all-sequences")] + "/cluster"
	cfg.Runway = time.Second
	cfg.MinReserve = 100
	cfg.SweepInterval = 200 * time.Millisecond
	// Compactions are run by the test, at chosen moments.
	cfg.CompactInterval = time.Hour
	cfg.CompactSegments = 1 << 30
	if tune != nil {
		tune(&cfg)
	}
	p, err := primary.New(cfg, primary.Deps{Sequences: r.client(r.servers, 4*time.Second), Store: store, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return p, stop
}

// Regression: the epoch object also held the log's checkpoint; without
// it, a reader started at position 1, which a compaction had deleted long
// ago, and stopped there, so every segment above the old checkpoint
// became invisible. A tombstone in one of them was lost: the next primary
// found the deleted sequence's older bucket record live, ZooKeeper lacking
// it, and restored it at that older ceiling + 1, below IDs the deleted
// sequence had handed out. Readers now list the log (no object says where
// it ends), and ZooKeeper's deletion record and the era say the name was
// deleted, not lost, whatever the store says.
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
	tomb, err := c.Delete(ctx, "x", r.store)
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
	if ok, _, _ := c.ZK().Exists(ctx, r.root+"/x"); ok {
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
