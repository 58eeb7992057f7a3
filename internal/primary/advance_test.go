package primary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Advance beside a running primary and busy takers: every take that
// starts after it returns is at or above the new floor, no ID is handed
// out twice, the store covers every ID (the workers check it after each
// take), and the primary keeps raising the advanced sequence.
func TestAdvanceWhileTakersRun(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil)
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "orders", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	wctx, stop := context.WithCancel(ctx)
	wg := r.workers(wctx, 3, "orders", l)
	// Advance refuses a sequence the primary has not initialised yet,
	// which on a loaded machine can take longer than the takers' head
	// start.
	waitFor(t, "orders initialised", func() bool { st, _, err := c.Describe(ctx, "orders"); return err == nil && !st.Registered })
	time.Sleep(300 * time.Millisecond)

	const to = 1_000_000
	store := r.store()
	a, err := primary.Advance(ctx, c, store, "orders", to, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Changed() || a.State.Next < to || len(a.State.Recycled) != 0 {
		t.Fatalf("advance wrote %+v", a.State)
	}
	if a.Stored < a.State.Ceiling {
		t.Errorf("ZooKeeper's ceiling %d is above the store's %d", a.State.Ceiling, a.Stored)
	}
	// Every take from now on is at or above the floor.
	other := r.client(10 * time.Second)
	for range 50 {
		got, err := other.Take(ctx, "orders", 100)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Start < to {
			t.Fatalf("took %s after advancing to %d", got, to)
		}
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	l.check(t)
	if l.issuedNow() == 0 {
		t.Fatal("the workers took nothing")
	}

	// Never backwards: advancing to a lower point changes nothing.
	back, err := primary.Advance(ctx, c, store, "orders", 10, 100)
	if err != nil || back.Changed() {
		t.Fatalf("advance backwards: %+v, %v; want no change", back, err)
	}
}

// Refusals change nothing: beyond the space, exhausted, not initialised,
// a bad name.
func TestAdvanceRefusals(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	c := r.client(time.Second)
	ctx := context.Background()
	store := r.store()
	if err := testenv.CreateAll(c.ZK(), r.root); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "small", seqzk.Registration{Start: 1, End: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Advance(ctx, c, store, "small", 50, 10); !errors.Is(err, seqzk.ErrAdvanceRefused) {
		t.Fatalf("advance of a registration: %v, want ErrAdvanceRefused", err)
	}
	if _, err := c.Keeper().Revalidate(ctx, "small", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keeper().Revalidate(ctx, "small", 0, 40); err != nil {
		t.Fatal(err)
	}
	before, _, err := c.Describe(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Advance(ctx, c, store, "small", 101, 10); !errors.Is(err, seqzk.ErrAdvanceRefused) {
		t.Fatalf("advance beyond the space: %v, want ErrAdvanceRefused", err)
	}
	after, _, err := c.Describe(ctx, "small")
	if err != nil || !after.Equal(before) {
		t.Fatalf("a refused advance changed the state: %+v -> %+v (%v)", before, after, err)
	}
	// Recycled IDs are dropped: they lie below the new floor.
	took, err := c.Take(ctx, "small", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, "small", took); err != nil {
		t.Fatal(err)
	}
	a, err := primary.Advance(ctx, c, store, "small", 50, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a.Replaced.Recycled.Count() != 10 || len(a.State.Recycled) != 0 || a.State.Next != 50 {
		t.Fatalf("advance over recycled %s: replaced %+v, wrote %+v", took, a.Replaced, a.State)
	}
	if got, err := c.Take(ctx, "small", 1); err != nil || got[0].Start != 50 {
		t.Fatalf("take after the advance: %v, %v; want 50", got, err)
	}
	// Up to the last ID is allowed, and leaves exactly one ID.
	a, err = primary.Advance(ctx, c, store, "small", 100, 10)
	if err != nil || a.State.Next != 100 || a.State.Ceiling != 100 {
		t.Fatalf("advance to the last ID: %+v, %v", a.State, err)
	}
	got, err := c.Take(ctx, "small", 5)
	if err != nil || got.Count() != 1 || got[0].Start != 100 {
		t.Fatalf("take after advancing to the last ID: %v, %v; want exactly 100", got, err)
	}
	if _, err := primary.Advance(ctx, c, store, "small", 100, 10); !errors.Is(err, seqzk.ErrAdvanceRefused) {
		t.Fatalf("advance of an exhausted sequence: %v, want ErrAdvanceRefused", err)
	}
	if _, err := primary.Advance(ctx, c, store, "no/such", 5, 10); !errors.Is(err, seqzk.ErrInvalidName) {
		t.Fatalf("advance of a bad name: %v", err)
	}
	if _, err := primary.Advance(ctx, c, store, "missing", 5, 10); !errors.Is(err, seqzk.ErrUnknownSequence) {
		t.Fatalf("advance of a missing sequence: %v", err)
	}
}

// An advance is not demand: advancing an idle sequence
// far ahead leaves its reserve at what the advance gave it (twice
// min_reserve from the new next). The primary used to count the jump as
// consumption and reserve millions of IDs, which every later failover,
// restore or move then skipped.
func TestAdvanceIsNotDemand(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil) // min_reserve 100, runway 1 s
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "idle", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "idle initialised", func() bool { st, _, err := c.Describe(ctx, "idle"); return err == nil && !st.Registered })
	const to = 1_000_000
	if _, err := primary.Advance(ctx, c, r.store(), "idle", to, 100); err != nil {
		t.Fatal(err)
	}
	// Several sweeps (200 ms each) and rate samples (1 s) later.
	time.Sleep(2500 * time.Millisecond)
	st, _, err := c.Describe(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	if reserve := st.Ceiling - st.Next + 1; st.Next < to || reserve > 2*100 {
		t.Fatalf("after advancing to %d: next %d, ceiling %d: a reserve of %d IDs; want at most twice min_reserve (200)", to, st.Next, st.Ceiling, reserve)
	}
}

// untrustedRig is a root with no primary, its store on a file, and a
// client: a sequence's state and its stored ceiling are what the test
// writes.
func untrustedRig(t *testing.T, servers []string, root string) (*fileRig, *seqzk.Client) {
	t.Helper()
	r := &fileRig{t: t, servers: servers, root: root, store: fileStore(t, t.TempDir())}
	c := r.client(servers, 30*time.Second)
	if err := c.ZK().EnsurePath(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	return r, c
}

// initialised registers name and initialises it with ceiling in the store
// and in ZooKeeper, as a primary would.
func initialised(t *testing.T, r *fileRig, c *seqzk.Client, name string, ceiling int64) {
	t.Helper()
	ctx := context.Background()
	if err := c.Register(ctx, name, seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := seqzk.PutAtCurrentEpoch(ctx, r.store, persist.Record{Name: name, Ceiling: ceiling}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keeper().Revalidate(ctx, name, 0, ceiling); err != nil {
		t.Fatal(err)
	}
}

// A state ZooKeeper may have lost writes of (rolled back to an older copy,
// validated in an earlier epoch) shows a next, and recycled IDs, from
// before IDs were handed out. An advance moves it above the store's floor,
// and reports the state it replaced as revalidation would make it, so that
// 'advance' never claims to have skipped IDs that clients may hold and
// push back. A trusted state is reported as it was.
func TestAdvanceOfAnUntrustedStateSkipsNothingBelowTheStore(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r, c := untrustedRig(t, z.Servers, z.SequencesRoot(t))
	ctx := context.Background()
	initialised(t, r, c, "rolled", 100)

	// The state as an old copy of ZooKeeper holds it: validated in an
	// earlier ZooKeeper epoch, next 20, IDs 5:9 recycled.
	old := state.State{Start: 1, Next: 20, Ceiling: 100, End: state.MaxID, ZKEpoch: c.Epoch() - 1, Marker: "h-00000000000000bb", Recycled: state.Ranges{{Start: 5, End: 9}}}
	if _, err := c.ZK().Session().Set(ctx, c.Path("rolled"), old.Encode(), -1); err != nil {
		t.Fatal(err)
	}
	const storedFloor = 101 // the store covers up to 100: IDs up to 100 may be out
	a, err := primary.Advance(ctx, c, r.store, "rolled", 150, 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.State.Next != 150 || len(a.State.Recycled) != 0 {
		t.Fatalf("advanced to %+v; want next 150 and no recycled IDs", a.State)
	}
	if a.Replaced.Next != storedFloor || len(a.Replaced.Recycled) != 0 {
		t.Fatalf("replaced state reported as next %d, recycled %v; want next %d (the stored floor) and no recycled IDs: below it, IDs may have been handed out since the copy", a.Replaced.Next, a.Replaced.Recycled, storedFloor)
	}

	if _, err := c.Take(ctx, "rolled", 3); err != nil { // 150:152
		t.Fatal(err)
	}
	if err := c.Push(ctx, "rolled", state.Ranges{{Start: 151, End: 152}}); err != nil {
		t.Fatal(err)
	}
	a, err = primary.Advance(ctx, c, r.store, "rolled", 200, 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.Replaced.Next != 153 || len(a.Replaced.Recycled) != 1 {
		t.Fatalf("trusted replaced state reported as next %d, recycled %v; want next 153, recycled 151:152", a.Replaced.Next, a.Replaced.Recycled)
	}
}

// The operator's client has not written since ZooKeeper elected a new
// leader, so the epoch it knows is the old one and a state stamped in it
// looks trusted; the advance's write lands in the new epoch, and it
// stamps again from the stored floor. The state it replaced is reported
// as revalidation would make it.
func TestAdvanceAfterAnUnseenElectionSkipsNothingBelowTheStore(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	r, c := untrustedRig(t, ens.Servers(), "/all-sequences")
	ctx := context.Background()
	initialised(t, r, c, "e", 100)                  // stamped in epoch E, which c knows
	if _, err := c.Take(ctx, "e", 19); err != nil { // next 20
		t.Fatal(err)
	}
	before := c.Epoch()
	ens.Stop(0) // a new leader: epoch E+1, which c has not seen
	if err := ens.Start(0); err != nil {
		t.Fatal(err)
	}
	if err := ens.WaitServing(0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const storedFloor = 101
	a, err := primary.Advance(ctx, c, r.store, "e", 150, 100)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch() == before {
		t.Fatalf("ZooKeeper's epoch is still %d after a restart: the test shows nothing", before)
	}
	if a.State.Next != 150 || a.State.ZKEpoch != c.Epoch() {
		t.Fatalf("advanced to %+v; want next 150 stamped in epoch %d", a.State, c.Epoch())
	}
	if a.Replaced.Next != storedFloor {
		t.Fatalf("replaced state reported with next %d; want %d (the stored floor): it was stamped in epoch %d, not the current %d", a.Replaced.Next, storedFloor, before, c.Epoch())
	}
}
