package seqzk_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// windowsOf reads the windows of name, failing the test on error.
func windowsOf(t *testing.T, c *seqzk.Client, name string) []seqzk.Window {
	t.Helper()
	_, ws, err := c.Inspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func size(w seqzk.Window) int64 { return w.State.End - w.State.Start + 1 }

// take takes n IDs of name in one call and checks that they are start
// to start+n-1.
func take(t *testing.T, c *seqzk.Client, l *testenv.Ledger, name string, n, start int64) {
	t.Helper()
	got, err := c.Take(context.Background(), name, n)
	if err != nil || len(got) != 1 || got[0].Start != start || got[0].End != start+n-1 {
		t.Fatalf("take %d = %v, %v; want %d:%d", n, got, err, start, start+n-1)
	}
	l.Took(0, got)
}

// A busy window is refilled before it is used up: the take that leaves it
// below half carves the slot's next window, sized from the demand the
// window saw (larger than it, as the window drained in well under
// seqzk.WindowLifetime), and the client moves on to it without a gap. The
// next refill deletes the used-up window.
func TestWindowRefilledEarlyAndSizedFromDemand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(admin, "hot", seqzk.Registration{Windows: 1}, 400)
	// No demand seen yet: half the fresh IDs' fair share.
	if carved, err := admin.Keeper().TopUpWindows(ctx, "hot", state.VersionLimit, 0); err != nil || carved != 200 {
		t.Fatalf("top up = %d, %v; want 200 carved", carved, err)
	}
	first := windowsOf(t, admin, "hot")
	if len(first) != 1 || !strings.HasPrefix(first[0].Name, "w-0-") || first[0].State.Start != 1 || size(first[0]) != 200 {
		t.Fatalf("windows %+v; want one window w-0-... holding 1:200", first)
	}
	if _, err := admin.Keeper().Raise(ctx, "hot", 1<<40); err != nil {
		t.Fatal(err)
	}

	// Batches, so that the demand the window sees does not depend on how
	// fast this machine takes one ID at a time.
	c := e.client(seqzk.Options{})
	l := testenv.NewLedger()
	take(t, c, l, "hot", 100, 1) // leaves 100 of 200: half
	if ws := windowsOf(t, admin, "hot"); len(ws) != 1 {
		t.Fatalf("windows %v at half; want the first only", ws)
	}
	take(t, c, l, "hot", 1, 101) // leaves 99: below half
	ws := windowsOf(t, admin, "hot")
	if len(ws) != 2 || ws[0].Name != first[0].Name || ws[0].State.Fresh() != 99 || !strings.HasPrefix(ws[1].Name, "w-0-") {
		t.Fatalf("windows %+v after the take below half; want the first with 99 left and its successor in slot 0", ws)
	}
	next := ws[1]
	if size(next) <= 200 || size(next) > 16*200 || next.State.Next != next.State.Start {
		t.Fatalf("successor %+v: want an untouched window larger than 200 (demand-sized) and at most 16 times it", next)
	}
	take(t, c, l, "hot", 99, 102)
	take(t, c, l, "hot", 1, next.State.Start) // the successor, without a gap
	// The successor's own refill retires the used-up first window.
	half := size(next) / 2
	take(t, c, l, "hot", half-1, next.State.Start+1)
	take(t, c, l, "hot", 1, next.State.Start+half)
	ws = windowsOf(t, admin, "hot")
	if len(ws) != 2 || ws[0].Name != next.Name || ws[1].State.Start != next.State.End+1 {
		t.Fatalf("windows %+v; want the successor and its own successor, the used-up first window deleted", ws)
	}
	st, _, err := admin.Describe(ctx, "hot")
	if err != nil || st.Next != ws[1].State.End+1 {
		t.Fatalf("sequence next %d, %v; want %d: every ID below it carved into a window", st.Next, err, ws[1].State.End+1)
	}
}

// The primary's top-up fills every slot with no open window, in slot
// order, sized from the sequence's demand when no window has been seen,
// and leaves filled slots alone.
func TestTopUpWindowsFillsEmptySlotsFromDemand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(admin, "slots", seqzk.Registration{Windows: 4}, 1<<40)
	// 200 IDs/s over 4 slots for WindowLifetime (10 s): 500 each.
	carved, err := admin.Keeper().TopUpWindows(ctx, "slots", state.VersionLimit, 200)
	if err != nil || carved != 2000 {
		t.Fatalf("top up = %d, %v; want 2000 carved", carved, err)
	}
	ws := windowsOf(t, admin, "slots")
	if len(ws) != 4 {
		t.Fatalf("windows %+v; want 4", ws)
	}
	for k, w := range ws {
		if want := "w-" + string(rune('0'+k)) + "-"; !strings.HasPrefix(w.Name, want) || size(w) != 500 || w.State.Start != int64(1+500*k) {
			t.Errorf("window %d = %s %+v; want %s... holding %d:%d", k, w.Name, w.State, want, 1+500*k, 500*(k+1))
		}
	}
	if carved, err := admin.Keeper().TopUpWindows(ctx, "slots", state.VersionLimit, 200); err != nil || carved != 0 {
		t.Fatalf("second top up = %d, %v; want nothing carved", carved, err)
	}
}

// Clients that start together on the windows of a sequence settle on
// distinct slots: after the first takes, a take costs one compare-and-set
// and almost never conflicts, across refills.
func TestClientsSettleOnDistinctSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(admin, "spread", seqzk.Registration{Windows: 8}, 16_000)
	if _, err := admin.Keeper().TopUpWindows(ctx, "spread", state.VersionLimit, 0); err != nil { // 8 windows of 1000
		t.Fatal(err)
	}
	e.raiser("spread", 100_000)
	const clients, takes = 8, 400
	l := testenv.NewLedger()
	cs := make([]*seqzk.Client, clients)
	for i := range cs {
		cs[i] = e.client(seqzk.Options{})
	}
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for range takes {
				got, err := c.Take(ctx, "spread", 1)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				l.Took(i, got)
			}
		})
	}
	wg.Wait()
	l.Check(t)
	var conflicts, requests int64
	for _, c := range cs {
		conflicts += c.Stats().Conflicts
		requests += c.Stats().Requests
	}
	t.Logf("%d takes: %d conflicts, %.2f requests per take", clients*takes, conflicts, float64(requests)/(clients*takes))
	if conflicts > clients*takes/20 {
		t.Errorf("%d conflicts in %d takes; want under 0.05 per take once clients settle on slots", conflicts, clients*takes)
	}
}

// Clients of a windowed sequence whose windows the primary has not carved
// yet (or whose slots were used up at the ceiling and pruned) open the
// empty slots themselves, one each, instead of contending on the sequence.
func TestClientsOpenEmptySlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(admin, "bare", seqzk.Registration{Windows: 4}, 8000)
	l := testenv.NewLedger()
	var wg sync.WaitGroup
	cs := make([]*seqzk.Client, 4)
	for i := range cs {
		cs[i] = e.client(seqzk.Options{})
		wg.Go(func() {
			for range 100 {
				got, err := cs[i].Take(ctx, "bare", 1)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				l.Took(i, got)
			}
		})
	}
	wg.Wait()
	l.Check(t)
	ws := windowsOf(t, admin, "bare")
	slots := make(map[string]bool)
	for _, w := range ws {
		slots[w.Name[:strings.LastIndex(w.Name, "-")]] = true
	}
	if len(slots) != 4 {
		t.Errorf("windows %v: want all 4 slots opened by the clients", ws)
	}
	var conflicts int64
	for _, c := range cs {
		conflicts += c.Stats().Conflicts
	}
	t.Logf("400 takes: %d conflicts", conflicts)
	if conflicts > 20 {
		t.Errorf("%d conflicts in 400 takes; want under 0.05 per take, the clients each on a slot of its own", conflicts)
	}
}

// A long-lived client forgets the windows that vanished under it: when
// the primary validates a sequence again (dropping its windows) the
// client's next read of the list drops their cached nodes, so a client
// does not keep one node per window it ever used.
func TestClientForgetsVanishedWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.client(seqzk.Options{})
	worker := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(admin, "w", seqzk.Registration{Windows: 4}, 1<<40)
	for range 8 {
		if _, err := worker.Take(ctx, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	before := worker.CachedNodes()
	if open := len(windowsOf(t, admin, "w")); open == 0 || before < 1+open {
		t.Fatalf("%d cached nodes for %d open windows: the worker did not take from windows", before, open)
	}
	for round := range 3 {
		if _, err := admin.Keeper().Restamp(ctx, "w", 0, 0, 1<<40, true); err != nil { // drops every window
			t.Fatal(err)
		}
		for range 8 {
			if _, err := worker.Take(ctx, "w", 1); err != nil {
				t.Fatal(err)
			}
		}
		if got, open := worker.CachedNodes(), len(windowsOf(t, admin, "w")); got > 1+open {
			t.Fatalf("round %d: %d cached nodes for the sequence and %d open windows", round, got, open)
		}
	}
}
