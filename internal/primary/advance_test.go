package primary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
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
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(context.Background(), r.root); return ok })
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
	if _, err := c.Revalidate(ctx, "small", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revalidate(ctx, "small", 0, 40); err != nil {
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

// An advance is not demand (issue 31, item 3): advancing an idle sequence
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
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(context.Background(), r.root); return ok })
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
