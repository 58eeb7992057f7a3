// Package reconcile is the one policy that compares what the durable store
// holds for a sequence (a persist.Record) with what ZooKeeper holds (a
// state.State) and decides what must happen. The primary calls it when
// it raises, revalidates and restores sequences; the operator commands
// 'seqkeeper verify' and 'seqkeeper restore' call it through Compare, Plan
// and Apply. Neither decides on its own.
//
// The rules, all serving promise 2 of docs/design.md (every ID handed out is
// at most the ceiling in the store):
//
//   - A sequence that starts again (revalidated after a ZooKeeper leader
//     election, fast-forwarded, re-created after a loss) starts at its
//     Floor: above everything the store covers and above the ceiling
//     ZooKeeper shows.
//   - It gets Headroom(reserve) IDs above that floor: twice its reserve,
//     which is what the primary raises any sequence to when it falls to
//     its low-water mark. Where no traffic has been seen (a restore, the
//     operator's 'seqkeeper restore') the reserve is the configured
//     minimum, so a restored sequence holds exactly what the primary would
//     give an idle one and the primary has nothing to redo when it takes
//     over. docs/architecture.md says why this rule and not one reserve.
//   - The store is written first; only then may ZooKeeper hold the new
//     ceiling.
//   - Recycled ranges are never restored from the store.
package reconcile

import (
	"math"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/persist"
)

// SpaceShare bounds the reserve of a bounded sequence: at most a
// SpaceShare-th of its space, so that a ZooKeeper data loss (which skips
// up to two reserves) costs it at most an eighth of its space, however
// large min_reserve is. Without it, a space smaller than the reserve was
// reserved whole at once, and a wipe left it exhausted with no ID taken.
const SpaceShare = 16

// CapReserve returns reserve bounded for a sequence whose space is
// start..end (see SpaceShare). An unbounded space (end 0 or state.MaxID)
// and a legacy counter keep reserve.
func CapReserve(reserve, start, end int64, legacy bool) int64 {
	if legacy || end == 0 || end >= state.MaxID {
		return reserve
	}
	space := end - max(start, 1) + 1
	return max(1, min(reserve, space/SpaceShare))
}

// Headroom returns how many IDs a sequence gets above its floor (or above
// next, for a raise) when its ceiling is set: twice its reserve, so that it
// falls to the low-water mark (reserve) only after it has used as much
// again. The reserve is at most config.MaxReserveLimit (2^50), so the
// result never overflows.
func Headroom(reserve int64) int64 { return 2 * reserve }

// Ceiling returns the ceiling that gives n IDs from from: from+n-1, capped
// at end, without overflow.
func Ceiling(from, n, end int64) int64 {
	if from > end || n > end-from {
		return end
	}
	return from + n - 1
}

// Floor returns the lowest ID a sequence in state st may hand out after it
// is revalidated or fast-forwarded: above everything the store covers (rec,
// when stored) and above the ceiling ZooKeeper shows, so that a store that
// lost the record does not lower it.
func Floor(st state.State, rec persist.Record, stored bool) int64 {
	floor := state.AddSat(st.Ceiling, 1)
	if stored {
		floor = max(floor, state.AddSat(rec.Ceiling, 1))
	}
	return floor
}

// Recreate returns the state that re-creates in ZooKeeper the sequence of
// record r, lost there, above everything r covers and with
// Headroom(minReserve) IDs usable at once, and r with its ceiling moved to
// cover them. The record must reach the store before the state reaches
// ZooKeeper. A legacy counter comes back at its mark, and the mark moves up
// by the same headroom.
func Recreate(r persist.Record, minReserve int64) (state.State, persist.Record) {
	n := Headroom(CapReserve(minReserve, r.Start, r.End, r.Legacy))
	st := state.State{Name: r.Name, Start: max(1, r.Start), End: r.End, Windows: r.Windows}
	if st.End == 0 {
		st.End = state.MaxID
	}
	if r.Legacy {
		st = state.State{Name: r.Name, Legacy: true, Next: r.Ceiling}
		r.Ceiling = min(r.Ceiling, state.MaxLegacyCounter-n) + n
	} else {
		// Above everything r covers. With every ID of the space covered,
		// the sequence comes back exhausted (next one past the last ID
		// it may issue), never at its last ID again.
		last := min(st.End, math.MaxInt64-1) // see state.MaxID
		st.Next = max(state.AddSat(r.Ceiling, 1), st.Start)
		if st.Next > last {
			// Its floor, above r's ceiling, only PushFloor can hold.
			st.PushFloor, st.Next, st.Ceiling = st.Next, last+1, last
		} else {
			st.Ceiling = Ceiling(st.Next, n, st.End)
		}
		r.Ceiling = max(r.Ceiling, st.Ceiling)
	}
	r.Czxid, r.Mzxid, r.Version = 0, 0, 0 // new znodes: recorded when seen
	return st, r
}
