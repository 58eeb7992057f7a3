package seqzk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's sequences root on a real ZooKeeper.
type env struct {
	t       testing.TB
	servers []string
	root    string
}

func newEnv(t testing.TB) *env {
	z := testenv.ZooKeeper(t)
	return &env{t: t, servers: z.Servers, root: z.SequencesRoot(t)}
}

// session opens a ZooKeeper session of its own, closed when the test ends.
func (e *env) session(timeout time.Duration) *zkclient.Client {
	e.t.Helper()
	c, err := zkclient.Dial(context.Background(), e.servers, zkclient.Options{SessionTimeout: timeout})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// client returns a sequence client on a session of its own.
func (e *env) client(opts seqzk.Options) *seqzk.Client {
	e.t.Helper()
	opts.Root = e.root
	c, err := seqzk.NewClient(e.session(10*time.Second), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// create registers name and raises its ceiling, standing in for the primary.
func (e *env) create(c *seqzk.Client, name string, r seqzk.Registration, ceiling int64) {
	e.t.Helper()
	ctx := context.Background()
	if err := c.Register(ctx, name, r); err != nil {
		e.t.Fatal(err)
	}
	if _, err := c.Keeper().Revalidate(ctx, name, 0, ceiling); err != nil {
		e.t.Fatal(err)
	}
}

// raiser keeps the ceiling of name at least reserve ahead of next until the
// test ends, and revalidates it after a ZooKeeper leader election, as the
// primary would; its "store" is the highest ceiling it ever set.
func (e *env) raiser(name string, reserve int64) {
	e.t.Helper()
	e.raiserOn(e.client(seqzk.Options{}), name, reserve)
}

func (e *env) raiserOn(c *seqzk.Client, name string, reserve int64) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var stored int64
		for ctx.Err() == nil {
			st, _, err := c.Describe(ctx, name)
			stored = max(stored, st.Ceiling)
			epoch, eerr := c.Meta().CurrentEpoch(ctx)
			switch {
			case err != nil || eerr != nil:
			case st.ZKEpoch != epoch:
				stored = max(stored+1, st.Next) + reserve
				_, _ = c.Keeper().Revalidate(ctx, name, stored-reserve+1, stored)
			case st.Ceiling-st.Next < reserve/2:
				stored = st.Next + reserve
				_, _ = c.Keeper().Raise(ctx, name, stored)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
}

func (e *env) zkData(conn *zkclient.Client, name string) []byte {
	e.t.Helper()
	data, _, err := conn.Session().Get(context.Background(), e.root+"/"+name)
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

func ranges(rs ...[2]int64) state.Ranges {
	out := make(state.Ranges, len(rs))
	for i, r := range rs {
		out[i] = state.Range{Start: r[0], End: r[1]}
	}
	return out
}

func TestTakeRecyclesOldestHolesFirstAndStopsAtCeiling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{CeilingWait: 300 * time.Millisecond})
	ctx := context.Background()
	e.create(c, "orders", seqzk.Registration{}, 30)

	steps := []struct {
		take int64
		push state.Ranges
		want string
	}{
		{take: 10, want: "1:10"},
		{push: ranges([2]int64{7, 9}, [2]int64{3, 4})},
		{take: 4, want: "3:4 7:8"},
		{take: 4, want: "9 11:13"},
		{take: 100, want: "14:30"}, // fewer than asked: the ceiling is 30
	}
	for i, s := range steps {
		if s.push != nil {
			if err := c.Push(ctx, "orders", s.push); err != nil {
				t.Fatalf("step %d: push %s: %v", i, s.push, err)
			}
			continue
		}
		got, err := c.Take(ctx, "orders", s.take)
		if err != nil {
			t.Fatalf("step %d: take %d: %v", i, s.take, err)
		}
		if got.String() != s.want {
			t.Fatalf("step %d: take %d = %s; want %s", i, s.take, got, s.want)
		}
	}

	// At the ceiling with no primary: a clear, bounded failure.
	start := time.Now()
	_, err := c.Take(ctx, "orders", 1)
	if !errors.Is(err, seqzk.ErrCeilingReached) || !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "30") {
		t.Fatalf("take at the ceiling: err = %v; want ErrCeilingReached naming the sequence and ceiling 30", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("take at the ceiling waited %s; CeilingWait is 300ms", waited)
	}

	// A raise while a take waits releases it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = e.client(seqzk.Options{}).Keeper().Raise(ctx, "orders", 40)
	}()
	c2 := e.client(seqzk.Options{CeilingWait: 10 * time.Second})
	got, err := c2.Take(ctx, "orders", 5)
	if err != nil || got.String() != "31:35" {
		t.Fatalf("take during a raise = %s, %v; want 31:35", got, err)
	}
}

func TestTakeExhaustsTheSpace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "small", seqzk.Registration{Start: 5, End: 9}, 100)
	if got, err := c.Take(ctx, "small", 10); err != nil || got.String() != "5:9" {
		t.Fatalf("take = %s, %v; want 5:9", got, err)
	}
	if _, err := c.Take(ctx, "small", 1); !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("take after the end: err = %v; want ErrExhausted", err)
	}
}

func TestUncontendedTakeIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "rt", seqzk.Registration{}, 1_000_000)
	if _, err := c.Take(ctx, "rt", 1); err != nil { // warms the cache
		t.Fatal(err)
	}
	before := c.Stats().Requests
	const takes = 50
	for i := 0; i < takes; i++ {
		if _, err := c.Take(ctx, "rt", 3); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().Requests - before; got != takes {
		t.Fatalf("%d uncontended takes cost %d requests; want one each", takes, got)
	}
}

func TestUniqueUnderContentionWithRecycling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	setup := e.client(seqzk.Options{})
	e.create(setup, "hot", seqzk.Registration{}, 200)
	e.raiser("hot", 400)

	const workers = 8
	l := testenv.NewLedger()
	// Run until 5000 IDs were handed out (bounded), not for a fixed time:
	// the test checks uniqueness, not speed.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if l.Issued() >= 5000 {
				cancel()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		c := e.client(seqzk.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				got, err := c.Take(ctx, "hot", 1+rng.Int64N(20))
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("worker %d: take: %v", w, err)
					}
					return
				}
				l.Took(w, got)
				if rng.IntN(3) == 0 { // give some back: the first range's head
					r := got[0]
					back := state.Ranges{{Start: r.Start, End: r.Start + rng.Int64N(r.Len())}}
					l.Pushing(back)
					if err := c.Push(ctx, "hot", back); err != nil {
						if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
							l.Lost(back) // cancelled before the write
							return
						}
						t.Errorf("worker %d: push %s: %v", w, back, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	l.Check(t)
	if l.Issued() < 5000 {
		t.Errorf("only %d IDs handed out in 2 minutes; the test did not exercise contention", l.Issued())
	}

	// Every recycled ID not taken again must still be in the recycled list:
	// none lost, none handed out twice.
	st, _, err := setup.Describe(context.Background(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, id := range l.Recycled() {
		if !st.Recycled.Contains(id) {
			t.Errorf("id %d was pushed back but is neither recycled nor reissued", id)
		}
		want++
	}
	if st.Recycled.Count() != want {
		t.Errorf("recycled list holds %d IDs; workers pushed back %d not yet reissued", st.Recycled.Count(), want)
	}
	t.Logf("%d IDs issued by %d workers; %d conflicts seen by one client", l.Issued(), workers, setup.Stats().Conflicts)
}

// The cached-version trap: a znode deleted and created again restarts its
// version, so a write with a version cached from the old incarnation could
// land on the new one. The client must notice and re-read.
func TestRecreatedZnodeIsNotWrittenWithStaleState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "aba", seqzk.Registration{}, 100) // versions 0, 1
	if got, err := c.Take(ctx, "aba", 10); err != nil || got.String() != "1:10" {
		t.Fatalf("take = %s, %v", got, err)
	} // version 2, cached by c

	// Another actor deletes the sequence and re-creates it further on,
	// bringing the new znode to the version c has cached.
	other := e.session(10 * time.Second)
	path := e.root + "/aba"
	if err := testenv.DeleteAll(other, path); err != nil {
		t.Fatal(err)
	}
	fresh := state.State{Start: 1, Next: 5000, Ceiling: 6000, End: state.MaxID, ZKEpoch: c.Epoch(), Marker: "h-00000000000000aa"}
	if _, err := other.Session().Create(context.Background(), path, fresh.Encode(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Session().Create(context.Background(), path+"/"+fresh.Marker, nil, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := other.Session().Set(context.Background(), path, fresh.Encode(), int32(i)); err != nil {
			t.Fatal(err)
		}
	}

	got, err := c.Take(ctx, "aba", 5)
	if err != nil || got.String() != "5000:5004" {
		t.Fatalf("take after re-create = %s, %v; want 5000:5004 from the new znode, not 11:15 from the cache", got, err)
	}
}

func TestConnectionLossMidTakeNeverDuplicates(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	e := &env{t: t, servers: ens.Servers(), root: "/all-sequences"}
	setup := e.session(20 * time.Second)
	if err := setup.EnsurePath(context.Background(), e.root); err != nil {
		t.Fatal(err)
	}
	sc, _ := seqzk.NewClient(setup, seqzk.Options{Root: e.root})
	e.create(sc, "lossy", seqzk.Registration{}, 1000)
	e.raiserOn(sc, "lossy", 1000)

	l := testenv.NewLedger()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		c, err := seqzk.NewClient(e.session(20*time.Second), seqzk.Options{Root: e.root})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				got, err := c.Take(ctx, "lossy", 7)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("worker %d: take: %v", w, err)
					}
					return
				}
				l.Took(w, got)
			}
		}()
	}
	// Crash and restart the server twice under load: writes in flight lose
	// their replies. Sessions survive (the restart is shorter than their
	// timeout), so clients retry.
	for i := 0; i < 2; i++ {
		time.Sleep(500 * time.Millisecond)
		ens.Kill(0)
		time.Sleep(300 * time.Millisecond)
		if err := ens.Start(0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	l.Check(t)

	st, _, err := sc.Describe(context.Background(), "lossy")
	if err != nil {
		t.Fatal(err)
	}
	lost := st.Next - 1 - int64(l.Issued())
	if lost < 0 {
		t.Fatalf("workers got %d IDs but next is only %d", l.Issued(), st.Next)
	}
	t.Logf("%d IDs issued across 2 server crashes, %d lost (replies lost, or skipped when a restart began a new epoch)", l.Issued(), lost)
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	conn := e.session(10 * time.Second)
	e.create(c, "good", seqzk.Registration{}, 100)
	if _, err := c.Take(ctx, "good", 20); err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, "good", ranges([2]int64{5, 6})); err != nil {
		t.Fatal(err)
	}
	before := e.zkData(conn, "good")

	for _, name := range []string{"", "a/b", ".hidden", "-x", strings.Repeat("n", 201), "sp ace"} {
		if _, err := c.Take(ctx, name, 1); !errors.Is(err, seqzk.ErrInvalidName) {
			t.Errorf("take from %q: err = %v; want ErrInvalidName", name, err)
		}
	}
	if _, err := c.Take(ctx, "missing", 1); !errors.Is(err, seqzk.ErrUnknownSequence) {
		t.Errorf("take from a missing sequence: err = %v; want ErrUnknownSequence", err)
	}
	for _, bad := range []state.Ranges{
		ranges([2]int64{21, 22}),               // never issued
		ranges([2]int64{6, 7}),                 // overlaps recycled 5:6
		ranges([2]int64{0, 3}),                 // outside the space
		ranges([2]int64{9, 8}),                 // start after end
		ranges([2]int64{1, 2}, [2]int64{2, 3}), // overlapping each other
	} {
		if err := c.Push(ctx, "good", bad); !errors.Is(err, state.ErrBadPush) {
			t.Errorf("push %v: err = %v; want ErrBadPush", bad, err)
		}
	}
	if after := e.zkData(conn, "good"); string(after) != string(before) {
		t.Errorf("refused pushes changed the state:\n%s\nbecame\n%s", before, after)
	}

	// Corrupt data: an error naming the problem, and the znode untouched.
	corrupt := []byte("seqkeeper-sequence v1\nstart 1\nnext 50\nceiling 10\nend 100\n")
	if _, err := conn.Session().Create(context.Background(), e.root+"/broken", corrupt, 0); err != nil {
		t.Fatal(err)
	}
	_, err := c.Take(ctx, "broken", 1)
	if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), `"broken"`) {
		t.Errorf("take from corrupt data: err = %v; want ErrCorrupt naming the sequence", err)
	}
	if err := c.Push(ctx, "broken", ranges([2]int64{1, 1})); !errors.Is(err, state.ErrCorrupt) {
		t.Errorf("push to corrupt data: err = %v; want ErrCorrupt", err)
	}
	if got := e.zkData(conn, "broken"); string(got) != string(corrupt) {
		t.Errorf("corrupt znode was changed to %q", got)
	}
}

func TestLegacyCounterIsIncrementedInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	conn := e.session(10 * time.Second)
	counter := make([]byte, 8)
	binary.BigEndian.PutUint64(counter, 41)
	if _, err := conn.Session().Create(context.Background(), e.root+"/legacy", counter, 0); err != nil {
		t.Fatal(err)
	}
	got, err := c.Take(context.Background(), "legacy", 5)
	if err != nil || got.String() != "42:46" {
		t.Fatalf("take = %s, %v; want 42:46", got, err)
	}
	if v := binary.BigEndian.Uint64(e.zkData(conn, "legacy")); v != 46 {
		t.Fatalf("counter = %d; want 46, still in the 8-byte format", v)
	}
}

func TestWindowsSpreadClientsAndStayDisjoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	setup := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(setup, "win", seqzk.Registration{Windows: 4}, 100_000)
	for i := 0; i < 4; i++ {
		if _, err := setup.Keeper().OpenWindow(ctx, "win", 1000); err != nil {
			t.Fatal(err)
		}
	}
	l := testenv.NewLedger()
	var wg sync.WaitGroup
	used := make(map[int64]bool) // window index (by ID/1000) that served a take
	var mu sync.Mutex
	for w := 0; w < 8; w++ {
		c := e.client(seqzk.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				got, err := c.Take(ctx, "win", 5)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				l.Took(w, got)
				mu.Lock()
				used[(got[0].Start-1)/1000] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	l.Check(t)
	if len(used) < 3 {
		t.Errorf("takes landed in %d of 4 windows; clients should spread", len(used))
	}
	// The windows, not the sequence, served every take.
	st, windows, err := setup.Describe(ctx, "win")
	if err != nil || len(windows) != 4 || st.Next != 4001 {
		t.Fatalf("describe = next %d, windows %v, %v; want next 4001 and 4 windows", st.Next, windows, err)
	}
}

func TestWindowFallsBackToSequenceWhenUsedUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "w2", seqzk.Registration{Windows: 1}, 50)
	if _, err := c.Keeper().OpenWindow(ctx, "w2", 10); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Take(ctx, "w2", 10); err != nil || got.String() != "1:10" {
		t.Fatalf("take from the window = %s, %v; want 1:10", got, err)
	}
	if got, err := c.Take(ctx, "w2", 5); err != nil || got.String() != "11:15" {
		t.Fatalf("take after the window is used up = %s, %v; want 11:15 from the sequence", got, err)
	}
	if open, err := c.Keeper().PruneWindows(ctx, "w2", state.VersionLimit); err != nil || open != 0 {
		t.Fatalf("prune = %d open, %v; want 0", open, err)
	}
}

// The rollback the design warns about: ZooKeeper is restored from a copy
// taken after the last raise, so the znode's version and ceiling look
// current, yet IDs taken after the copy would be taken again. The epoch
// stamp makes clients wait for the primary instead.
func TestRollbackAfterLastRaiseNeverReissues(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	e := &env{t: t, servers: ens.Servers(), root: "/all-sequences"}
	newClient := func() *seqzk.Client {
		c, err := seqzk.NewClient(e.session(4*time.Second), seqzk.Options{Root: e.root, CeilingWait: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient()
	if err := c.ZK().EnsurePath(context.Background(), e.root); err != nil {
		t.Fatal(err)
	}
	e.create(c, "rb", seqzk.Registration{}, 1000) // the last raise: store holds 1000
	if got, err := c.Take(ctx, "rb", 10); err != nil || got.String() != "1:10" {
		t.Fatalf("take = %s, %v", got, err)
	}
	// A copy taken after the last raise.
	ens.Stop(0)
	saved := t.TempDir()
	if err := ens.SaveData(0, saved); err != nil {
		t.Fatal(err)
	}
	if err := ens.Start(0); err != nil {
		t.Fatal(err)
	}
	c = newClient()
	issued := map[int64]bool{}
	for i := 0; i < 5; i++ {
		got, err := c.Take(ctx, "rb", 10)
		if errors.Is(err, seqzk.ErrUnvalidated) {
			// The restart began a new epoch; stand in for the primary.
			if _, err := c.Keeper().Revalidate(ctx, "rb", 1001, 2000); err != nil {
				t.Fatal(err)
			}
			i--
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			for id := r.Start; id <= r.End; id++ {
				issued[id] = true
			}
		}
	}

	// Roll back to the copy: next is 11 again, the ceiling 1000.
	ens.Stop(0)
	if err := ens.RestoreData(0, saved); err != nil {
		t.Fatal(err)
	}
	if err := ens.Start(0); err != nil {
		t.Fatal(err)
	}
	c = newClient()
	got, err := c.Take(ctx, "rb", 10)
	if !errors.Is(err, seqzk.ErrUnvalidated) {
		t.Fatalf("take after the rollback = %s, %v; want ErrUnvalidated, not IDs", got, err)
	}
	// The primary fast-forwards past the stored ceiling (2000 by now).
	if _, err := c.Keeper().Revalidate(ctx, "rb", 2001, 3000); err != nil {
		t.Fatal(err)
	}
	got, err = c.Take(ctx, "rb", 10)
	if err != nil || got[0].Start != 2001 {
		t.Fatalf("take after revalidation = %s, %v; want from 2001", got, err)
	}
	for _, r := range got {
		for id := r.Start; id <= r.End; id++ {
			if issued[id] {
				t.Fatalf("id %d issued twice", id)
			}
		}
	}
}
