package watcher_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/watcher"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func dial(t *testing.T, servers []string) *zkclient.Client {
	t.Helper()
	c, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// start runs a watcher on root until the test ends.
func start(t *testing.T, c *zkclient.Client, root string) *watcher.Watcher {
	t.Helper()
	w, err := watcher.New(c, root, watcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range w.Events() { // drain so Run can return
		}
		<-done
	})
	return w
}

// next returns the next event that is not Synced (unless synced is true).
func next(t *testing.T, w *watcher.Watcher, synced bool) watcher.Event {
	t.Helper()
	for {
		select {
		case ev := <-w.Events():
			if ev.Kind == watcher.Synced && !synced {
				continue
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("no event in 30s")
		}
	}
}

func TestReportsAddedChangedRemoved(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := dial(t, z.Servers)
	root := z.Path("seqs")
	ctx := t.Context()
	if err := c.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session().Create(ctx, root+"/before", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	w := start(t, c, root)

	ev := next(t, w, false)
	if ev.Kind != watcher.Added || ev.Name != "before" || string(ev.Data) != "1" {
		t.Fatalf("first event = %+v; want added before", ev)
	}
	if ev := next(t, w, true); ev.Kind != watcher.Synced || len(ev.Names) != 1 || !ev.Root {
		t.Fatalf("after the first sync: %+v; want synced [before]", ev)
	}

	// A znode created later, a window below a sequence (ignored), a change.
	if _, err := c.Session().Create(ctx, root+"/after", nil, 0); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Added || ev.Name != "after" {
		t.Fatalf("got %+v; want added after", ev)
	}
	if _, err := c.Session().Create(ctx, root+"/after/w-", nil, zkclient.Sequential); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session().Set(ctx, root+"/before", []byte("2"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Changed || ev.Name != "before" || string(ev.Data) != "2" || ev.Version != 1 {
		t.Fatalf("got %+v; want changed before to 2 at version 1", ev)
	}
	if err := c.Session().Delete(ctx, root+"/before", zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Removed || ev.Name != "before" {
		t.Fatalf("got %+v; want removed before", ev)
	}
}

// Watches are one-shot: changes made while the watcher re-arms are not
// notified one by one. The watcher must still end on the latest data.
func TestBurstOfChangesEndsOnTheLatest(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := dial(t, z.Servers)
	root := z.Path("seqs")
	if err := c.EnsurePath(t.Context(), root+"/hot"); err != nil {
		t.Fatal(err)
	}
	w := start(t, c, root)
	next(t, w, false) // added hot

	writer := dial(t, z.Servers)
	const n = 300
	for i := 1; i <= n; i++ {
		if _, err := writer.Session().Set(t.Context(), root+"/hot", []byte(strconv.Itoa(i)), zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for {
		ev := next(t, w, false)
		seen++
		if ev.Version > n {
			t.Fatalf("version %d beyond the last write", ev.Version)
		}
		if ev.Version == n {
			if string(ev.Data) != strconv.Itoa(n) {
				t.Fatalf("last event data %q; want %d", ev.Data, n)
			}
			t.Logf("%d writes reported as %d events", n, seen)
			return
		}
	}
}

// A wiped ensemble: the session is gone and so is the root. The watcher
// reports every sequence removed and a sync without a root, then picks the
// new tree up.
func TestWipedEnsembleIsReportedAndFollowed(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	c := dial(t, ens.Servers())
	if err := c.EnsurePath(t.Context(), "/all-sequences/a"); err != nil {
		t.Fatal(err)
	}
	w := start(t, c, "/all-sequences")
	next(t, w, false) // added a

	if err := ens.WipeAll(); err != nil {
		t.Fatal(err)
	}
	if err := ens.StartAll(); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Removed || ev.Name != "a" {
		t.Fatalf("after the wipe: %+v; want removed a", ev)
	}
	if ev := next(t, w, true); ev.Kind != watcher.Synced || ev.Root || len(ev.Names) != 0 {
		t.Fatalf("after the wipe: %+v; want synced with no root", ev)
	}
	if err := c.EnsurePath(t.Context(), "/all-sequences/b"); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Added || ev.Name != "b" {
		t.Fatalf("after re-creating the root: %+v; want added b", ev)
	}
}

func TestInitialSyncOfManySequences(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := dial(t, z.Servers)
	root := z.Path("many")
	ctx := t.Context()
	if err := c.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	ops := make([]zkclient.Op, 0, 500)
	for i := 0; i < n; i++ {
		ops = append(ops, zkclient.CreateOp(fmt.Sprintf("%s/s%05d", root, i), []byte("x"), 0))
		if len(ops) == cap(ops) {
			if _, err := c.Session().Multi(ctx, ops...); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	w := start(t, c, root)
	added := 0
	for {
		ev := next(t, w, true)
		if ev.Kind == watcher.Added {
			added++
			continue
		}
		if ev.Kind != watcher.Synced || len(ev.Names) != n || added != n {
			t.Fatalf("got %v with %d names after %d added; want synced with %d", ev.Kind, len(ev.Names), added, n)
		}
		return
	}
}

// After ZooKeeper is restored from an older copy, a sequence znode can
// reach the version the watcher last reported with other data. The watcher
// must report it, not take it for what it has seen.
func TestReportsSameVersionOtherDataAfterARollback(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	root := "/seqs"
	setup := dial(t, ens.Servers())
	ctx := t.Context()
	if err := setup.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Session().Create(ctx, root+"/s", []byte("v0"), 0); err != nil {
		t.Fatal(err)
	}
	saved := ens.Snapshot(t, 0)
	c := dial(t, ens.Servers())
	w := start(t, c, root)
	if ev := next(t, w, false); ev.Kind != watcher.Added || string(ev.Data) != "v0" {
		t.Fatalf("first event %+v", ev)
	}
	if _, err := c.Session().Set(ctx, root+"/s", []byte("lost"), 0); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); string(ev.Data) != "lost" || ev.Version != 1 {
		t.Fatalf("event %+v; want version 1, data lost", ev)
	}
	// Roll back to the copy (version 0), and write version 1 again.
	ens.Rollback(t, 0, saved)
	other := dial(t, ens.Servers())
	if _, err := other.Session().Set(ctx, root+"/s", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	w.Resync()
	for {
		ev := next(t, w, false)
		if string(ev.Data) == "kept" {
			return
		}
		t.Logf("event %s %q version %d", ev.Kind, ev.Data, ev.Version)
	}
}

// A resync (the primary asks for one at every sweep) reads idle sequences
// without setting their data watches again: go-zookeeper keeps a channel
// per watching read until the watch fires, so re-setting them would grow
// memory at every sweep. Their watches still fire on the next change.
func TestResyncDoesNotPileUpWatches(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := dial(t, z.Servers)
	root := z.Path("seqs")
	ctx := t.Context()
	if err := c.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := c.Session().Create(ctx, fmt.Sprintf("%s/s%02d", root, i), []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	w := start(t, c, root)
	synced := func() {
		t.Helper()
		for {
			if ev := next(t, w, true); ev.Kind == watcher.Synced {
				return
			}
		}
	}
	synced()
	set := c.WatchesSet()
	const resyncs = 20
	for range resyncs {
		w.Resync()
		synced()
	}
	// One watch per resync is the root's children watch, which the listing
	// sets; none per sequence.
	if grew := c.WatchesSet() - set; grew > resyncs {
		t.Fatalf("%d resyncs of %d idle sequences set %d watches; want at most %d (the root's)", resyncs, n, grew, resyncs)
	}
	if _, err := c.Session().Set(ctx, root+"/s07", []byte("2"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Changed || ev.Name != "s07" || string(ev.Data) != "2" {
		t.Fatalf("after the resyncs: %+v; want changed s07 to 2 (its watch still set)", ev)
	}
}

// The server forgets persistent watches with the connection: after a
// reconnect on the same session the watcher sets them again, and a change
// made after it is reported.
func TestFollowsAfterAReconnect(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	root := "/seqs"
	if err := c.EnsurePath(ctx, root+"/a"); err != nil {
		t.Fatal(err)
	}
	w := start(t, c, root)
	if ev := next(t, w, false); ev.Kind != watcher.Added || ev.Name != "a" {
		t.Fatalf("first event = %+v; want added a", ev)
	}
	session, conn := c.SessionID(), c.Connection()
	e.StopAll()
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.Connection() == conn || c.DisconnectedFor() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.SessionID() != session {
		t.Fatalf("session %x replaced by %x: the test needs the same session", session, c.SessionID())
	}
	// The watcher's resync after the reconnect ends with Synced; a change
	// after it must be reported.
	for ev := next(t, w, true); ev.Kind != watcher.Synced; ev = next(t, w, true) {
	}
	for i := range 3 {
		data := fmt.Sprint("after-", i)
		if _, err := c.Session().Set(ctx, root+"/a", []byte(data), zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if ev := next(t, w, false); ev.Kind != watcher.Changed || ev.Name != "a" || string(ev.Data) != data {
			t.Fatalf("after the reconnect: %+v; want changed a to %s", ev, data)
		}
	}
}

// Wrote: the notifications of the watcher's client's own writes, stamped
// at or below the stamps of their replies, are neither read nor reported;
// another client's write right after one of them is; a resync finds
// nothing new in what the skipped writes left. The watcher is held (its first sync's
// events are not consumed until the writes are made), so that every
// notification is still queued when Wrote is called.
func TestWroteSkipsOnlyTheWritersOwnNotifications(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := dial(t, z.Servers)
	other := dial(t, z.Servers)
	root := z.Path("wrote")
	ctx := t.Context()
	if err := c.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	const n = 300 // more than the events the watcher buffers
	ops := make([]zkclient.Op, 0, n)
	for i := range n {
		ops = append(ops, zkclient.CreateOp(fmt.Sprintf("%s/s%03d", root, i), []byte("0"), 0))
	}
	if _, err := c.Session().Multi(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	w := start(t, c, root)
	deadline := time.Now().Add(30 * time.Second)
	for len(w.Events()) < cap(w.Events()) {
		if time.Now().After(deadline) {
			t.Fatalf("the first sync buffered %d events; want %d", len(w.Events()), cap(w.Events()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	write := func(name string) {
		t.Helper()
		res, err := c.Session().Multi(ctx, zkclient.SetOp(root+"/"+name, []byte("mine"), zkclient.AnyVersion))
		if err != nil {
			t.Fatal(err)
		}
		w.Wrote(name, []byte("mine"), res[0])
	}
	write("s000")
	write("s002")
	for _, name := range []string{"s002", "s001"} { // s002: a take right after the write
		if _, err := other.Session().Set(ctx, root+"/"+name, []byte("theirs"), zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}

	changed := map[string]string{}
	for len(changed) < 2 {
		ev := next(t, w, false)
		switch {
		case ev.Kind == watcher.Added:
		case ev.Kind == watcher.Changed && changed[ev.Name] == "":
			changed[ev.Name] = string(ev.Data)
		default:
			t.Fatalf("got %v %s %q; want the first sync's events, then s001 and s002 changed", ev.Kind, ev.Name, ev.Data)
		}
	}
	if changed["s001"] != "theirs" || changed["s002"] != "theirs" {
		t.Fatalf("changed: %v; want s001 and s002 changed to theirs (and s000, written by the watcher's client, not reported)", changed)
	}
	// The watcher took s000's write as known: a resync finds nothing new.
	w.Resync()
	if ev := next(t, w, true); ev.Kind != watcher.Synced {
		t.Fatalf("the resync reported %v %s %q; want nothing before synced", ev.Kind, ev.Name, ev.Data)
	}
	// Another client's write of s000 is reported, as s000 was not followed
	// by notifications alone.
	if _, err := other.Session().Set(ctx, root+"/s000", []byte("theirs"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w, false); ev.Kind != watcher.Changed || ev.Name != "s000" || string(ev.Data) != "theirs" {
		t.Fatalf("got %v %s %q; want s000 changed to theirs", ev.Kind, ev.Name, ev.Data)
	}
}
