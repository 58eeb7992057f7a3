package primary_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A term starts by folding the log it finds, so that under handovers more
// frequent than CompactInterval the store does not grow by every term's
// segments. Both primaries here have an hour's CompactInterval and no
// segment threshold: only the compaction at the start of a term can fold.
func TestTermStartsByCompactingTheLog(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	segments := func() int {
		t.Helper()
		segs, err := filepath.Glob(filepath.Join(dir, "log", "*"))
		if err != nil {
			t.Fatal(err)
		}
		return len(segs)
	}
	p1, stop1 := stoppablePrimary(t, r, r.store, "p1", nil)
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p1.Status().Leading })
	if err := c.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := c.Take(ctx, "x", 100); err != nil {
			t.Fatal(err)
		}
	}
	stop1()
	before := segments()
	if before == 0 {
		t.Fatal("p1's term left no segment in the log: nothing for the test to see folded")
	}

	p2, _ := stoppablePrimary(t, r, fileStore(t, dir), "p2", nil)
	waitForUpTo(t, 20*time.Second, "p2 compacting at the start of its term", func() bool { return p2.Stats().Compactions > 0 })
	if s := p2.Stats(); s.Compactions != 1 || s.Compacted < int64(before) {
		t.Errorf("p2 compacted %d times, folding %d segments; want once at the start of its term, folding the %d p1 left", s.Compactions, s.Compacted, before)
	}
	if after := segments(); after >= before {
		t.Errorf("the log holds %d segments after p2's start, %d before: nothing was deleted", after, before)
	}
	got, err := c.Take(ctx, "x", 1)
	if err != nil {
		t.Fatalf("take after the compaction: %v", err)
	}
	t.Logf("%d segments before p2's term, %d after its first compaction; x goes on at %v", before, segments(), got)
}
