package primary_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// adopt (a way in for Curator and kazoo users): a Curator
// counter that seqkeeper's takers keep moving is moved to the state
// format while they run and a primary runs. No ID is handed out twice,
// every ID after the adoption is above the counter and covered by the
// store, and a ZooKeeper loss afterwards brings the sequence back in the
// state format above everything handed out (the store learnt the new
// incarnation first). A second adopt changes nothing.
func TestAdoptBesideTakersAndAPrimary(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil)
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if _, err := c.ZK().Session().Create(ctx, c.Path("old"), binary.BigEndian.AppendUint64(nil, 1000), 0); err != nil {
		t.Fatal(err)
	}

	l := newLedger()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		w := r.client(20 * time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				got, err := w.Take(wctx, "old", 7)
				if err != nil {
					if wctx.Err() == nil {
						t.Errorf("take: %v", err)
					}
					return
				}
				l.took(got, math.MaxInt64) // a legacy counter has no stored ceiling
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	store := r.store()
	a, err := primary.Adopt(ctx, c, store, "old", 100)
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	if a.Counter.Format != seqzk.FormatCurator || a.State.Next <= a.Counter.Value || a.State.Legacy {
		t.Errorf("adopted %+v", a)
	}
	time.Sleep(500 * time.Millisecond) // takes go on in the new format
	stop()
	wg.Wait()
	l.check(t)
	rec, err := store.Get(ctx, "old")
	if err != nil || rec.Legacy {
		t.Fatalf("the store's record after adopt: %+v, %v; want the sequence's", rec, err)
	}
	var highest, after int64
	for id := range l.seen {
		highest = max(highest, id)
		if id >= a.State.Next {
			after++
		}
		if id > a.Counter.Value && id < a.State.Next {
			t.Errorf("ID %d handed out between the counter %d and the adopted next %d", id, a.Counter.Value, a.State.Next)
		}
	}
	if after == 0 || highest > rec.Ceiling {
		t.Fatalf("%d IDs taken after the adoption; the highest %d, stored ceiling %d", after, highest, rec.Ceiling)
	}
	t.Logf("counter %d adopted at next %d; %d IDs taken, %d after; highest %d, stored %d", a.Counter.Value, a.State.Next, l.issued, after, highest, rec.Ceiling)

	loseZnodes(t, c, "old")
	waitFor(t, "old restored", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("old")); return ok })
	got, err := c.Take(ctx, "old", 1)
	if err != nil || got[0].Start <= highest {
		t.Fatalf("after a loss: took %v, %v; want an ID above %d", got, err, highest)
	}
	if st, _, err := c.Describe(ctx, "old"); err != nil || st.Legacy {
		t.Fatalf("after a loss: %+v, %v; want the state format", st, err)
	}

	if _, err := primary.Adopt(ctx, c, store, "old", 100); !errors.Is(err, seqzk.ErrNotLegacy) {
		t.Fatalf("second adopt: %v; want ErrNotLegacy", err)
	}
}

// An operator adopts a legacy counter while another deletes it: adopt's
// ceiling reaches the store, then the delete lands, then adopt's
// transaction. Adopt must lose (its transaction is guarded by the znode's
// version and the name's deletion record) and leave no birth in the store:
// the name stays deleted, in the store and in ZooKeeper, and no primary
// brings it back after a ZooKeeper leader election (which changes the
// era, so a name the store held live would be taken for lost).
func TestAdoptRacingADeleteLeavesTheNameDeleted(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	dir := t.TempDir()
	r := &fileRig{t: t, servers: ens.Servers(), root: "/adopt/all-sequences", store: fileStore(t, dir)}
	_, stop1 := stoppablePrimary(t, r, r.store, "p1", nil)
	c := r.client(ens.Servers(), 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
	if _, err := c.ZK().Session().Create(ctx, c.Path("old"), binary.BigEndian.AppendUint64(nil, 1000), 0); err != nil {
		t.Fatal(err)
	}
	operator := fileStore(t, dir)
	waitFor(t, "the primary's mark of the counter", func() bool {
		rec, err := operator.Get(ctx, "old")
		return err == nil && rec.Ceiling > 1000
	})

	astore, agate := gatedFileStore(t, dir)
	ac := r.client(ens.Servers(), 10*time.Second)
	g := agate.arm()
	adopted := make(chan error, 1)
	go func() {
		_, err := primary.Adopt(ctx, ac, astore, "old", 100)
		adopted <- err
	}()
	waitGate(t, "adopt's store write", g.hit)
	dead, err := c.Operator().Delete(ctx, "old", operator)
	if err != nil {
		g.fail(t, err)
	}
	close(g.release)
	if err := <-adopted; !errors.Is(err, seqzk.ErrUnknownSequence) {
		t.Errorf("adopt of a counter deleted under it: %v; want unknown sequence", err)
	}
	rec, err := operator.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Meta().ReadDeletion(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Deleted() || !d.Exists || d.Ceiling < dead {
		t.Fatalf("after the delete (tombstone %d) beat adopt: store %+v, ZooKeeper's record %+v; want both deleted", dead, rec, d)
	}

	// A ZooKeeper leader election, then a new primary term.
	ens.Stop(0)
	if err := ens.Start(0); err != nil {
		t.Fatal(err)
	}
	stop1()
	p2, _ := stoppablePrimary(t, r, fileStore(t, dir), "p2", nil)
	waitForUpTo(t, 30*time.Second, "p2 leading", func() bool { return p2.Status().Leading })
	staysAbsent(t, c, "old", 3*time.Second, "after a ZooKeeper leader election")
}
