package primary_test

// Tombstones imported beside a running primary: they floor a new
// registration of the name, and they end only the incarnations they name.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
)

const importedExport = `{"seqkeeper_export":1,"root":"/old","exported_at":"2026-11-26T00:00:00Z"}
{"name":"x","deleted":true,"ceiling":500}
`

func importTombstone(t *testing.T, c *seqzk.Client, r *fileRig) {
	t.Helper()
	out, err := transfer.Import(context.Background(), c, r.store, strings.NewReader(importedExport), transfer.ImportOptions{MinReserve: 100})
	if err != nil || len(out) != 1 || out[0].Action != transfer.Tombstoned {
		t.Fatalf("import: %+v, %v", out, err)
	}
}

// seqkeeper import records a tombstone behind the running primary's back:
// a name imported as deleted (IDs up to 500 handed out in the old root)
// and created again before the next audit starts above 500, not at 1. A
// registration's floor is read afresh once it is seen, from the store and
// from ZooKeeper's deletion record (which the import writes too), not from
// the primary's in-memory copy of the store's records.
func TestImportedTombstoneFloorsARegistrationBesideThePrimary(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	p1, _ := stoppablePrimary(t, r, r.store, "p1", nil)
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p1.Status().Leading })
	importTombstone(t, c, r)
	if rec, err := fileStore(t, dir).Get(ctx, "x"); err != nil || !rec.Deleted() || rec.Ceiling != 500 {
		t.Fatalf("the store's record of x after the import: %+v, %v", rec, err)
	}
	if err := c.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Take(ctx, "x", 40)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Start <= 500 {
		t.Errorf("x created again after its tombstone (ceiling 500) was imported hands out %s: IDs the deleted x handed out in the old root", got)
	}
}

// An imported tombstone carries no creation zxid. When the name is created
// again in the target, the records the primary writes for the new, live
// znode are live, and when ZooKeeper loses that znode the live sequence is
// restored: a deletion names the incarnations it ends
// (persist.Record.Dead), a new incarnation is born above it (Live), and
// "deleted" follows from comparing them.
func TestImportedTombstoneDoesNotStickToANewIncarnation(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	// A root moved here (import runs before the new root's replicas
	// start, as docs/cli.md says): its export holds the tombstone of x.
	importTombstone(t, c, r)
	p1, stop1 := stoppablePrimary(t, r, r.store, "p1", nil)
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p1.Status().Leading })
	// Later x is created again in the new root, and used.
	if err := c.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 5 {
		got, err := c.Take(ctx, "x", 40)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Start <= 500 {
			t.Fatalf("the re-created x starts at %s, not above the imported tombstone", got)
		}
		last = got[len(got)-1].End
	}
	time.Sleep(500 * time.Millisecond) // the primary's raises land in the store
	rec, err := fileStore(t, dir).Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Deleted() {
		t.Errorf("the store holds the live, re-created x (handed out up to %d) as deleted: %+v", last, rec)
	}
	stop1()

	// ZooKeeper loses x's znode, with the root's own data: a primary must
	// restore it from the store.
	zk := c.ZK()
	loseZnodes(t, c, "x")
	p2, _ := stoppablePrimary(t, r, fileStore(t, dir), "p2", nil)
	waitForUpTo(t, 20*time.Second, "p2 leading", func() bool { return p2.Status().Leading })
	deadline := time.Now().Add(3 * time.Second)
	for {
		if ok, _, _ := zk.Session().Exists(ctx, r.root+"/x"); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live sequence x (handed out up to %d) was not restored after ZooKeeper lost its znode", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
