package seqzk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The duplicate an idempotency key prevents: a push lands, its reply is
// lost, another worker takes the recycled IDs, and the push is retried. The
// retry must change nothing; a plain Push would recycle the IDs again and
// the next take would hand them out a second time.
func TestPushOnceAppliesOnceEvenAfterTheIDsWereTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(seqzk.Options{})
	e.create(c, "s", seqzk.Registration{}, 1000)
	if got, err := c.Take(ctx, "s", 10); err != nil || got.String() != "1:10" {
		t.Fatalf("take = %s, %v; want 1:10", got, err)
	}
	const key = "0b6f7e2c-1d2a-4c3b-9e8f-123456789abc"
	already, err := c.PushOnce(ctx, "s", key, ranges([2]int64{3, 5}))
	if err != nil || already {
		t.Fatalf("first PushOnce = %v, %v; want applied now", already, err)
	}
	worker := e.client(seqzk.Options{})
	if got, err := worker.Take(ctx, "s", 3); err != nil || got.String() != "3:5" {
		t.Fatalf("worker take = %s, %v; want the recycled 3:5", got, err)
	}
	conn := e.session(10 * time.Second)
	before := e.zkData(conn, "s")

	// The retry, from the same client and from another one (another
	// replica): already applied, nothing written.
	for i, retrier := range []*seqzk.Client{c, e.client(seqzk.Options{})} {
		already, err := retrier.PushOnce(ctx, "s", key, ranges([2]int64{3, 5}))
		if err != nil || !already {
			t.Fatalf("retry %d = %v, %v; want already applied", i, already, err)
		}
		if after := e.zkData(conn, "s"); string(after) != string(before) {
			t.Fatalf("retry %d changed the state:\n%s\nbecame\n%s", i, before, after)
		}
	}
	st, _, err := c.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasPushKey(key) || len(st.Pushed) != 1 {
		t.Errorf("keys %v, want only %s", st.Pushed, key)
	}

	// Bad input changes nothing.
	for _, bad := range []string{"", "has space", "a/b", strings.Repeat("k", state.MaxPushKeyLen+1)} {
		if _, err := c.PushOnce(ctx, "s", bad, ranges([2]int64{6, 6})); !errors.Is(err, state.ErrInvalidPushKey) {
			t.Errorf("PushOnce with key %q: err = %v; want ErrInvalidPushKey", bad, err)
		}
	}
	if _, err := c.PushOnce(ctx, "s", "k2", ranges([2]int64{50, 60})); !errors.Is(err, state.ErrBadPush) {
		t.Errorf("PushOnce of IDs never issued: err = %v; want ErrBadPush", err)
	}
	if after := e.zkData(conn, "s"); string(after) != string(before) {
		t.Errorf("refused keyed pushes changed the state:\n%s\nbecame\n%s", before, after)
	}
	// The IDs the worker holds are not handed out again.
	if got, err := e.client(seqzk.Options{}).Take(ctx, "s", 3); err != nil || got.String() != "11:13" {
		t.Fatalf("next take = %s, %v; want fresh 11:13, not the worker's 3:5 again", got, err)
	}
}

// More than MaxPushKeys keyed pushes drop the oldest key; its retry is then
// pushed again, and refused by the overlap check while its IDs are still
// recycled.
func TestPushOnceKeyCapEvictsTheOldest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(seqzk.Options{})
	e.create(c, "s", seqzk.Registration{}, 1000)
	if _, err := c.Take(ctx, "s", 200); err != nil {
		t.Fatal(err)
	}
	push := func(i int) (bool, error) {
		id := int64(2*i + 1) // odd IDs: the recycled ranges do not coalesce
		return c.PushOnce(ctx, "s", fmt.Sprintf("key-%d", i), ranges([2]int64{id, id}))
	}
	for i := range state.MaxPushKeys + 1 {
		if already, err := push(i); err != nil || already {
			t.Fatalf("push %d = %v, %v", i, already, err)
		}
	}
	st, _, err := c.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pushed) != state.MaxPushKeys || st.Pushed[0] != "key-1" || st.HasPushKey("key-0") {
		t.Fatalf("%d keys from %q; want %d from key-1", len(st.Pushed), st.Pushed[0], state.MaxPushKeys)
	}
	for _, i := range []int{1, state.MaxPushKeys / 2, state.MaxPushKeys} {
		if already, err := push(i); err != nil || !already {
			t.Errorf("retry of key-%d = %v, %v; want already applied", i, already, err)
		}
	}
	if _, err := push(0); !errors.Is(err, state.ErrBadPush) {
		t.Errorf("retry of the evicted key-0 = %v; want ErrBadPush (ID 1 is still recycled)", err)
	}
}

// The keys outlive what revalidation and rotation drop: after a
// fast-forward dropped the recycled list, and after the znode was rotated,
// a retry is still answered "already applied".
func TestPushOnceKeysSurviveRevalidationAndRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(seqzk.Options{})
	e.create(admin, "s", seqzk.Registration{}, 1000)
	c := e.client(seqzk.Options{})
	if _, err := c.Take(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	if already, err := c.PushOnce(ctx, "s", "k", ranges([2]int64{3, 5})); err != nil || already {
		t.Fatalf("PushOnce = %v, %v", already, err)
	}
	check := func(what string) {
		t.Helper()
		for i, cl := range []*seqzk.Client{c, e.client(seqzk.Options{})} {
			already, err := cl.PushOnce(ctx, "s", "k", ranges([2]int64{3, 5}))
			if err != nil || !already {
				t.Fatalf("after %s, retry %d = %v, %v; want already applied", what, i, already, err)
			}
		}
		st, _, err := admin.Describe(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if st.Recycled.Contains(3) {
			t.Fatalf("after %s the retry recycled 3:5: %s", what, st.Recycled)
		}
	}
	st, err := admin.Keeper().Restamp(ctx, "s", 0, 0, 2000, true)
	if err != nil || len(st.Recycled) != 0 || !st.HasPushKey("k") {
		t.Fatalf("fast-forward = %+v, %v; want recycled dropped and the key kept", st, err)
	}
	check("a fast-forward")
	if st, _, err = admin.Keeper().Rotate(ctx, "s"); err != nil || !st.HasPushKey("k") {
		t.Fatalf("rotate = %+v, %v; want the key kept", st, err)
	}
	check("a rotation")
	// A keyed push of IDs handed out before the fast-forward is refused
	// (it could be the retry of a push whose record a rollback lost); one
	// of IDs taken since is applied.
	if _, err := c.PushOnce(ctx, "s", "k2", ranges([2]int64{7, 7})); !errors.Is(err, state.ErrBadPush) {
		t.Fatalf("a new key for an ID below the push floor = %v; want ErrBadPush", err)
	}
	got, err := c.Take(ctx, "s", 3)
	if err != nil {
		t.Fatal(err)
	}
	if already, err := c.PushOnce(ctx, "s", "k3", got); err != nil || already {
		t.Fatalf("a new key for IDs taken after the fast-forward = %v, %v", already, err)
	}
}

// Review follow-up: a keyed push applied, and its IDs handed out again,
// in a history that a ZooKeeper restore then threw away, is retried after
// the restore: the key is gone with the lost history, so the retry must
// not be applied (its IDs were handed out again in the lost history).
// The primary's stamp sets a push floor at next, below which a keyed push
// with an unknown key is refused.
func TestKeyedRetryAfterARollbackIsRefused(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	const root = "/all-sequences"
	dial := func() *seqzk.Client { return dialClient(t, ens.Servers(), root, 4*time.Second) }
	admin := dial()
	if err := admin.ZK().EnsurePath(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Keeper().Revalidate(ctx, "s", 0, 1000); err != nil {
		t.Fatal(err)
	}
	saved := ens.Snapshot(t, 0)
	// The lost history: revalidated; a sidecar takes IDs and pushes them
	// back with a key; another worker takes them from the recycled list.
	lost := dial()
	if _, err := lost.Keeper().Revalidate(ctx, "s", 1001, 2000); err != nil {
		t.Fatal(err)
	}
	held, err := lost.Take(ctx, "s", 10)
	if err != nil {
		t.Fatal(err)
	}
	if already, err := lost.PushOnce(ctx, "s", "retry-me", held); err != nil || already {
		t.Fatalf("keyed push in the lost history = %v, %v", already, err)
	}
	if got, err := lost.Take(ctx, "s", 10); err != nil || got.String() != held.String() {
		t.Fatalf("take of the recycled IDs = %s, %v; want %s", got, err, held)
	}
	ens.Rollback(t, 0, saved)
	now := dial()
	if _, err := now.Keeper().Revalidate(ctx, "s", 2001, 3000); err != nil {
		t.Fatal(err)
	}
	already, err := now.PushOnce(ctx, "s", "retry-me", held)
	if !errors.Is(err, state.ErrBadPush) {
		t.Fatalf("keyed retry after the rollback = %v, %v; want ErrBadPush", already, err)
	}
	st, _, err := now.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Recycled) != 0 {
		t.Fatalf("recycled %s after a refused retry", st.Recycled)
	}
}

// lossyClient returns a sequence client whose ZooKeeper traffic goes through
// a proxy the test controls.
func lossyClient(t *testing.T, e *env) (*seqzk.Client, *testenv.Proxy) {
	t.Helper()
	proxy := testenv.NewProxy(t, e.servers[0])
	zc, err := zkclient.Dial(context.Background(), []string{proxy.Addr()}, zkclient.Options{SessionTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

// A write that lands but whose reply is lost: Push gives up with
// ErrUncertain, PushOnce retries, finds its key and reports the push
// applied, once.
func TestPushOnceRetriesAfterALostReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(seqzk.Options{})
	e.create(admin, "s", seqzk.Registration{}, 1000)
	x, proxy := lossyClient(t, e)
	if got, err := x.Take(ctx, "s", 20); err != nil || got.String() != "1:20" {
		t.Fatalf("take = %s, %v", got, err)
	}
	// loseReply runs op with replies held, waits until its write landed,
	// then cuts the connection, so op sees the connection lost.
	loseReply := func(op func() error, landed func(state.State) bool) error {
		t.Helper()
		proxy.PauseReplies()
		done := make(chan error, 1)
		go func() { done <- op() }()
		waitUntil(t, func() bool {
			st, _, err := admin.Describe(ctx, "s")
			return err == nil && landed(st)
		})
		proxy.Cut()
		proxy.Resume()
		time.Sleep(50 * time.Millisecond)
		proxy.Heal()
		return <-done
	}

	err := loseReply(func() error { return x.Push(ctx, "s", ranges([2]int64{3, 4})) },
		func(st state.State) bool { return st.Recycled.Contains(3) })
	if !errors.Is(err, seqzk.ErrUncertain) {
		t.Fatalf("plain push with its reply lost: err = %v; want ErrUncertain", err)
	}

	// A take reads the state afresh after the reconnect, so the keyed push
	// below is one write and the held replies cannot stall a read first.
	if got, err := x.Take(ctx, "s", 1); err != nil || got.String() != "3" {
		t.Fatalf("take = %s, %v; want the recycled 3", got, err)
	}
	var already bool
	retries := x.Stats().Retries
	err = loseReply(func() error {
		var err error
		already, err = x.PushOnce(ctx, "s", "lost-reply", ranges([2]int64{7, 9}))
		return err
	}, func(st state.State) bool { return st.HasPushKey("lost-reply") })
	if err != nil || already {
		t.Fatalf("keyed push with its reply lost = %v, %v; want applied by this call", already, err)
	}
	if x.Stats().Retries == retries {
		t.Error("the keyed push did not retry")
	}
	st, _, err := admin.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if st.Recycled.String() != "4 7:9" || len(st.Pushed) != 1 {
		t.Fatalf("recycled %s keys %v; want 4 7:9 (7:9 once) and the one key", st.Recycled, st.Pushed)
	}
}

// A write lost on the way, then the primary revalidates the sequence (a new
// marker) before the retry: a missing key no longer proves the write did
// not land (a ZooKeeper rollback could have lost it after another worker
// took its IDs), so PushOnce stops with ErrUncertain instead of pushing.
func TestPushOnceStopsWhenTheStateWasRevalidatedAfterALostWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(seqzk.Options{})
	e.create(admin, "s", seqzk.Registration{}, 1000)
	x, proxy := lossyClient(t, e)
	if _, err := x.Take(ctx, "s", 20); err != nil {
		t.Fatal(err)
	}
	before, _, err := admin.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Pause() // the write goes nowhere
	done := make(chan error, 1)
	go func() {
		_, err := x.PushOnce(ctx, "s", "k", ranges([2]int64{3, 4}))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	proxy.Cut() // drops what it held: the write is lost
	proxy.Resume()
	if _, err := admin.Keeper().Restamp(ctx, "s", 0, 0, 2000, true); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	err = <-done
	if !errors.Is(err, seqzk.ErrUncertain) {
		t.Fatalf("PushOnce across a revalidation after a lost write: err = %v; want ErrUncertain", err)
	}
	st, _, err := admin.Describe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if st.HasPushKey("k") || len(st.Recycled) != 0 || st.Marker == before.Marker {
		t.Fatalf("state %+v: want the new marker, no key, nothing recycled", st)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A push of IDs another client took after this one last read the sequence
// is accepted: this client's cached state is behind (it is kept across
// other clients' writes), so a refusal is decided on a fresh read only.
// Found by the HTTP client's failover test: a replica refused to take back
// IDs another replica had handed out ("never issued").
func TestPushIsNotRefusedOnAStaleCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(seqzk.Options{})
	e.create(c, "s", seqzk.Registration{}, 1000)
	if _, err := c.Take(ctx, "s", 10); err != nil { // c caches next 11
		t.Fatal(err)
	}
	other := e.client(seqzk.Options{})
	got, err := other.Take(ctx, "s", 100)
	if err != nil || got.String() != "11:110" {
		t.Fatalf("other take = %s, %v", got, err)
	}
	if err := c.Push(ctx, "s", ranges([2]int64{50, 60})); err != nil {
		t.Fatalf("push of IDs another client took: %v", err)
	}
	if already, err := c.PushOnce(ctx, "s", "k1", ranges([2]int64{70, 80})); err != nil || already {
		t.Fatalf("keyed push of IDs another client took: %v, %v", already, err)
	}
	// A push of IDs nobody was handed out is still refused.
	if err := c.Push(ctx, "s", ranges([2]int64{500, 510})); err == nil || !strings.Contains(err.Error(), "never issued") {
		t.Fatalf("push of IDs never issued: %v", err)
	}
}
