package zkclient_test

import (
	"context"
	"fmt"
	"sync"
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
				if _, err := c.Session().Create(ctx, fmt.Sprintf("%s/c%d", path, i), nil, 0); err != nil {
					t.Fatal(err)
				}
			} else if _, err := c.Session().Set(ctx, path, []byte{byte(i)}, zkclient.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		// A write's reply comes after the notifications it triggered.
		if _, _, err := c.Session().Get(ctx, root); err != nil {
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

// The race the rule must win: a one-shot watch sent while the persistent
// watch's request is on its way. Whatever the order in which the two reach
// the server, the persistent watch keeps notifying every change, and the
// one-shot watch fires.
func TestOneShotWatchesRacingAPersistentWatch(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	root := z.Root + "/race"
	const n = 200
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/n%03d", root, i)
		if err := c.EnsurePath(ctx, paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	q, stop := c.NodeEvents(root)
	defer stop()
	s := c.Session()
	chans := make([]<-chan zkclient.Event, n)
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { errs <- s.AddWatch(ctx, p, false) })
		wg.Go(func() {
			_, _, ch, err := s.GetW(ctx, p)
			chans[i] = ch
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		for _, p := range paths {
			if _, err := c.Session().Set(ctx, p, []byte("x"), zkclient.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := c.Session().Get(ctx, root); err != nil { // after every notification
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, ev := range q.Drain() {
		got[ev.Path]++
	}
	for i, p := range paths {
		if got[p] != 3 {
			t.Errorf("%s: %d notifications of 3 changes", p, got[p])
		}
		select {
		case <-chans[i]:
		default:
			t.Errorf("%s: the one-shot watch did not fire", p)
		}
	}
}

// A one-shot watch that a persistent watch stood for is set again after a
// reconnect, as any other (the server forgets persistent watches with the
// connection, not the session's one-shot ones), and fires at the next
// change.
func TestOneShotWatchesOnAPersistentWatchSurviveAReconnect(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Session().Create(ctx, "/p", nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Session().AddWatch(ctx, "/p", false); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.Session().GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	session := c.SessionID()
	changes, stopChanges := c.Changes()
	defer stopChanges()
	e.StopAll()
	waitFor(t, changes, func() bool { return c.DisconnectedFor() > 0 })
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() == 0 })
	if c.SessionID() != session {
		t.Fatalf("session %x replaced by %x: the test needs the same session", session, c.SessionID())
	}
	if _, err := c.Session().Set(ctx, "/p", []byte("x"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zkclient.EventNodeDataChanged {
			t.Fatalf("the one-shot watch fired %v; want %v", ev.Type, zkclient.EventNodeDataChanged)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("after a reconnect, a one-shot watch that the persistent watch stood for never fired")
	}
}
