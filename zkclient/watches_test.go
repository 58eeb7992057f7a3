package zkclient_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A one-shot watch set on a znode that the same session also watches
// persistently must not end the persistent watch. ZooKeeper 3.8 keeps one
// watch mode per session and znode (ZOOKEEPER-4466, fixed in 3.9): a GetW,
// ExistsW or ChildrenW sent to the server turns the persistent watch into a
// one-shot one, which then ends at the next change. In 'seqkeeper serve'
// the primary's watcher and the sidecar's takes share a session, so a take
// waiting at the ceiling silenced the primary on that sequence until its
// next sweep. Every change must reach the queue, and every one-shot watch
// must still fire once.
func TestOneShotWatchesKeepPersistentWatches(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	root := z.Root + "/modes"
	path := root + "/n"
	if err := c.EnsurePath(ctx, path); err != nil {
		t.Fatal(err)
	}
	q, stop := c.NodeEvents(root)
	defer stop()
	if err := c.Session().AddWatch(ctx, path, false); err != nil {
		t.Fatal(err)
	}
	s := c.Session()
	oneShots := map[string]func() (<-chan zkclient.Event, error){
		"GetW": func() (<-chan zkclient.Event, error) { _, _, ch, err := s.GetW(ctx, path); return ch, err },
		"ExistsW": func() (<-chan zkclient.Event, error) {
			_, _, ch, err := s.ExistsW(ctx, path)
			return ch, err
		},
		"ChildrenW": func() (<-chan zkclient.Event, error) {
			_, _, ch, err := s.ChildrenW(ctx, path)
			return ch, err
		},
	}
	for name, set := range oneShots {
		ch, err := set()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if name == "ChildrenW" {
				if _, err := c.Create(ctx, fmt.Sprintf("%s/c%d", path, i), nil, 0); err != nil {
					t.Fatal(err)
				}
			} else if _, err := c.Set(ctx, path, []byte{byte(i)}, zkclient.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		// A write's reply comes after the notifications it triggered.
		if _, _, err := c.Get(ctx, root); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the one-shot watch never fired", name)
		}
		if got := len(q.Drain()); got != 3 {
			t.Fatalf("after a %s: %d notifications of 3 changes reached the queue; want 3", name, got)
		}
	}
}

// The server forgets persistent watches with the connection, so a one-shot
// watch that relied on one fires NotWatching when the connection drops
// (the caller reads again), and the next one-shot watch on that znode,
// with no persistent watch set again, is the server's own.
func TestOneShotWatchesOnAPersistentWatchEndWithTheConnection(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Create(ctx, "/p", nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Session().AddWatch(ctx, "/p", false); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.Session().GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	changes, stopChanges := c.Changes()
	defer stopChanges()
	e.StopAll()
	select {
	case ev := <-ch:
		if ev.Type != zkclient.EventNotWatching {
			t.Fatalf("the one-shot watch fired %v; want %v", ev.Type, zkclient.EventNotWatching)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection dropped and the one-shot watch that relied on the persistent one never fired")
	}
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() == 0 })
	_, _, ch, err = c.Session().GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/p", []byte("x"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zkclient.EventNodeDataChanged {
			t.Fatalf("the one-shot watch fired %v; want %v", ev.Type, zkclient.EventNodeDataChanged)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a one-shot watch set after the reconnect never fired")
	}
}

// A transaction's OpResult.Stamp lies at or above the stamps of the
// notifications of its own write and below those of any later write,
// another client's included: so a writer that knows the state it wrote
// can tell which queued notifications its write made stale.
func TestMultiStampSeparatesItsWriteFromLaterOnes(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := testenv.Connect(t, z.Servers, 10*time.Second)
	other := testenv.Connect(t, z.Servers, 10*time.Second)
	ctx := context.Background()
	root := z.Root + "/stamps"
	path := root + "/n"
	if err := c.EnsurePath(ctx, path); err != nil {
		t.Fatal(err)
	}
	q, stop := c.NodeEvents(root)
	defer stop()
	if err := c.Session().AddWatch(ctx, path, false); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 100 {
		res, err := c.Multi(ctx, zkclient.SetOp(path, []byte("mine"), zkclient.AnyVersion))
		if err != nil {
			t.Fatal(err)
		}
		stamp := res[0].Stamp
		st, err := other.Set(ctx, path, []byte("theirs"), zkclient.AnyVersion)
		if err != nil {
			t.Fatal(err)
		}
		// A read that sees the other's write comes after its notification.
		if _, got, err := c.Get(ctx, path); err != nil || got.Version < st.Version {
			t.Fatalf("read after the other's write: version %v, %v; want %d", got, err, st.Version)
		}
		evs := q.Drain()
		if len(evs) != 2 {
			t.Fatalf("round %d: %d notifications; want 2 (mine, then theirs)", i, len(evs))
		}
		if mine, theirs := evs[0].Stamp, evs[1].Stamp; mine <= last || mine > stamp || theirs <= stamp {
			t.Fatalf("round %d: stamps %d (mine), %d (theirs), reply %d, previous round up to %d; want previous < mine <= reply < theirs",
				i, mine, theirs, stamp, last)
		}
		last = evs[1].Stamp
	}
}
