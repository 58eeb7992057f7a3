package primary_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A bounded space smaller than min_reserve: its first
// reserve used to cover the whole space, so that a ZooKeeper loss left it
// exhausted with no ID ever taken. Its reserve is now a sixteenth of its
// space: it survives a loss with most of its IDs left, says "issued or
// skipped" when it is used up, and its space, and its windows, can be
// widened while it runs.
func TestBoundedSpaceSurvivesALossAndWidens(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil) // min_reserve 100
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "cap", seqzk.Registration{End: 200}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cap initialised", func() bool { st, _, err := c.Describe(ctx, "cap"); return err == nil && !st.Registered })
	st, _, err := c.Describe(ctx, "cap")
	if err != nil {
		t.Fatal(err)
	}
	if st.Ceiling >= 100 {
		t.Fatalf("cap's first ceiling is %d of a space of 200: the reserve is not sized to the space", st.Ceiling)
	}
	loseZnodes(t, c, "cap") // ZooKeeper loses it, with no ID taken
	waitFor(t, "cap restored", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("cap")); return ok })
	seen := ids{}
	got, err := c.Take(ctx, "cap", 5)
	if err != nil {
		t.Fatalf("take after the loss: %v; want IDs left", err)
	}
	seen.add(t, "after the loss", got)
	var last int64
	for {
		got, err := c.Take(ctx, "cap", 20)
		if errors.Is(err, state.ErrExhausted) {
			if !strings.Contains(err.Error(), "issued or skipped") || !strings.Contains(err.Error(), "seqkeeper widen cap") {
				t.Fatalf("exhausted: %v; want it to say issued or skipped, and how to widen", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "before the end", got)
		last = got[len(got)-1].End
	}
	if last != 200 {
		t.Fatalf("the last ID taken before the end was %d, want 200", last)
	}
	if _, err := primary.Widen(ctx, c, r.store(), "cap", seqzk.Widening{End: 150}); !errors.Is(err, seqzk.ErrWidenRefused) || !strings.Contains(err.Error(), "widen refused: --max 150 is below its end") {
		t.Fatalf("narrowing: %v; want refused", err)
	}
	// Another client, on a session of its own, has read cap exhausted
	// and keeps that state in its cache.
	other := r.client(10 * time.Second)
	if _, err := other.Take(ctx, "cap", 1); !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("another client's take from the exhausted cap: %v; want exhausted", err)
	}
	w, err := primary.Widen(ctx, c, r.store(), "cap", seqzk.Widening{End: 400})
	if err != nil || w.End != 400 {
		t.Fatalf("widen: %+v, %v", w, err)
	}
	// Exhausted is said for good: not from a cache the widen overtook
	// for more than the second a confirmed exhausted state is kept.
	waitFor(t, "the primary to raise the widened cap", func() bool { st, _, err := c.Describe(ctx, "cap"); return err == nil && st.Ceiling > 200 })
	var first sequence.Ranges
	for deadline := time.Now().Add(1500 * time.Millisecond); ; time.Sleep(50 * time.Millisecond) {
		if first, err = other.Take(ctx, "cap", 1); !errors.Is(err, state.ErrExhausted) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || first[0].Start != 201 {
		t.Fatalf("the other client's take within 1.5 s of the widen: %v, %v; want 201", first, err)
	}
	seen.add(t, "after widening, by another client", first)
	if rec, err := r.store().Get(ctx, "cap"); err != nil || rec.End != 400 {
		t.Fatalf("the store's record after widening: %+v, %v; want the end 400", rec, err)
	}
	got, err = c.Take(ctx, "cap", 10)
	if err != nil {
		t.Fatalf("take after widening: %v", err)
	}
	seen.add(t, "after widening", got)
	if got[0].Start != 202 {
		t.Fatalf("took %s after widening and 201; want from 202", got)
	}

	// More windows, while the primary runs: takes open them and use them,
	// and a ZooKeeper loss brings the sequence back with them (the store
	// learnt them first). Fewer is refused.
	w, err = primary.Widen(ctx, c, r.store(), "cap", seqzk.Widening{Windows: 2})
	if err != nil || w.Windows != 2 || w.End != 400 {
		t.Fatalf("widen --windows 2: %+v, %v", w, err)
	}
	for range 5 {
		got, err := c.Take(ctx, "cap", 3)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "from windows", got)
	}
	if _, ws, err := c.Inspect(ctx, "cap"); err != nil || len(ws) == 0 {
		t.Fatalf("no window open after takes from cap with 2 windows: %v, %v", ws, err)
	}
	if _, err := primary.Widen(ctx, c, r.store(), "cap", seqzk.Widening{Windows: 1}); !errors.Is(err, seqzk.ErrWidenRefused) || !strings.Contains(err.Error(), "windows never decrease") {
		t.Fatalf("fewer windows: %v; want refused", err)
	}
	loseZnodes(t, c, "cap")
	waitFor(t, "cap restored again", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("cap")); return ok })
	if st, _, err := c.Describe(ctx, "cap"); err != nil || st.Windows != 2 || st.End != 400 {
		t.Fatalf("after a second loss: %+v, %v; want 2 windows and the end 400", st, err)
	}
	got, err = c.Take(ctx, "cap", 3)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "after the second loss", got)
}

// A widen that ZooKeeper lost (found by TestModelSeveralRoots, seed 13): a
// bounded sequence is widened, hands out IDs above its old end, and then
// ZooKeeper's data is restored from a copy taken before the widen. The
// revalidation after the loss clamps next to the old end + 1 (the state
// cannot hold a next above its end), so the state forgets the IDs above
// it; the store's ceiling covers them. Widening it again must start the
// space above the store's ceiling, not at the old end + 1, or those IDs
// go out twice. The rolled-back state is written here as the
// revalidation leaves it (end 300, next 301, its marker and epoch kept).
func TestWidenAfterALostWidenStartsAboveTheStore(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil)
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "tiny", seqzk.Registration{Start: 1, End: 300}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "tiny initialised", func() bool { st, _, err := c.Describe(ctx, "tiny"); return err == nil && !st.Registered })
	if _, err := primary.Widen(ctx, c, r.store(), "tiny", seqzk.Widening{End: 2957}); err != nil {
		t.Fatal(err)
	}
	seen := ids{}
	var last int64
	for last < 356 {
		got, err := c.Take(ctx, "tiny", 20)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "before the loss", got)
		last = got[len(got)-1].End
	}
	// ZooKeeper restored from its copy before the widen, and revalidated:
	// written by compare-and-set, again if the primary's raise after the
	// takes lands in between.
	for {
		data, stat, err := c.ZK().Session().Get(ctx, c.Path("tiny"))
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.ParseState("tiny", data)
		if err != nil {
			t.Fatal(err)
		}
		st.End, st.Next, st.Ceiling, st.Recycled = 300, 301, 300, nil
		_, err = c.ZK().Session().Set(ctx, c.Path("tiny"), st.Encode(), stat.Version)
		if errors.Is(err, zkclient.ErrBadVersion) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	rec, err := r.store().Get(ctx, "tiny")
	if err != nil || rec.Ceiling < last {
		t.Fatalf("the store's record: %+v, %v; want a ceiling of at least %d", rec, err, last)
	}
	w, err := primary.Widen(ctx, c, r.store(), "tiny", seqzk.Widening{End: 2957})
	if err != nil {
		t.Fatal(err)
	}
	if w.Next <= rec.Ceiling {
		t.Fatalf("widened to next %d, at or below the store's ceiling %d: IDs up to %d went out before the loss", w.Next, rec.Ceiling, last)
	}
	for range 5 {
		got, err := c.Take(ctx, "tiny", 20)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, "after widening again", got)
	}
}

// A widen of a name whose stored ceiling is MaxInt64 (an imported
// tombstone may say every ID went out) leaves nothing to hand out: the
// floor above that ceiling saturates, it does not wrap to a negative one
// that skips nothing.
func TestWidenAboveACeilingAtMaxInt64HandsOutNothing(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	r.start("p1", nil)
	c := r.client(10 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "b", seqzk.Registration{Start: 1, End: 300}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b initialised", func() bool { st, _, err := c.Describe(ctx, "b"); return err == nil && !st.Registered })
	if err := seqzk.PutAtCurrentEpoch(ctx, r.store(), persist.Record{Name: "b", Ceiling: math.MaxInt64}); err != nil {
		t.Fatal(err)
	}
	w, err := primary.Widen(ctx, c, r.store(), "b", seqzk.Widening{End: 2957})
	if err != nil {
		t.Fatal(err)
	}
	if w.Next <= w.End {
		t.Fatalf("widened to %+v: it can hand out IDs from %d, below the store's ceiling %d", w, w.Next, int64(math.MaxInt64))
	}
}
