package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// TestIDSet checks idSet against a map of IDs, on random operations.
func TestIDSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s idSet
	ref := map[int64]bool{}
	for i := 0; i < 5000; i++ {
		a := 1 + r.Int64N(300)
		x := sequence.Range{Start: a, End: a + r.Int64N(20)}
		if r.IntN(3) == 0 {
			s.remove(x)
			for id := x.Start; id <= x.End; id++ {
				delete(ref, id)
			}
		} else {
			s.add(x)
			for id := x.Start; id <= x.End; id++ {
				ref[id] = true
			}
		}
		for j := 1; j < len(s.rs); j++ {
			if s.rs[j].Start <= s.rs[j-1].End+1 {
				t.Fatalf("step %d: not coalesced: %v", i, s.rs)
			}
		}
		if s.count() != int64(len(ref)) {
			t.Fatalf("step %d: count %d, want %d", i, s.count(), len(ref))
		}
		q := sequence.Range{Start: 1 + r.Int64N(330), End: 0}
		q.End = q.Start + r.Int64N(30)
		var in, out int64
		for _, p := range s.intersect(q) {
			in += p.Len()
		}
		for _, p := range s.missing(q) {
			out += p.Len()
			for id := p.Start; id <= p.End; id++ {
				if ref[id] {
					t.Fatalf("step %d: missing(%s) returned %d, which is in the set", i, q, id)
				}
			}
		}
		if in+out != q.Len() {
			t.Fatalf("step %d: intersect+missing of %s cover %d IDs, want %d", i, q, in+out, q.Len())
		}
	}
	var top idSet
	top.add(sequence.Range{Start: math.MaxInt64 - 5, End: math.MaxInt64})
	top.add(sequence.Range{Start: math.MaxInt64 - 9, End: math.MaxInt64 - 6})
	if len(top.rs) != 1 || len(top.missing(sequence.Range{Start: math.MaxInt64 - 9, End: math.MaxInt64})) != 0 {
		t.Fatalf("top of the space: %v", top.rs)
	}
}

// TestLedger checks the oracle's rule: an ID may be handed out again only
// after a push, once per push.
func TestLedger(t *testing.T) {
	l := newLedger(seqSpec{name: "s", reg: seqzk.Registration{Start: 1, End: 100}})
	rg := func(a, b int64) sequence.Ranges { return sequence.Ranges{{Start: a, End: b}} }
	if p := l.take(1, "a", rg(1, 10)); len(p) != 0 {
		t.Fatal(p)
	}
	if p := l.take(2, "b", rg(10, 12)); len(p) != 1 || !strings.Contains(p[0], "DUPLICATE") || !strings.Contains(p[0], "10") {
		t.Fatalf("re-issue of 10 not caught: %v", p)
	}
	l.returned.add(sequence.Range{Start: 3, End: 4})
	if p := l.take(3, "c", rg(3, 4)); len(p) != 0 {
		t.Fatalf("re-issue after a push: %v", p)
	}
	if p := l.take(4, "d", rg(4, 4)); len(p) != 1 {
		t.Fatalf("second re-issue after one push not caught: %v", p)
	}
	if p := l.take(5, "e", rg(99, 101)); len(p) != 1 || !strings.Contains(p[0], "outside") {
		t.Fatalf("ID outside the space not caught: %v", p)
	}
}

// An ID an advance skipped is a failure whenever it is handed out.
func TestLedgerSkipped(t *testing.T) {
	l := newLedger(seqSpec{name: "s", kind: "plain"})
	l.skipped.add(sequence.Range{Start: 10, End: 19})
	if p := l.take(1, "w", sequence.Ranges{{Start: 1, End: 9}}); len(p) != 0 {
		t.Fatalf("IDs below the skipped ones: %v", p)
	}
	p := l.take(2, "w", sequence.Ranges{{Start: 18, End: 25}})
	if len(p) != 1 || !strings.Contains(p[0], "SKIPPED ID HANDED OUT") || !strings.Contains(p[0], "18:19") {
		t.Fatalf("take over skipped IDs: %v", p)
	}
}

// TestUsedUpHandsOutOnlyPushedBackIDs holds checkLatent's premise: a state
// whose next is past its end (a revalidation after ZooKeeper lost a widen
// clamps it so, below IDs that went out above the old end) hands out only
// the IDs pushed back to it, never one at or above next.
func TestUsedUpHandsOutOnlyPushedBackIDs(t *testing.T) {
	st := state.State{Name: "tiny", Start: 1, End: 300, Next: 301, Ceiling: 300, ZKEpoch: 4,
		Marker: state.MarkerPrefix + "0123456789abcdef", PushFloor: 301}
	if err := st.Push(sequence.Ranges{{Start: 50, End: 69}}); err != nil {
		t.Fatal(err)
	}
	if !usedUp(st) {
		t.Fatalf("usedUp(%+v) = false: next is past the end", st)
	}
	got, err := st.Take(1000)
	if err != nil || got.String() != "50:69" {
		t.Fatalf("take from a used-up state: %v, %v; want the pushed-back 50:69 only", got, err)
	}
	if got, err := st.Take(1); !errors.Is(err, state.ErrExhausted) {
		t.Fatalf("take once the pushed-back IDs are gone: %v, %v; want ErrExhausted", got, err)
	}
}
