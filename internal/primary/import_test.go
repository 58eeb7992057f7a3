package primary_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
	"github.com/seqkeeper/seqkeeper/persist"
)

// Imports beside a running primary and another operator working on the
// same name: each import line is a lifecycle change, and must neither
// revive a name deleted while it ran nor bury one created while it ran.

// oneSequenceExport holds x, which handed out up to 1000 in its old root.
const oneSequenceExport = `{"seqkeeper_export":1,"root":"/old","exported_at":"2026-11-26T00:00:00Z"}
{"name":"x","next":1001,"ceiling":1000,"start":1,"end":9223372036854775806,"windows":0,"recycled":[]}
`

// importHeldAtItsStoreWrite runs an import of export whose first store
// write is held until during has run, and returns its outcomes.
func importHeldAtItsStoreWrite(t *testing.T, c *seqzk.Client, dir, export string, during func(fail func(error))) []transfer.Outcome {
	t.Helper()
	store, gated := gatedFileStore(t, dir)
	g := gated.arm()
	type result struct {
		out []transfer.Outcome
		err error
	}
	imported := make(chan result, 1)
	go func() {
		out, err := transfer.Import(context.Background(), c, store, strings.NewReader(export), transfer.ImportOptions{MinReserve: 100})
		imported <- result{out, err}
	}()
	select {
	case <-g.hit:
	case res := <-imported:
		t.Fatalf("the import finished without writing the store: %+v, %v", res.out, res.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the import did not reach its store write")
	}
	during(func(err error) { g.fail(t, err) })
	close(g.release)
	select {
	case res := <-imported:
		if res.err != nil {
			t.Fatalf("import: %v", res.err)
		}
		return res.out
	case <-time.After(30 * time.Second):
		t.Fatal("the import did not return")
	}
	return nil
}

// createUseAndDelete is another operator creating x, a worker taking from
// it, and the operator deleting it, while an import of x is under way.
func createUseAndDelete(t *testing.T, c *seqzk.Client, dir string) func(fail func(error)) {
	return func(fail func(error)) {
		ctx := context.Background()
		if _, err := c.Operator().Create(ctx, "x", seqzk.Registration{}); err != nil {
			fail(err)
		}
		if _, err := c.Take(ctx, "x", 10); err != nil {
			fail(err)
		}
		if _, err := c.Operator().Delete(ctx, "x", fileStore(t, dir)); err != nil {
			fail(err)
		}
	}
}

// importRig is a root with a primary on a file store in a directory of its
// own, and a client.
func importRig(t *testing.T) (*fileRig, func(), *seqzk.Client, string) {
	t.Helper()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: z.Servers, root: z.SequencesRoot(t), store: fileStore(t, dir)}
	p, stop := stoppablePrimary(t, r, r.store, "p1", nil)
	waitForUpTo(t, 20*time.Second, "p1 leading", func() bool { return p.Status().Leading })
	return r, stop, r.client(z.Servers, 10*time.Second), dir
}

// The import decides to create x (absent everywhere); before its
// transaction, x is created, used and deleted by another operator. The
// import must say it imported nothing for x, the store must hold x
// deleted, and running the import again must not bring x back.
func TestImportBesideACreateAndDeleteDoesNotReviveTheName(t *testing.T) {
	t.Parallel()
	_, _, c, dir := importRig(t)
	ctx := context.Background()
	out := importHeldAtItsStoreWrite(t, c, dir, oneSequenceExport, createUseAndDelete(t, c, dir))
	if len(out) != 1 || out[0].Action != transfer.Refused {
		t.Errorf("import beside a create and a delete of x: %+v; want x refused (nothing imported for it)", out)
	}
	if rec, err := fileStore(t, dir).Get(ctx, "x"); err != nil || !rec.Deleted() {
		t.Fatalf("the store's record of the deleted x: %+v, %v; want deleted", rec, err)
	}
	out, err := transfer.Import(ctx, c, fileStore(t, dir), strings.NewReader(oneSequenceExport), transfer.ImportOptions{MinReserve: 100})
	if err != nil || len(out) != 1 || out[0].Action != transfer.Refused {
		t.Errorf("the import run again: %+v, %v; want x refused (deleted in the target)", out, err)
	}
	staysAbsent(t, c, "x", 0, "after the import ran again")
}

// staysAbsent fails the test if the znode of the deleted name exists now
// or within d.
func staysAbsent(t *testing.T, c *seqzk.Client, name string, d time.Duration, when string) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if ok, _, _ := c.ZK().Session().Exists(context.Background(), c.Path(name)); ok {
			st, _, _ := c.Describe(context.Background(), name)
			t.Fatalf("the deleted %s is back %s: %+v", name, when, st)
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// The same race, then ZooKeeper loses the root's data: the next primary
// must not restore the deleted x from the store.
func TestImportBesideACreateAndDeleteDoesNotReviveAfterAWipe(t *testing.T) {
	t.Parallel()
	r, stop, c, dir := importRig(t)
	importHeldAtItsStoreWrite(t, c, dir, oneSequenceExport, createUseAndDelete(t, c, dir))
	stop()
	loseZnodes(t, c)
	p2, _ := stoppablePrimary(t, r, fileStore(t, dir), "p2", nil)
	waitForUpTo(t, 20*time.Second, "p2 leading", func() bool { return p2.Status().Leading })
	staysAbsent(t, c, "x", 3*time.Second, "after ZooKeeper lost its data")
}

// An import records the tombstone of x (its old root handed out up to
// 500); before the store learns it, x is created in the target and used.
// ZooKeeper's deletion record came first, so x must start above it and
// never hand out an ID up to 500, and the store's tombstone must not bury
// the live x (a ZooKeeper loss must restore it).
func TestImportedTombstoneRacingACreate(t *testing.T) {
	t.Parallel()
	_, _, c, dir := importRig(t)
	ctx := context.Background()
	var first []int64
	out := importHeldAtItsStoreWrite(t, c, dir, importedExport, func(fail func(error)) {
		if _, err := c.Operator().Create(ctx, "x", seqzk.Registration{}); err != nil {
			fail(err)
		}
		got, err := c.Take(ctx, "x", 10)
		if err != nil {
			fail(err)
		}
		first = append(first, got[0].Start)
	})
	for range 5 {
		got, err := c.Take(ctx, "x", 40)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, got[0].Start)
	}
	for _, id := range first {
		if id <= 500 {
			t.Errorf("x, created while its tombstone (IDs up to 500) was imported, handed out from %d (import: %+v)", id, out)
		}
	}
	if len(out) != 1 || out[0].Action != transfer.Tombstoned {
		t.Errorf("import: %+v; want the tombstone recorded (ZooKeeper's record came before the create)", out)
	}
	var rec persist.Record
	waitFor(t, "the store to learn x's birth", func() bool {
		var err error
		rec, err = fileStore(t, dir).Get(ctx, "x")
		return err == nil && !rec.Deleted()
	})
	if rec.Dead != 500 {
		t.Errorf("the store's record of x: %+v; want the imported tombstone (Dead 500) below the live incarnation", rec)
	}
}
