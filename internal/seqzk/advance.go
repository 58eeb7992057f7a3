package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ErrAdvanceRefused reports an advance that would break the sequence:
// past the end of its space, on an exhausted, legacy or uninitialised
// sequence. Nothing was changed.
var ErrAdvanceRefused = errors.New("advance refused")

// Advance moves sequence name forward for an operator so that, from now
// on, it hands out no ID below to. In one transaction it moves next up to
// to (never down), drops the recycled IDs and every open window (their
// IDs lie below next, possibly below to), stamps the current ZooKeeper
// epoch under a fresh marker, and raises the ceiling to ceiling, which the
// durable store must already hold. Takes racing it either land before it
// or fail their compare-and-set and read the advanced state.
//
// A state it cannot trust (not validated in the current ZooKeeper epoch,
// or whose marker is gone: ZooKeeper may have lost writes since) moves to
// at least storedFloor too, the first ID above everything the store
// covers, as the primary's revalidation would. A trusted state's marker
// is checked in the same transaction.
//
// It returns the state its write replaced (to tell which IDs were
// skipped) and the state it wrote. A replaced state it could not trust is
// returned as the primary's revalidation would have made it (next at
// least storedFloor, no recycled IDs): below storedFloor, its next and its
// recycled IDs may be from before ZooKeeper lost writes, so IDs there may
// have been handed out since, and the advance skipped none of them. It refuses, with ErrAdvanceRefused and
// nothing written, what CheckAdvance refuses.
func (c *Client) Advance(ctx context.Context, name string, to, storedFloor, ceiling int64) (replaced, advanced state.State, err error) {
	markerGone, wrote := false, false
	err = c.locked(ctx, name, func(nd *node, attempt int) (bool, error) {
		old := nd.state
		if !wrote {
			if err := CheckAdvance(old, to); err != nil {
				return true, err
			}
		}
		epoch := c.Epoch()
		if epoch == 0 {
			epoch = c.probeEpoch(ctx)
		}
		trusted := old.Validated() && old.ZKEpoch == epoch && !markerGone
		floor := to
		if !trusted {
			floor = max(to, storedFloor)
		}
		st := old
		st.Next = clampNext(max(old.Next, floor), old.End)
		st.Ceiling = max(old.Ceiling, st.Next-1, min(ceiling, old.End))
		st.Recycled = nil
		st.ZKEpoch, st.Marker, st.PushFloor = epoch, newMarker(), st.Next
		if err := st.Validate(); err != nil {
			return true, err
		}
		var ops []zkclient.Op
		if trusted {
			ops = append(ops, zkclient.CheckOp(nd.path+"/"+old.Marker, 0))
		}
		set := len(ops)
		ops = append(ops, zkclient.SetOp(nd.path, st.Encode(), nd.version), c.createOp(ctx, KindSequenceChild, nd.path+"/"+st.Marker, nil, 0))
		for _, ch := range slices.Concat(nd.windows, nd.markers) {
			ops = append(ops, zkclient.DeleteOp(nd.path+"/"+ch, zkclient.AnyVersion))
		}
		res, err := c.zk.Multi(sent(ctx), ops...)
		c.stats.requests.Add(1)
		nd.valid = false // the child watch fires (or the read was stale)
		switch {
		case err == nil:
			landed := c.observe(res[set].Stat) == st.ZKEpoch
			if !wrote {
				// A state read in an epoch that turned out stale (this
				// client had not written since ZooKeeper changed leaders)
				// was not trusted after all.
				replaced, wrote = old, true
				if !trusted || !landed {
					replaced = revalidated(old, storedFloor)
				}
			}
			if landed {
				advanced = st
				return true, nil
			}
			// ZooKeeper changed epochs under us: the state is not
			// trusted any more; stamp it again in the epoch now known.
		case trusted && zkclient.FailedOp(err) == 0 && errors.Is(err, zkclient.ErrNoNode):
			markerGone = true // a state of another history or incarnation
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNodeExists),
			errors.Is(err, zkclient.ErrNotEmpty):
			// A take, a raise or a window landed first: read again.
			c.stats.conflicts.Add(1)
			nd.deleted = nil
			if attempt >= 3 {
				if err := retryDelay.Wait(ctx, attempt-3); err != nil {
					return true, err
				}
			}
		case zkclient.IsTransient(err):
			// The write may have landed: the next read tells (its
			// replaced state is then this write's, which skips nothing
			// more).
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return true, err
			}
		default:
			return true, c.zkError(name, err)
		}
		return false, nil
	})
	if err != nil {
		return replaced, state.State{}, err
	}
	return replaced, advanced, nil
}

// revalidated is untrusted state st as the primary's revalidation makes
// it: above everything the store covers (storedFloor), with no recycled
// IDs.
func revalidated(st state.State, storedFloor int64) state.State {
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

// Widen moves the end of sequence name's space up to w.End and its window
// slots up to w.Windows, for an operator: a bounded sequence that has used
// up its space, or is about to, goes on handing out IDs above its old end;
// a busier sequence gets more windows. Neither ever goes down (IDs up to
// the old end may have been handed out; and the store keeps the most of
// both, so a decrease would come back with a restore), and it refuses,
// with ErrAdvanceRefused and nothing written, a legacy counter (it has
// neither) and values out of range. A registration's settings simply
// change. The ceiling is not raised: the primary raises it (store first)
// once it sees the wider space. The durable store must already hold the
// new settings in the sequence's record, or a restore after a ZooKeeper
// loss would bring the sequence back with the old ones. It returns the
// state written (the one read when nothing had to change).
func (c *Client) Widen(ctx context.Context, name string, w Widening) (state.State, error) {
	return c.update(ctx, name, func(st *state.State) (bool, error) {
		if err := CheckWiden(*st, w); err != nil {
			return false, err
		}
		end, windows := max(st.End, w.End), max(st.Windows, w.Windows)
		if st.End == end && st.Windows == windows {
			return false, nil
		}
		st.End, st.Windows = end, windows
		if !st.Registered && w.Floor > st.Next {
			// IDs below Floor may have gone out in a lost history: skip
			// them, and refuse pushes of them without a recorded key
			// (state.State.PushFloor), as a revalidation does.
			skipTo(st, w.Floor)
		}
		return true, nil
	})
}

// CheckWiden says why a sequence in state st cannot be widened as w asks,
// or returns nil.
func CheckWiden(st state.State, w Widening) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s", st.Name, ErrAdvanceRefused, fmt.Sprintf(format, args...))
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
