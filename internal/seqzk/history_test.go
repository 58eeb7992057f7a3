package seqzk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// dialClient returns a client of the sequences under root on a session of
// its own with servers, closed when the test ends.
func dialClient(t testing.TB, servers []string, root string, timeout time.Duration) *seqzk.Client {
	t.Helper()
	zc, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: root, CeilingWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issuedSet records IDs handed out and fails the test on a second one.
type issuedSet struct {
	t   *testing.T
	ids map[int64]string
}

func (s *issuedSet) add(who string, rs state.Ranges) {
	s.t.Helper()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			if first, dup := s.ids[id]; dup {
				s.t.Errorf("id %d handed out twice: first to %s, again to %s", id, first, who)
			}
			s.ids[id] = who
		}
	}
}

// After ZooKeeper is restored from a full copy, its new epoch is the
// copy's accepted epoch + 1. When the lost history had an ordinary restart
// after the copy, that epoch number was used already, so an epoch stamp
// alone cannot tell the two histories apart. A worker whose session
// outlives the rollback must not write its cached state, stamped in the
// lost history, once the znode's version has caught up with the one it
// cached. (The cache is dropped on any reconnect, and the new history's
// validation marker fires the worker's child watch;
// TestStaleWriteIsRefusedByItsMarker covers the write that gets out before
// either is noticed.)
func TestRollbackReusingAnEpochNeverReissues(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	const root = "/all-sequences"
	newClient := func(servers []string, timeout time.Duration) *seqzk.Client {
		return dialClient(t, servers, root, timeout)
	}
	admin := newClient(ens.Servers(), 4*time.Second) // stands in for the primary
	if err := admin.ZK().EnsurePath(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(ctx, "rb", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Keeper().Revalidate(ctx, "rb", 0, 1000); err != nil { // stamped in epoch E
		t.Fatal(err)
	}
	// A long-lived worker, behind a proxy so that it can be cut off; its
	// session predates the copy, so the restored ensemble knows it.
	proxy := testenv.NewProxy(t, ens.Servers()[0])
	x := newClient([]string{proxy.Addr()}, 30*time.Second)
	issued := &issuedSet{t: t, ids: map[int64]string{}}
	waitX := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !x.ZK().HasSession() {
			if time.Now().After(deadline) {
				t.Fatal("x never reconnected")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The operator's copy of the data directory, then an ordinary restart:
	// the lost history runs in epoch E+1, the number the restore reuses.
	copyDir := ens.Snapshot(t, 0)
	lost := newClient(ens.Servers(), 4*time.Second)
	lostEpoch, err := lost.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lost.Keeper().Revalidate(ctx, "rb", 1001, 2000); err != nil { // stamp E+1
		t.Fatal(err)
	}
	waitX()
	got, err := x.Take(ctx, "rb", 10) // x caches this state and version
	if err != nil {
		t.Fatal(err)
	}
	issued.add("x before the rollback", got)
	_, stat, err := lost.ZK().Session().Get(context.Background(), root+"/rb")
	if err != nil {
		t.Fatal(err)
	}
	cached := stat.Version
	for i := 0; i < 3; i++ { // IDs only the lost history knows
		got, err := lost.Take(ctx, "rb", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("a worker of the lost history", got)
	}

	// Roll back to the copy.
	ens.Rollback(t, 0, copyDir)
	now := newClient(ens.Servers(), 4*time.Second)
	epoch, err := now.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if epoch != lostEpoch {
		t.Logf("the restored ensemble did not reuse the epoch (%d, lost history %d): the test shows less than it should", epoch, lostEpoch)
	}
	for i := 0; i < 200; i++ { // ordinary traffic: zxids move past the lost history's
		if _, err := now.ZK().Session().Set(context.Background(), root, nil, -1); err != nil {
			t.Fatal(err)
		}
	}
	// The primary revalidates above everything the store covers, and a
	// worker takes until the znode's version is the one x cached.
	if _, err := now.Keeper().Revalidate(ctx, "rb", 2001, 3000); err != nil {
		t.Fatal(err)
	}
	for {
		_, stat, err := now.ZK().Session().Get(context.Background(), root+"/rb")
		if err != nil {
			t.Fatal(err)
		}
		if stat.Version == cached {
			break // a write at x's cached version would land now
		}
		if stat.Version > cached {
			t.Fatalf("set-up: the restored znode is at version %d, past x's cached %d", stat.Version, cached)
		}
		got, err := now.Take(ctx, "rb", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("a worker after the rollback", got)
	}

	waitX()
	got, err = x.Take(ctx, "rb", 10)
	if err != nil {
		t.Fatal(err)
	}
	issued.add("x after the rollback", got)
	for i := 0; i < 5; i++ {
		got, err := now.Take(ctx, "rb", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("a worker after x", got)
	}
	st, _, err := now.Describe(ctx, "rb")
	if err != nil {
		t.Fatal(err)
	}
	if st.Next <= 2001 {
		t.Errorf("next %d after the rollback: the state was written back below the revalidated floor 2001", st.Next)
	}
}

// A write prepared from a stale cache that reaches ZooKeeper before the
// worker hears of the change (its notifications are held back here) must
// be refused by ZooKeeper itself: the transaction checks the marker of the
// state it was prepared from, and the marker dies with the incarnation (or
// history) it belongs to. Here the znode is deleted and re-created at the
// worker's cached version (the ABA case).
func TestStaleWriteIsRefusedByItsMarker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(seqzk.Options{})
	e.create(admin, "s", seqzk.Registration{}, 1000)
	proxy := testenv.NewProxy(t, e.servers[0])
	x := dialClient(t, []string{proxy.Addr()}, e.root, 20*time.Second)
	issued := &issuedSet{t: t, ids: map[int64]string{}}
	for i := 0; i < 3; i++ {
		got, err := x.Take(ctx, "s", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("x before", got)
	}
	path := e.root + "/s"
	conn := admin.ZK()
	_, stat, err := conn.Session().Get(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	cached := stat.Version

	proxy.PauseReplies() // x hears nothing from now on; its requests still go out
	if err := testenv.DeleteAll(conn, path); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	// A fresh incarnation above the old one's ceiling, as a tombstone
	// makes the primary do.
	if _, err := admin.Keeper().Revalidate(ctx, "s", 1001, 2000); err != nil {
		t.Fatal(err)
	}
	for {
		_, stat, err := conn.Session().Get(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if stat.Version == cached {
			break
		}
		if stat.Version > cached {
			t.Fatalf("set-up: version %d past x's cached %d", stat.Version, cached)
		}
		got, err := admin.Take(ctx, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("the new incarnation", got)
	}
	before, _, err := admin.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	xdone := make(chan error, 1)
	go func() {
		got, err := x.Take(ctx, "s", 10) // written from x's stale cache
		issued.add("x after the re-create", got)
		xdone <- err
	}()
	time.Sleep(500 * time.Millisecond) // the write reaches the server
	after, _, err := admin.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Equal(before) {
		t.Errorf("x's stale write landed on the new znode: %q became %q", before.Encode(), after.Encode())
	}
	proxy.Resume()
	if err := <-xdone; err != nil {
		t.Fatalf("x's take after the re-create: %v", err)
	}
	for i := 0; i < 3; i++ {
		got, err := admin.Take(ctx, "s", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("the new incarnation, later", got)
	}
}

// IDs carved into a window and not handed out yet lie below the
// sequence's next, yet were never issued. A push of them must be refused,
// or they would be handed out twice: once recycled from the sequence,
// once from the window.
func TestPushOfIDsAWindowHoldsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "w", seqzk.Registration{Windows: 1}, 1000)
	if _, err := c.Keeper().OpenWindow(ctx, "w", 100); err != nil { // IDs 1..100, next 101
		t.Fatal(err)
	}
	issued := &issuedSet{t: t, ids: map[int64]string{}}
	worker := e.client(seqzk.Options{})
	got, err := worker.Take(ctx, "w", 20) // 1..20 from the window
	if err != nil {
		t.Fatal(err)
	}
	issued.add("the window's first take", got)
	for _, tt := range []struct {
		push state.Ranges
		ok   bool
	}{
		{state.Ranges{{Start: 50, End: 60}}, false},                      // held by the window
		{state.Ranges{{Start: 15, End: 25}}, false},                      // partly held
		{state.Ranges{{Start: 5, End: 6}, {Start: 99, End: 100}}, false}, // one held range refuses all
		{state.Ranges{{Start: 101, End: 101}}, false},                    // never carved: above next
		{state.Ranges{{Start: 5, End: 6}}, true},                         // issued by the window
	} {
		err := worker.Push(ctx, "w", tt.push)
		switch {
		case tt.ok && err != nil:
			t.Errorf("push %s: %v; want accepted", tt.push, err)
		case !tt.ok && !errors.Is(err, state.ErrBadPush):
			t.Errorf("push %s: %v; want ErrBadPush", tt.push, err)
		}
	}
	// 5:6 was pushed back by its holder: it may be handed out once more.
	delete(issued.ids, 5)
	delete(issued.ids, 6)
	for i := 0; i < 12; i++ {
		got, err := worker.Take(ctx, "w", 10)
		if err != nil {
			t.Fatal(err)
		}
		issued.add("a later take", got)
	}
}
