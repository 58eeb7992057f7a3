package primary_test

// The end of a sequence's space: a bounded sequence, or one at the top of
// int64, keeps its bound through restores, rollbacks and repairs, and says
// exhausted rather than hand out an ID again.

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// A bounded sequence whose ceiling reached its end, lost by ZooKeeper,
// comes back exhausted: not at next = end, which would hand out its last
// ID again.
func TestRestoredBoundedSequenceStaysExhausted(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "b", seqzk.Registration{End: 50}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	for len(issued) < 50 {
		got, err := w.Take(ctx, "b", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "before the loss", got)
	}
	loseZnodes(t, w, "b")
	got, err := w.Take(ctx, "b", 10)
	issued.add(t, "after the restore", got)
	if !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("take after the restore: %s, %v; want ErrExhausted", got, err)
	}
}

// A record with ceiling MaxInt64 does not make a restore fail (every lost
// sequence comes back); and sequences at the top of the space work to
// their last ID, then say exhausted.
func TestRestoreAtTheTopOfTheSpace(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r, p := startFilePrimary(t, z.Servers, z.Root, fileStore(t, t.TempDir()), nil)
	w := r.client(z.Servers, 10*time.Second)
	waitFor(t, "the root", func() bool { ok, _, _ := w.ZK().Session().Exists(context.Background(), r.root); return ok })
	ctx := context.Background()
	if err := w.Register(ctx, "top", seqzk.Registration{Start: math.MaxInt64 - 150}); err != nil {
		t.Fatal(err)
	}
	if err := w.Register(ctx, "other", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	var last int64
	for {
		got, err := w.Take(ctx, "top", 40)
		if errors.Is(err, state.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		issued.add(t, "top", got)
		last = got[len(got)-1].End
	}
	if last != math.MaxInt64-1 { // MaxInt64 itself is never handed out (state.MaxID)
		t.Fatalf("top ended at %d; want %d", last, int64(math.MaxInt64-1))
	}
	// The primary reports it exhausted, which the metrics keep apart from
	// the unhealthy (cmd/seqkeeper's TestExhaustedSequencesPageNoOne).
	waitFor(t, "the primary to see top exhausted", func() bool {
		st := p.StatusOf(func(s *primary.SequenceStatus) bool { return s.Name == "top" })
		return len(st.Sequences) == 1 && st.Sequences[0].Exhausted && !st.Sequences[0].Healthy
	})
	if _, err := w.Take(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
	loseZnodes(t, w, "top", "other")
	for _, n := range []string{"top", "other"} {
		waitFor(t, n+" restored", func() bool { ok, _, _ := w.ZK().Session().Exists(context.Background(), r.root+"/"+n); return ok })
	}
	if got, err := w.Take(ctx, "top", 1); !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("top after the restore: %s, %v; want ErrExhausted", got, err)
	}
	if _, err := w.Take(ctx, "other", 1); err != nil {
		t.Fatal(err)
	}
}

// At the top of the space, ceiling + 1 must not overflow: after a
// rollback, revalidation moves next past every ID the lost history may
// have handed out.
func TestRollbackAtTheTopOfTheSpace(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	r := newFileRig(t, ens.Servers(), "/test")
	w := r.client(ens.Servers(), 10*time.Second)
	ctx := context.Background()
	if err := w.Register(ctx, "top", seqzk.Registration{Start: math.MaxInt64 - 150}); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	take := func(n int, who string) (exhausted bool) {
		t.Helper()
		for i := 0; i < n; i++ {
			got, err := w.Take(ctx, "top", 10)
			if errors.Is(err, state.ErrExhausted) {
				return true
			}
			if err != nil {
				t.Fatal(err)
			}
			issued.add(t, who, got)
		}
		return false
	}
	take(2, "before the copy")
	saved := ens.Snapshot(t, 0)
	take(5, "the lost history")
	ens.Rollback(t, 0, saved)
	// Everything up to the stored ceiling (the whole space here: the
	// reserve reached its top) may have been issued in the lost history,
	// so the sequence comes back exhausted.
	if !take(5, "after the rollback") {
		t.Fatal("the sequence handed out IDs after a rollback although its whole space was reserved")
	}
}

// The store loses the birth of a sequence's new incarnation (it holds the
// name as deleted, while ZooKeeper has the re-created sequence), and the
// primary's audit repairs the incarnation from ZooKeeper's deletion
// record. The repair carries the sequence's space, so when ZooKeeper then
// loses the sequence it is restored with its own bounds, not the default
// space: a bounded sequence hands out no ID past its end.
func TestRepairedIncarnationKeepsItsSpace(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	p1, stop1 := stoppablePrimary(t, r, r.store, "p1", nil)
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p1.Status().Leading })
	if err := c.Register(ctx, "b", seqzk.Registration{Start: 10, End: 400}); err != nil {
		t.Fatal(err)
	}
	seen := ids{}
	got, err := c.Take(ctx, "b", 5)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "the first incarnation", got)
	if _, err := c.Operator().Delete(ctx, "b", r.store); err != nil {
		t.Fatal(err)
	}
	// The store as it was right after the delete.
	before := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", before).CombinedOutput(); err != nil {
		t.Fatalf("copy the store: %v %s", err, out)
	}
	if err := c.Register(ctx, "b", seqzk.Registration{Start: 10, End: 400}); err != nil {
		t.Fatal(err)
	}
	got, err = c.Take(ctx, "b", 5)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "the second incarnation", got)
	stop1()
	// The store forgets the second incarnation's birth: it holds b as
	// deleted, while ZooKeeper holds it live.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(before, dir); err != nil {
		t.Fatal(err)
	}
	if rec, err := fileStore(t, dir).Get(ctx, "b"); err != nil || !rec.Deleted() {
		t.Fatalf("the store after losing the birth: %+v, %v; want b deleted", rec, err)
	}
	// Its audit repairs what the store lost (every audit_interval).
	p2, stop2 := stoppablePrimary(t, r, fileStore(t, dir), "p2", func(c *config.Primary) { c.AuditInterval = 300 * time.Millisecond })
	waitForUpTo(t, 20*time.Second, "p2 leading", func() bool { return p2.Status().Leading })
	waitForUpTo(t, 20*time.Second, "the store to hold b live again", func() bool {
		rec, err := fileStore(t, filepath.Clean(dir)).Get(ctx, "b")
		return err == nil && !rec.Deleted()
	})
	if rec, _ := fileStore(t, dir).Get(ctx, "b"); rec.Start != 10 || rec.End != 400 {
		t.Fatalf("the repaired record of b: %+v; want its space 10:400", rec)
	}
	stop2()

	// ZooKeeper loses b: it comes back within its space.
	loseZnodes(t, c, "b")
	p3, _ := stoppablePrimary(t, r, fileStore(t, dir), "p3", nil)
	waitForUpTo(t, 20*time.Second, "p3 leading", func() bool { return p3.Status().Leading })
	waitForUpTo(t, 20*time.Second, "b restored", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("b")); return ok })
	st, _, err := c.Describe(ctx, "b")
	if err != nil || st.Start != 10 || st.End != 400 {
		t.Fatalf("restored b: %+v, %v; want the space 10:400", st, err)
	}
	for {
		got, err := c.Take(ctx, "b", 50)
		if errors.Is(err, state.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "the restored incarnation", got)
		if got[len(got)-1].End > 400 {
			t.Fatalf("restored b handed out %s, past its end 400", got)
		}
	}
}
