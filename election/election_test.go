package election

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	client, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ok := Config{Client: client, Path: z.Root + "/election", Identity: Identity{ID: "a"}}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" for success
	}{
		{"valid", func(*Config) {}, ""},
		{"no client", func(c *Config) { c.Client = nil }, "Client"},
		{"relative path", func(c *Config) { c.Path = "election" }, "Path"},
		{"trailing slash", func(c *Config) { c.Path += "/" }, "Path"},
		{"no id", func(c *Config) { c.Identity.ID = "" }, "Identity.ID"},
		{"negative fraction", func(c *Config) { c.LossFraction = -0.1 }, "LossFraction"},
		{"fraction too large", func(c *Config) { c.LossFraction = 0.81 }, "LossFraction"},
		{"NaN fraction", func(c *Config) { c.LossFraction = math.NaN() }, "LossFraction"},
		{"max fraction", func(c *Config) { c.LossFraction = MaxLossFraction }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mutate(&cfg)
			e, err := New(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want == "" && e == nil:
				t.Fatal("New returned nil without error")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New err = %v; want one naming %s", err, tc.want)
			case tc.want != "" && e != nil:
				t.Fatal("New returned an Election with an error")
			}
		})
	}
	e, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Second; e.lossAfter != want {
		t.Errorf("default lossAfter = %s; want %s (half the session timeout)", e.lossAfter, want)
	}
}

func TestQueueOrderIsBySequenceNotName(t *testing.T) {
	t.Parallel()
	got := sortedCandidates([]string{
		"_c_ffff-n_0000000002",
		"_c_0000-n_0000000010",
		"epoch",             // not a candidate
		"_c_x",              // truncated
		"_c_abc-n_notanumb", // bad sequence
		"_c_a-n_b-n_0000000001",
	})
	var names []string
	for _, e := range got {
		names = append(names, e.name)
	}
	want := []string{"_c_a-n_b-n_0000000001", "_c_ffff-n_0000000002", "_c_0000-n_0000000010"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("queue = %v; want %v", names, want)
	}
	if got[0].guid != "a-n_b" || got[0].seq != 1 {
		t.Fatalf("parsed %+v; want guid a-n_b seq 1", got[0])
	}
}

func TestParseEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true},
		{"7", 7, true},
		{" 42\n", 42, true},
		{"-1", 0, false},
		{"x", 0, false},
		{"9223372036854775808", 0, false},
	} {
		got, err := parseEpoch([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseEpoch(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// One replica leads, publishes its identity, takes epoch 1, and on
// shutdown deletes its node so that nobody is left waiting.
func TestSingleReplicaLeadsAndLeavesCleanly(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	a := c.add("a")
	rec := c.waitTerm(0, 10*time.Second)
	if rec.term.Epoch != 1 || rec.term.SessionID != a.client.SessionID() || !strings.HasPrefix(rec.term.Node, c.path+"/_c_") {
		t.Fatalf("term = %+v; want epoch 1, session 0x%x, node under %s", rec.term, a.client.SessionID(), c.path)
	}
	if !a.e.IsLeader() {
		t.Fatal("IsLeader false while leading")
	}
	ctx := t.Context()
	data, _, err := a.client.Session().Get(ctx, rec.term.Node)
	if err != nil {
		t.Fatal(err)
	}
	var id Identity
	if err := json.Unmarshal(data, &id); err != nil || id != (Identity{ID: "a", Address: "a:8080", Version: "test"}) {
		t.Fatalf("node data %s (%v); want a's identity", data, err)
	}
	if got, err := a.e.Leader(context.Background()); err != nil || got.ID != "a" {
		t.Fatalf("Leader = %+v, %v; want a", got, err)
	}
	if epoch, _, err := a.client.Session().Get(ctx, c.path+"-epoch"); err != nil || string(epoch) != "1" {
		t.Fatalf("epoch node = %q, %v; want 1", epoch, err)
	}
	if err := a.e.Run(context.Background(), func(context.Context, Term) {}); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v; want ErrRunning", err)
	}

	a.stop()
	if a.runErr != nil {
		t.Fatalf("Run = %v; want nil after cancel", a.runErr)
	}
	if a.e.IsLeader() {
		t.Fatal("IsLeader true after Run returned")
	}
	if ok, _, err := a.client.Session().Exists(ctx, rec.term.Node); err != nil || ok {
		t.Fatalf("candidate node still exists after Run returned (err %v)", err)
	}
	if _, err := a.e.Leader(context.Background()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after shutdown = %v; want ErrNoLeader", err)
	}
	if s := a.e.Stats(); s.Candidacies != 1 || s.Terms != 1 || s.Losses != 0 {
		t.Fatalf("stats = %+v; want 1 candidacy, 1 term, no loss", s)
	}
}

func TestResignWhenNotLeading(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	a := c.add("a")
	c.waitTerm(0, 10*time.Second)
	b := c.add("b")
	eventually(t, 10*time.Second, "b to join", func() bool { return b.e.Stats().Candidacies == 1 })
	if err := b.e.Resign(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Resign on a candidate = %v; want ErrNotLeader", err)
	}
	idle := c.newReplica("idle", Config{})
	if err := idle.e.Resign(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Resign without Run = %v; want ErrNotLeader", err)
	}
	if c.current().replica != a {
		t.Fatal("leadership moved")
	}
}

// Resign hands over at once and the resigner queues up again.
func TestResignHandsOverAndRejoins(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	a := c.add("a")
	first := c.waitTerm(0, 10*time.Second)
	b := c.add("b")
	eventually(t, 10*time.Second, "b to join", func() bool { return b.e.Stats().Candidacies == 1 })

	start := time.Now()
	if err := a.e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.e.IsLeader() {
		t.Fatal("IsLeader true after Resign returned")
	}
	if ok, _, _ := a.client.Session().Exists(t.Context(), first.term.Node); ok {
		t.Fatal("old node still exists after Resign returned")
	}
	second := c.waitTerm(1, 5*time.Second)
	if second.replica != b {
		t.Fatalf("term 2 went to %s; want b", second.replica.name)
	}
	if cause := c.snapshot(first).cause; !errors.Is(cause, ErrResigned) {
		t.Fatalf("cause of a's term end = %v; want ErrResigned", cause)
	}
	t.Logf("handover on Resign: %s", second.start.Sub(start))
	eventually(t, 10*time.Second, "a to rejoin", func() bool { return a.e.Stats().Candidacies == 2 })
	if s := a.e.Stats(); s.Resignations != 1 {
		t.Fatalf("a stats = %+v; want 1 resignation", s)
	}
}

// A lead function that returns on its own gives leadership up.
func TestLeadReturningResigns(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	quitter := c.newReplica("quitter", Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	calls := 0
	go func() {
		defer close(done)
		_ = quitter.e.Run(ctx, func(context.Context, Term) {
			calls++
			if calls > 1 {
				// Second time round: stay until cancelled.
				<-ctx.Done()
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 10*time.Second, "two terms", func() bool { return quitter.e.Stats().Terms >= 2 })
	if s := quitter.e.Stats(); s.Resignations < 1 || s.Candidacies < 2 {
		t.Fatalf("stats = %+v; want a resignation and a second candidacy", s)
	}
}

// Observe reports each new primary once, and the zero Identity when there
// is none; Leader agrees.
func TestObserveFollowsTheLeader(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	watcher := c.newReplica("watcher", Config{}) // never runs: a status page
	ctx, cancel := context.WithCancel(context.Background())
	ch := watcher.e.Observe(ctx)
	expect := func(want string) {
		t.Helper()
		select {
		case id, ok := <-ch:
			if !ok || id.ID != want {
				t.Fatalf("Observe gave %+v (open %v); want %q", id, ok, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Observe gave nothing in 10s; want %q", want)
		}
		got, err := watcher.e.Leader(context.Background())
		if want == "" && !errors.Is(err, ErrNoLeader) || want != "" && got.ID != want {
			t.Fatalf("Leader = %+v, %v; want %q", got, err, want)
		}
	}
	expect("")
	a := c.add("a")
	expect("a")
	c.waitTerm(0, 10*time.Second)
	b := c.add("b")
	eventually(t, 10*time.Second, "b to join", func() bool { return b.e.Stats().Candidacies == 1 })
	if err := a.e.Resign(context.Background()); err != nil { // queue: b, a
		t.Fatal(err)
	}
	expect("b")
	eventually(t, 10*time.Second, "a to rejoin", func() bool { return a.e.Stats().Candidacies == 2 })
	b.stop()
	expect("a")
	a.stop()
	expect("")
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("Observe sent after cancel; want closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe channel not closed after cancel")
	}
}

// A candidate whose create reply was lost finds the node it made instead of
// making a second one. Here the "lost" create is made by hand, in the
// replica's own session, under the GUID its next candidacy will use.
func TestJoinAdoptsNodeFromLostCreate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	a := c.newReplica("a", Config{})
	ctx := t.Context()
	if err := a.client.EnsurePath(ctx, c.path); err != nil {
		t.Fatal(err)
	}
	const guid = "8f0e7c52-3c4e-4f0e-9b8e-0123456789ab"
	orphan, err := a.client.Session().Create(ctx, c.path+"/"+nodePrefix+guid+seqMarker, a.e.data, zkclient.Ephemeral|zkclient.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	a.e.newGUID = func() string { return guid }
	a.start()
	rec := c.waitTerm(0, 10*time.Second)
	if rec.term.Node != orphan {
		t.Fatalf("leads with %s; want the adopted node %s", rec.term.Node, orphan)
	}
	children, _, err := a.client.Session().Children(ctx, c.path)
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v; want only the adopted node", children, err)
	}
}

// The real thing: the create reaches the server and takes effect, its reply
// is lost with the connection, and the same session comes back.
func TestCreateWithLostReplyLeavesOneNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{proxied: true, timeout: 4 * time.Second})
	a := c.newReplica("a", Config{})
	observer := testenv.Connect(t, c.servers, 10*time.Second)
	const guid = "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed"
	a.e.newGUID = func() string { return guid }
	var created string
	cut := make(chan struct{})
	hooked := false
	a.e.beforeCreate = func() {
		if hooked {
			return
		}
		hooked = true
		a.proxy.PauseReplies()
		go func() {
			defer close(cut)
			deadline := time.Now().Add(10 * time.Second)
			for created == "" && time.Now().Before(deadline) {
				children, _, _ := observer.Session().Children(context.Background(), c.path)
				for _, name := range children {
					if e, ok := parseNode(name); ok && e.guid == guid {
						created = c.path + "/" + name
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			a.proxy.Cut() // the reply is still held: it is lost
			a.proxy.Heal()
			a.proxy.Resume()
		}()
	}
	session := a.client.SessionID()
	a.start()
	<-cut
	if created == "" {
		t.Fatal("the create never reached the server")
	}
	rec := c.waitTerm(0, 15*time.Second)
	if rec.term.Node != created || a.client.SessionID() != session {
		t.Fatalf("leads with %s in session 0x%x; want the first node %s in session 0x%x", rec.term.Node, a.client.SessionID(), created, session)
	}
	children, _, err := observer.Session().Children(t.Context(), c.path)
	if err != nil || len(children) != 1 {
		t.Fatalf("children = %v, %v; want exactly one node", children, err)
	}
	if s := a.e.Stats(); s.Candidacies != 1 {
		t.Fatalf("stats = %+v; want one candidacy", s)
	}
}

// When a non-leader dies, only the candidate queued right behind it is
// woken; the leader and the others sleep through it.
func TestNoHerdWhenACandidateDies(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	five(t, c)
	observer := testenv.Connect(t, c.servers, 10*time.Second)
	queue := c.queue(observer)
	if len(queue) != 5 {
		t.Fatalf("queue has %d candidates; want 5", len(queue))
	}
	time.Sleep(200 * time.Millisecond) // let any stray wake-up land before the baseline
	before := make([]int64, 5)
	for i, r := range queue {
		before[i] = r.e.wakeups.Load()
	}
	victim, successor := queue[2], queue[3]
	victim.client.Close() // a crash: the session ends, the node goes
	eventually(t, 10*time.Second, "the successor to wake", func() bool { return successor.e.wakeups.Load() > before[3] })
	time.Sleep(500 * time.Millisecond) // time for any herd to show
	for i, r := range queue {
		got := r.e.wakeups.Load() - before[i]
		switch {
		case r == victim:
		case r == successor && got != 1:
			t.Errorf("successor %s woke %d times; want 1", r.name, got)
		case r != successor && got != 0:
			t.Errorf("%s (position %d) woke %d times; want 0", r.name, i, got)
		}
	}
	if c.termCount() != 1 {
		t.Fatalf("%d terms; the leader should not have changed", c.termCount())
	}
	victim.cancel()
	if after := c.queue(observer); len(after) != 4 || after[2] != successor {
		t.Fatalf("queue after the death: %d candidates, third %v; want 4 with %s third", len(after), after, successor.name)
	}
}

// The epoch lives outside the candidate directory: it carries on from what
// is stored, and a corrupt value stops the election (loudly) instead of
// restarting the fencing token.
func TestEpochContinuesAndRefusesCorruption(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	ctx := t.Context()
	operator := testenv.Connect(t, c.servers, 10*time.Second)
	if err := operator.EnsurePath(ctx, c.path+"-epoch"); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Session().Set(ctx, c.path+"-epoch", []byte("not a number"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	a := c.add("a")
	time.Sleep(500 * time.Millisecond)
	if c.termCount() != 0 || a.e.IsLeader() {
		t.Fatal("a replica led with a corrupt epoch")
	}
	if _, err := operator.Session().Set(ctx, c.path+"-epoch", []byte("41"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if rec := c.waitTerm(0, 10*time.Second); rec.term.Epoch != 42 {
		t.Fatalf("epoch = %d; want 42, one above the stored 41", rec.term.Epoch)
	}
}

// Deleting the leader's node by hand (an operator in zkCli) ends its term at
// once; it queues up again.
func TestLeaderNodeDeletedByHand(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{timeout: 10 * time.Second})
	a := c.add("a")
	first := c.waitTerm(0, 10*time.Second)
	b := c.add("b")
	eventually(t, 10*time.Second, "b to join", func() bool { return b.e.Stats().Candidacies == 1 })
	operator := testenv.Connect(t, c.servers, 10*time.Second)
	if err := operator.Session().Delete(t.Context(), first.term.Node, zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	second := c.waitTerm(1, 2*time.Second) // far below the session timeout
	if second.replica != b {
		t.Fatalf("successor = %s; want b", second.replica.name)
	}
	if cause := c.snapshot(first).cause; !errors.Is(cause, ErrNodeLost) {
		t.Fatalf("cause = %v; want ErrNodeLost", cause)
	}
	eventually(t, 10*time.Second, "a to rejoin", func() bool { return a.e.Stats().Candidacies == 2 })
	if s := a.e.Stats(); s.Losses != 1 {
		t.Fatalf("a stats = %+v; want one loss", s)
	}
}

// Two replicas started with the same ID (the default host name of two on
// one machine) are warned about it, naming the other's address; distinct
// IDs are not.
func TestSharedIDIsWarnedAbout(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	path := z.Root + "/election"
	start := func(id, addr string) *testenv.Buffer {
		t.Helper()
		client, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{SessionTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(client.Close)
		var buf testenv.Buffer
		e, err := New(Config{Client: client, Path: path, Identity: Identity{ID: id, Address: addr}, Logger: zerolog.New(&buf)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx, func(ctx context.Context, _ Term) { <-ctx.Done() }) }()
		t.Cleanup(func() { cancel(); <-done })
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(buf.String(), "joined as candidate") {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not join: %s", addr, buf.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return &buf
	}
	start("host-a", "10.0.0.1:7070")
	other := start("host-b", "10.0.0.2:7070")
	same := start("host-a", "10.0.0.3:7070")
	if !strings.Contains(same.String(), `another replica uses the id \"host-a\" too (at 10.0.0.1:7070)`) {
		t.Errorf("the replica sharing host-a was not warned:\n%s", same.String())
	}
	if strings.Contains(other.String(), "another replica uses") {
		t.Errorf("host-b was warned although its id is its own:\n%s", other.String())
	}
}
