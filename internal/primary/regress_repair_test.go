package primary_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Regression (found by the model test, seed 0x18eba2159eb5f2c5): the store
// lost the birth of a sequence's new incarnation (it held the name as
// deleted, while ZooKeeper had the re-created sequence), and the primary's
// audit repaired the incarnation from ZooKeeper's deletion record, but
// without its configuration. When ZooKeeper then lost the sequence, it was
// restored with the default space: a bounded sequence handed out IDs past
// its end. The repair now carries the sequence's space.
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
	if _, err := c.Delete(ctx, "b", r.store); err != nil {
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
	waitForUpTo(t, 20*time.Second, "b restored", func() bool { ok, _, _ := c.ZK().Exists(ctx, c.Path("b")); return ok })
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
