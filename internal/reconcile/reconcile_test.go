package reconcile_test

import (
	"errors"
	"math"
	"testing"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/persist"
)

// Recreate restores above everything a
// record covers, including at the end of a bounded space and at the top of
// int64, and never produces an invalid state.
func TestRecreateAboveTheRecord(t *testing.T) {
	const top = math.MaxInt64
	for _, tt := range []struct {
		name               string
		rec                persist.Record
		wantNext, wantCeil int64
	}{
		{"plain", persist.Record{Name: "a", Start: 1, Ceiling: 500}, 501, 700},
		{"never issued: from start", persist.Record{Name: "a", Start: 100, Ceiling: 0}, 100, 299},
		{"bounded, room left: capped at end", persist.Record{Name: "b", Start: 1, End: 550, Ceiling: 500}, 501, 550},
		{"bounded, ceiling at end: exhausted", persist.Record{Name: "b", Start: 1, End: 50, Ceiling: 50}, 51, 50},
		{"bounded, ceiling past end (a tombstone): exhausted", persist.Record{Name: "b", Start: 1, End: 50, Ceiling: 60}, 51, 50},
		{"top of int64, room left", persist.Record{Name: "t", Start: top - 150, Ceiling: top - 100}, top - 99, top},
		{"ceiling MaxInt64: exhausted", persist.Record{Name: "t", Start: top - 150, Ceiling: top}, top, top - 1},
		{"ceiling MaxInt64-1: exhausted", persist.Record{Name: "t", Start: top - 150, Ceiling: top - 1}, top, top - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, rec := reconcile.Recreate(tt.rec, 100)
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			if st.Next != tt.wantNext || st.Ceiling != tt.wantCeil {
				t.Fatalf("next %d ceiling %d; want %d, %d", st.Next, st.Ceiling, tt.wantNext, tt.wantCeil)
			}
			if st.Next-1 == min(st.End, top-1) && st.PushFloor <= tt.rec.Ceiling && tt.rec.Ceiling < top {
				t.Fatalf("used up, with floor %d: its incarnation would not start above the record's ceiling %d", st.PushFloor, tt.rec.Ceiling)
			}
			if rec.Ceiling < st.Ceiling || rec.Ceiling < tt.rec.Ceiling {
				t.Fatalf("record ceiling %d does not cover the state's %d and the old %d", rec.Ceiling, st.Ceiling, tt.rec.Ceiling)
			}
			got, err := st.Take(1000)
			if err != nil && !errors.Is(err, state.ErrExhausted) {
				t.Fatal(err)
			}
			if len(got) > 0 && got[0].Start <= tt.rec.Ceiling {
				t.Fatalf("the restored state hands out %s again (the record covers up to %d)", got, tt.rec.Ceiling)
			}
		})
	}
}

// A re-created sequence gets what the primary raises an idle sequence to:
// Headroom(minReserve) IDs, so it is not at its low-water mark (the primary
// would raise it at once) and holds no more than an idle sequence would
// lose at the next ZooKeeper data loss anyway.
func TestRecreateGivesTheHeadroomOfAnIdleSequence(t *testing.T) {
	for _, minReserve := range []int64{1, 50, 1000, 1 << 50} {
		st, rec := reconcile.Recreate(persist.Record{Name: "a", Start: 1, Ceiling: 12345}, minReserve)
		got := st.Ceiling - st.Next + 1
		if got != reconcile.Headroom(minReserve) || got <= minReserve {
			t.Errorf("minReserve %d: %d IDs usable (%d..%d); want Headroom = %d, above the low-water mark",
				minReserve, got, st.Next, st.Ceiling, reconcile.Headroom(minReserve))
		}
		if rec.Ceiling != st.Ceiling {
			t.Errorf("minReserve %d: record ceiling %d, state ceiling %d", minReserve, rec.Ceiling, st.Ceiling)
		}
	}
}

// A legacy counter comes back at its mark, and the mark moves up by the
// headroom (saturating below the largest counter).
func TestRecreateLegacy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mark     int64
		wantMark int64
	}{
		{"plain", 500, 700},
		{"near the top", state.MaxLegacyCounter - 10, state.MaxLegacyCounter},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, rec := reconcile.Recreate(persist.Record{Name: "l", Legacy: true, Ceiling: tt.mark, Czxid: 7}, 100)
			if !st.Legacy || st.Next != tt.mark {
				t.Fatalf("state %+v; want a legacy counter at %d", st, tt.mark)
			}
			if rec.Ceiling != tt.wantMark || !rec.Legacy || rec.Czxid != 0 {
				t.Fatalf("record %+v; want a legacy mark of %d and no znode", rec, tt.wantMark)
			}
		})
	}
}

func TestCeiling(t *testing.T) {
	const top = math.MaxInt64
	for _, tt := range []struct{ from, n, end, want int64 }{
		{1, 100, top, 100},
		{501, 200, top, 700},
		{501, 200, 600, 600},     // capped at the end
		{601, 200, 600, 600},     // past the end: the end
		{top - 5, 100, top, top}, // no overflow
		{top, 1, top, top},
	} {
		if got := reconcile.Ceiling(tt.from, tt.n, tt.end); got != tt.want {
			t.Errorf("Ceiling(%d, %d, %d) = %d, want %d", tt.from, tt.n, tt.end, got, tt.want)
		}
	}
}

func TestFloor(t *testing.T) {
	const top = math.MaxInt64
	for _, tt := range []struct {
		name    string
		ceiling int64 // in ZooKeeper
		stored  int64
		has     bool
		want    int64
	}{
		{"store above ZooKeeper", 500, 800, true, 801},
		{"ZooKeeper above the store (the store lost data)", 900, 800, true, 901},
		{"no record", 500, 0, false, 501},
		{"a record is trusted only when stored", 500, 800, false, 501},
		{"top of int64", top, top, true, top},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := reconcile.Floor(state.State{Ceiling: tt.ceiling}, persist.Record{Ceiling: tt.stored}, tt.has)
			if got != tt.want {
				t.Fatalf("Floor = %d, want %d", got, tt.want)
			}
		})
	}
}
