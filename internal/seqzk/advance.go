package seqzk

import (
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// ErrAdvanceRefused reports an advance that would break the sequence:
// past the end of its space, on an exhausted, legacy or uninitialised
// sequence. Nothing was changed.
var ErrAdvanceRefused = errors.New("advance refused")

// ErrWidenRefused reports a widen that would narrow the sequence or that
// its kind cannot take (a legacy counter). Nothing was changed.
var ErrWidenRefused = errors.New("widen refused")

// Advanced is st advanced so that it hands out no ID below floor: next
// moved up to floor (never down), the ceiling raised to ceiling (which the
// store must hold first) and at least next-1, recycled IDs dropped (and,
// by the new marker's stamp, every open window: their IDs lie below next),
// stamped with epoch under a fresh marker.
func Advanced(st state.State, floor, ceiling, epoch int64) state.State {
	st.Next = clampNext(max(st.Next, floor), st.End)
	st.Ceiling = max(st.Ceiling, st.Next-1, min(ceiling, st.End))
	st.Recycled = nil
	st.ZKEpoch, st.Marker, st.PushFloor = epoch, newMarker(), st.Next
	return st
}

// Revalidated is untrusted state st as the primary's revalidation makes
// it: above everything the store covers (storedFloor), with no recycled
// IDs.
func Revalidated(st state.State, storedFloor int64) state.State {
	st.Next = clampNext(max(st.Next, storedFloor), st.End)
	st.Recycled = nil
	return st
}

// CheckAdvance returns why sequence state st cannot be advanced to to
// (wrapping ErrAdvanceRefused), or nil.
func CheckAdvance(st state.State, to int64) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s", st.Name, ErrAdvanceRefused, fmt.Sprintf(format, args...))
	}
	last := min(st.End, state.MaxID-1) // see state.MaxID
	switch {
	case st.Legacy:
		return refuse("it is a legacy 8-byte counter; advance works on sequences with a ceiling")
	case st.Registered:
		return refuse("it is not initialised yet; start 'seqkeeper serve' (the primary initialises it) and advance it then")
	case st.Next > last:
		return refuse("it is exhausted (its space %d:%d is used up)", st.Start, st.End)
	case to > last:
		return refuse("%d is beyond the last ID of its space (%d): nothing could be handed out after it; create a sequence with a wider space instead", to, last)
	}
	return nil
}

// Widening is what Widen changes: the end of a sequence's space and its
// number of window slots. A zero field keeps the sequence's own.
type Widening struct {
	End     int64
	Windows int
	// Floor, when above the state's next, is the lowest ID the widened
	// space may hand out: the durable store's ceiling + 1, given when that
	// ceiling lies above the state's end. Only a widen ZooKeeper lost (a
	// restore of its data from a copy taken before it) leaves a state so:
	// IDs above the old end went out, and the revalidation after the loss
	// clamped next to the old end + 1. Widening such a state again without
	// moving next would hand those IDs out a second time.
	Floor int64
}

// Widened is st with its space and window slots widened as w asks, and
// whether that changes anything. Neither ever goes down (check w with
// CheckWiden first). A state whose next lies below w.Floor skips to it.
func Widened(st state.State, w Widening) (state.State, bool) {
	end, windows := max(st.End, w.End), max(st.Windows, w.Windows)
	if st.End == end && st.Windows == windows {
		return st, false
	}
	st.End, st.Windows = end, windows
	if floor := max(w.Floor, st.PushFloor); !st.Registered && floor > st.Next {
		// IDs below Floor may have gone out in a lost history: skip
		// them, and refuse pushes of them without a recorded key
		// (state.State.PushFloor), as a revalidation does. A state born
		// past its end skips to its floor: the IDs below it belong to
		// earlier incarnations.
		skipTo(&st, floor)
	}
	return st, true
}

// CheckWiden says why a sequence in state st cannot be widened as w asks,
// or returns nil.
func CheckWiden(st state.State, w Widening) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s", st.Name, ErrWidenRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Legacy:
		return refuse("a legacy 8-byte counter has no end of space or windows to widen ('seqkeeper adopt %s' moves it to the state format first)", st.Name)
	case w.End < 0 || w.Windows < 0:
		return refuse("--max %d, --windows %d: want positive values", w.End, w.Windows)
	case w.End != 0 && w.End < st.End:
		return refuse("--max %d is below its end %d: a space never narrows (IDs up to %d may have been handed out)", w.End, st.End, st.End)
	case w.End != 0 && w.End < st.Start:
		return refuse("--max %d is below its start %d", w.End, st.Start)
	case w.Windows != 0 && w.Windows < st.Windows:
		return refuse("--windows %d is below its %d: windows never decrease (the store keeps the most a sequence was given, and a restore would bring them back); create a new sequence for fewer", w.Windows, st.Windows)
	case w.Windows > state.MaxWindows:
		return refuse("--windows %d: at most %d", w.Windows, state.MaxWindows)
	}
	return nil
}
