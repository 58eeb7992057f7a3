package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDialFailsClearlyWithoutServers(t *testing.T) {
	t.Parallel()
	_, err := zkclient.Dial(context.Background(), []string{"127.0.0.1:1"}, zkclient.Options{ConnectTimeout: 500 * time.Millisecond})
	if !errors.Is(err, zkclient.ErrNoSession) {
		t.Fatalf("err = %v; want ErrNoSession", err)
	}
}

// A wiped server does not know the session any more: go-zookeeper opens a
// new one silently, and Client must make that visible.
func TestSessionReplacementIsVisible(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Writing makes the client remember a zxid the wiped server never saw;
	// the server refuses such a client, so only a new connection recovers.
	if _, err := c.Session().Create(context.Background(), "/x", nil, 0); err != nil {
		t.Fatal(err)
	}
	first := c.SessionID()
	if first == 0 || c.DisconnectedFor() != 0 {
		t.Fatalf("after Dial: session %x, disconnected for %s", first, c.DisconnectedFor())
	}
	changes, stop := c.Changes()
	defer stop()

	if err := e.WipeAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() > 0 })
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() == 0 && c.SessionID() != first })
	if ok, _, err := c.Session().Exists(context.Background(), "/x"); err != nil || ok {
		t.Fatalf("after the wipe: /x exists=%v err=%v; want a working session on the empty server", ok, err)
	}
	t.Logf("new session after %d redials", c.Redials())
}

func waitFor(t *testing.T, changes <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-changes:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("condition not reached in 30s")
		}
	}
}

func TestValidateRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/all-sequences", true},
		{"/a/b", true},
		{"", false},
		{"/", false},
		{"rel", false},
		{"/a/", false},
		{"/a//b", false},
		{"/a/../b", false},
		{"/zookeeper", false},
		{"/zookeeper/x", false},
		{"/zookeeperish", true},
	} {
		if err := zkclient.ValidateRoot(tc.path); (err == nil) != tc.ok {
			t.Errorf("ValidateRoot(%q) = %v; want ok=%v", tc.path, err, tc.ok)
		}
	}
}

// A watch fired by a write reaches its channel before the write's reply:
// the sequence client's cache relies on it to tell its own writes from
// others'. Checked for every kind of watch, many times over, because a
// forwarding goroutine would lose the order only now and then.
func TestWatchFiresBeforeTheReplyOfTheWriteThatTriggersIt(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := testenv.Connect(t, z.Servers, 10*time.Second)
	ctx := context.Background()
	for i := range 200 {
		p := z.Path(fmt.Sprint("n", i))
		_, _, created, err := c.Session().ExistsW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Session().Create(ctx, p, nil, 0); err != nil {
			t.Fatal(err)
		}
		_, _, children, err := c.Session().ChildrenW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, data, err := c.Session().GetW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		mustHave(t, created, zkclient.EventNodeCreated)
		if _, err := c.Session().Create(ctx, p+"/c", nil, 0); err != nil {
			t.Fatal(err)
		}
		mustHave(t, children, zkclient.EventNodeChildrenChanged)
		if _, err := c.Session().Set(ctx, p, []byte("x"), zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
		mustHave(t, data, zkclient.EventNodeDataChanged)
	}
	// A watch lost with its connection ends with EventNotWatching.
	_, _, w, err := c.Session().GetW(ctx, z.Path("n0"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case ev := <-w:
		if ev.Type != zkclient.EventNotWatching {
			t.Fatalf("after Close: %v; want EventNotWatching", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end when its client closed")
	}
	if _, _, err := c.Session().Get(ctx, z.Path("n0")); !errors.Is(err, zkclient.ErrClosed) || zkclient.IsTransient(err) {
		t.Fatalf("Get after Close = %v; want ErrClosed, not transient", err)
	}
}

func mustHave(t *testing.T, ch <-chan zkclient.Event, want zkclient.EventType) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok || ev.Type != want {
			t.Fatalf("watch event = %v (open %v); want %v", ev.Type, ok, want)
		}
	default:
		t.Fatalf("watch not fired when the write that triggers it returned; want %v", want)
	}
}

// A watch set without a channel (GetQ, ChildrenQ, ExistsQ) is re-set after
// a reconnect like any other, and its notifications reach the NodeEvents
// queues: the server is stopped and started again within the session
// timeout, and changes made after that are still reported, once each.
func TestQueueWatchesSurviveAReconnect(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, p := range []string{"/q", "/q/data", "/q/kids"} {
		if _, err := c.Session().Create(ctx, p, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	q, stop := c.NodeEvents("/q")
	defer stop()
	s := c.Session()
	if _, _, err := s.GetQ(ctx, "/q/data"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ChildrenQ(ctx, "/q/kids"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.ExistsQ(ctx, "/q/later"); err != nil || ok {
		t.Fatalf("exists /q/later = %v, %v", ok, err)
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
	q.Drain() // whatever the disconnect reported

	for range 2 { // the second round must report nothing: watches are one-shot
		if _, err := c.Session().Set(ctx, "/q/data", []byte("x"), zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Session().Create(ctx, fmt.Sprintf("/q/kids/k%d", time.Now().UnixNano()), nil, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Session().Create(ctx, "/q/later", nil, 0); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	// A write's reply comes after the notifications it triggered, so one
	// more round trip makes sure every notification has arrived.
	if _, _, err := c.Session().Get(ctx, "/q"); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, ev := range q.Drain() {
		got[fmt.Sprint(ev.Type, " ", ev.Path)]++
	}
	want := map[string]int{
		fmt.Sprint(zkclient.EventNodeDataChanged, " /q/data"):     1,
		fmt.Sprint(zkclient.EventNodeChildrenChanged, " /q/kids"): 1,
		fmt.Sprint(zkclient.EventNodeCreated, " /q/later"):        1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notifications after the reconnect: %v; want %v", got, want)
	}
}

// Server names that do not resolve are waited for, up to ConnectTimeout,
// like servers that do not answer (a ZooKeeper starting beside its
// clients has no DNS name yet), and the error then says so.
func TestDialWaitsForNamesToResolve(t *testing.T) {
	t.Parallel()
	_, err := zkclient.Dial(context.Background(), []string{"zoo-not-yet.invalid:2181"}, zkclient.Options{ConnectTimeout: time.Second})
	if !errors.Is(err, zkclient.ErrNoSession) || !strings.Contains(err.Error(), "does DNS serve them yet") {
		t.Fatalf("Dial with an unresolvable name: %v; want ErrNoSession after the connect timeout, naming DNS", err)
	}
	// One name that resolves is enough.
	z := testenv.ZooKeeper(t)
	c, err := zkclient.Dial(context.Background(), append([]string{"zoo-not-yet.invalid:2181"}, z.Servers...), zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A server that accepts connections but never answers the handshake (a
// frozen JVM, a black hole) gives way to the next server within its share
// of the session timeout. Each Dial tries the servers in a random order,
// so six of them meet the silent one first about 63 times in 64.
func TestDialPassesASilentServer(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	silent := testenv.NewProxy(t, z.Servers[0])
	silent.Cut()
	for i := 0; i < 6; i++ {
		c, err := zkclient.Dial(context.Background(), []string{silent.Addr(), z.Servers[0]},
			zkclient.Options{SessionTimeout: 6 * time.Second, ConnectTimeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("dial %d: %v; want a session from the server that answers", i, err)
		}
		c.Close()
	}
}

// MultiRead answers each path with its own result (a missing znode is
// ErrNoNode in its place), and a persistent watch (AddWatch) notifies every
// change, not only the first, the znode's deletion and its creation again
// included, through the NodeEvents queues.
func TestMultiReadAndPersistentWatches(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	root := z.Root + "/multiread"
	if err := c.EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{"one", "two"} {
		if _, err := c.Session().Create(ctx, fmt.Sprintf("%s/n%d", root, i), []byte(data), 0); err != nil {
			t.Fatal(err)
		}
	}
	reads, err := c.Session().MultiRead(ctx, root+"/n0", root+"/missing", root+"/n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 3 || string(reads[0].Data) != "one" || reads[0].Err != nil || reads[0].Stat == nil ||
		!errors.Is(reads[1].Err, zkclient.ErrNoNode) || string(reads[2].Data) != "two" || reads[2].Err != nil {
		t.Fatalf("MultiRead: %+v", reads)
	}

	q, stop := c.NodeEvents(root)
	defer stop()
	path := root + "/n0"
	for range 2 { // a second AddWatch is harmless: still one notification per change
		if err := c.Session().AddWatch(ctx, path, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := c.Session().Set(ctx, path, []byte{byte(i)}, zkclient.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Session().Delete(ctx, path, zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session().Create(ctx, path, nil, 0); err != nil {
		t.Fatal(err)
	}
	// A write's reply comes after the notifications it triggered.
	if _, _, err := c.Session().Get(ctx, root); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range q.Drain() {
		got = append(got, fmt.Sprint(ev.Type, " ", ev.Path))
	}
	want := []string{
		fmt.Sprint(zkclient.EventNodeDataChanged, " ", path),
		fmt.Sprint(zkclient.EventNodeDataChanged, " ", path),
		fmt.Sprint(zkclient.EventNodeDataChanged, " ", path),
		fmt.Sprint(zkclient.EventNodeDeleted, " ", path),
		fmt.Sprint(zkclient.EventNodeCreated, " ", path),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("notifications: %v; want %v", got, want)
	}
}
