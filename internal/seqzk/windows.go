package seqzk

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Windows (docs/design.md, "Windows") split a hot sequence
// into disjoint sub-ranges, each a znode of its own, so that clients spread
// their compare-and-sets over several znodes instead of contending on one.
//
// A sequence configured with State.Windows = N has N slots. A window's name
// says its slot: "w-3-0000000042" is in slot 3 (ZooKeeper appends the
// sequence number, so a slot's windows sort oldest first). A client sticks
// to one slot and takes from its oldest window that has IDs left. Before
// that window runs dry (fewer than half its IDs left) the client carves
// the slot's next window, sized from the demand the window saw, so that:
//
//   - a window lasts about WindowLifetime from the first minute, not only
//     once the reserve has grown (the demand is measured per window, by
//     ZooKeeper's own clock: IDs handed out over the window's age);
//   - when it is used up its clients move on to the slot's next window at
//     once, without waiting for the primary, and the clients of the other
//     slots stay where they are.
//
// Carving is a take from the sequence: fresh IDs below the ceiling the
// store already holds, atomically with advancing the sequence's next, in a
// transaction that checks the sequence's marker. Any client may do it; the
// primary does it too for slots that have no open window (TopUpWindows).
// The IDs a window holds are never reissued: a window's next only grows,
// and the windows are dropped (their IDs lost) whenever the sequence is
// validated again, rotated or deleted.

// WindowLifetime is how long a window is sized to last at the demand its
// slot saw. Longer means fewer carves (each makes every client of the
// sequence read its list of windows again) but more IDs held in windows,
// which a ZooKeeper leader election or a rotation drops.
const WindowLifetime = 10 * time.Second

// windowGrowth bounds how many times larger than its predecessor a window
// is carved: the demand of a young window is measured over a few
// milliseconds, and a client that takes large batches can overstate it.
const windowGrowth = 16

// slotPrefix returns the name prefix of the windows of slot k; ZooKeeper
// appends a 10-digit sequence number.
func slotPrefix(k int) string { return state.WindowPrefix + strconv.Itoa(k) + "-" }

// windowSlot returns the slot of the window named name. A window opened
// outside the slots by OpenWindow ("w-0000000042") is a slot of its own,
// numbered past every real slot: it is used, never refilled.
func windowSlot(name string) int {
	rest := strings.TrimPrefix(name, state.WindowPrefix)
	if k, _, ok := strings.Cut(rest, "-"); ok {
		if n, err := strconv.Atoi(k); err == nil && n >= 0 && n < state.MaxWindows {
			return n
		}
	}
	n, _ := strconv.Atoi(rest)
	return state.MaxWindows + n
}

// windowSize returns the size of a new window of a sequence with slots
// slots and fresh IDs left below its ceiling, for a slot whose demand is
// rate IDs per second (0 when none has been seen) and whose previous
// window held prev IDs (0 for none). It aims at WindowLifetime of demand,
// and takes at most a fair share (fresh/slots) of what is left, so that
// the other slots can still be refilled before the primary raises the
// ceiling. With no demand seen it takes half a fair share. Either way at
// most windowGrowth times prev.
func windowSize(rate float64, prev, fresh int64, slots int) int64 {
	share := max(1, fresh/int64(max(slots, 1)))
	want := float64(share) / 2
	if rate > 0 {
		want = min(rate*WindowLifetime.Seconds(), float64(share))
	}
	if prev > 0 {
		want = min(want, float64(prev)*windowGrowth)
	}
	return max(1, int64(math.Ceil(want)))
}

// windowRate is the demand a window has seen: the IDs handed out from it
// over its age, both times from ZooKeeper's clock (creation and last
// change), so no client clock is involved.
func windowRate(st state.State, stat *zkclient.Stat) float64 {
	used := st.Next - st.Start
	if stat == nil || used <= 0 {
		return 0
	}
	return float64(used) * 1000 / float64(max(stat.Mtime-stat.Ctime, 1))
}

// refillDue reports whether a take that left window st with its IDs and
// handed out took of them should try to carve the slot's next window: when
// it took the window below half, and again each time what is left halves
// (a first try can fail at the ceiling; the primary raises it meanwhile).
func refillDue(st state.State, took int64) bool {
	size := st.End - st.Start + 1
	left := st.Fresh()
	before := left + took
	return 2*left < size && (2*before >= size || bits.Len64(uint64(left)) < bits.Len64(uint64(before)))
}

// Stickiness. A client moves to another slot after windowConflicts lost
// compare-and-sets on one window (the first write to a window it has not
// used for a while fails on its stale cached version whether or not
// anyone else uses it, so one is not contention): to the quietest slot the
// first time in a take, to the next slot after that, at most windowMoves
// times per take; then it stays on the window it lands on however
// contended (more clients than windows must share).
const (
	windowConflicts = 2
	windowMoves     = 3
)

// windowOutcome is what takeWindow did.
type windowOutcome int

const (
	windowNone     windowOutcome = iota // no window had IDs: take from the sequence
	windowTaken                         // IDs taken
	windowRefilled                      // the client's slot was used up and now has a new window: look again
	windowStale                         // a window in the list is gone: read the list again
)

// takeWindow takes up to n IDs from the windows of sequence name (windows
// and slots as the sequence node listed and configured them), starting
// with the slot this client last took from without contention, and carves
// that slot's next window when it is due, or when the slot is used up.
func (c *Client) takeWindow(ctx context.Context, name string, seq *node, slots int, windows []string, n int64) (state.Ranges, windowOutcome, error) {
	// Performance: start at the slot this client last took from without
	// contention; after contention (and at the first take) move to the
	// slot written longest ago. Clients then settle on distinct slots
	// (one compare-and-set per take) instead of colliding at random on
	// every take, and a slot keeps its clients when its window is
	// replaced. A slot busy
	// with another goroutine of this client is skipped the same way, so
	// one client still uses several windows at once.
	preferred := int(seq.preferred.Load()) - 1
	k := -1
	if preferred >= 0 {
		k = c.freeSlot(name, windows, preferred)
	}
	if k < 0 {
		if c.openEmptySlot(ctx, name, seq, slots, preferred) {
			return nil, windowRefilled, nil
		}
		if len(windows) == 0 {
			return nil, windowNone, nil
		}
		k = c.quietSlot(ctx, name, windows)
	}
	home := windowSlot(windows[k])
	limit, moves := windowConflicts, 0
	for tried := 0; tried < len(windows); {
		w := windows[k]
		slot := windowSlot(w)
		last := k+1 == len(windows) || windowSlot(windows[k+1]) != slot
		got, t, err := c.takeNode(ctx, name, c.window(name, w), n, limit)
		switch {
		case err == nil:
			if t.conflicts == 0 || t.conflicts == 1 && slot != preferred {
				seq.preferred.Store(int64(slot) + 1)
			} else {
				seq.preferred.Store(0)
			}
			if slot < slots && last && refillDue(t.after, got.Count()) {
				c.refill(ctx, name, slot, w, windowRate(t.after, t.stat), t.after.End-t.after.Start+1)
			}
			return got, windowTaken, nil
		case errors.Is(err, errContended):
			seq.preferred.Store(0)
			preferred = -1
			if c.openEmptySlot(ctx, name, seq, slots, -1) {
				return nil, windowRefilled, nil
			}
			if moves++; moves == windowMoves {
				limit = 0
			}
			if moves == 1 {
				k = c.quietSlot(ctx, name, windows)
			} else {
				// Contended again: every slot may be busy (more clients
				// than slots); try the next without reading them all.
				k = nextGroup(windows, k)
			}
			home = windowSlot(windows[k])
			continue
		case errors.Is(err, ErrUnknownSequence):
			c.forget(c.Path(name) + "/" + w) // pruned or retired
			return nil, windowStale, nil
		case errors.Is(err, state.ErrExhausted):
			// The slot's window is used up and the list has no next one
			// (carved since, or the tries found the ceiling): find or
			// carve it rather than move to another client's slot.
			if slot == home && slot < slots && last && c.refill(ctx, name, slot, w, 0, c.seenSize(name, w)) {
				return nil, windowRefilled, nil
			}
		case errors.Is(err, errAtCeiling), errors.As(err, new(*unvalidatedError)):
			// The primary will revalidate, rotate or drop it.
		default:
			return nil, windowTaken, err
		}
		k = (k + 1) % len(windows)
		tried++
	}
	return nil, windowNone, nil
}

// seenSize returns the size of window w of sequence name as this client
// last saw it, 0 if it has not seen it.
func (c *Client) seenSize(name, w string) int64 {
	wn := c.window(name, w)
	wn.mu.Lock()
	defer wn.mu.Unlock()
	if !wn.valid {
		return 0
	}
	return wn.state.End - wn.state.Start + 1
}

// refill carves the next window of slot of sequence name, after window
// last ("" for the slot's first), unless the slot has one already, and
// reports whether the slot has a window after last now. rate is the demand last saw (0: not known) and
// prev its size. In the same transaction it deletes the slot's windows up
// to last that this client saw used up. It is best effort: a refill that
// fails is tried again when the window's remaining IDs halve once more or
// it is used up, and the primary tops up slots left with no open window.
func (c *Client) refill(ctx context.Context, name string, slot int, last string, rate float64, prev int64) bool {
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; attempt < 3; attempt++ {
		if !nd.usable(c.zk.Connection()) {
			if _, err := c.load(ctx, name, nd, false); err != nil {
				return false
			}
		}
		st := nd.state
		var retire []zkclient.Op
		var retired []string
		for _, w := range nd.windows {
			if windowSlot(w) != slot {
				continue
			}
			if w > last {
				return true // carved already, by another client or goroutine
			}
			if v, ok := c.usedUp(name, w); ok && attempt == 0 {
				retire = append(retire, zkclient.DeleteOp(nd.path+"/"+w, v))
				retired = append(retired, w)
			}
		}
		if st.Legacy || st.Registered || !st.Validated() || len(st.Recycled) > 0 || slot >= st.Windows ||
			nd.version < 0 || nd.version >= state.VersionLimit {
			return false
		}
		if st.Fresh() == 0 {
			// The cache may predate a raise (the primary's writes do not
			// void it): read once more, then leave it to the primary.
			if attempt > 0 {
				return false
			}
			nd.valid = false
			continue
		}
		size := windowSize(rate, prev, st.Fresh(), st.Windows)
		w := state.State{Name: name, Start: st.Next, Next: st.Next, Ceiling: st.Next + size - 1, End: st.Next + size - 1,
			ZKEpoch: st.ZKEpoch, Marker: st.Marker}
		st.Next += size
		ops := append([]zkclient.Op{
			zkclient.CheckOp(nd.path+"/"+st.Marker, 0),
			zkclient.SetOp(nd.path, st.Encode(), nd.version),
			c.createOp(ctx, KindSequenceChild, nd.path+"/"+slotPrefix(slot), w.Encode(), zkclient.Sequential),
		}, retire...)
		res, err := c.write(ctx, ops...)
		switch {
		case err == nil:
			// The child watch fired: the node is read again before the
			// next write from it. Until then its list of windows (which
			// takeOnce may use) is kept true to this change.
			nd.valid = false
			nd.state, nd.version = st, res[1].Stat.Version
			nd.windows = slices.DeleteFunc(slices.Clone(nd.windows), func(w string) bool { return slices.Contains(retired, w) })
			nd.windows = append(nd.windows, strings.TrimPrefix(res[2].Path, nd.path+"/"))
			slices.Sort(nd.windows)
			for _, r := range retired {
				c.forget(nd.path + "/" + r)
			}
			return true
		case errors.Is(err, zkclient.ErrBadVersion) && zkclient.FailedOp(err) == 1:
			nd.valid = false // a take, a raise or another carve: read again
		case zkclient.FailedOp(err) >= 3:
			// A window to retire is gone already (the primary pruned it):
			// carve without retiring.
		default:
			// The marker is gone (the primary validates the sequence
			// again) or the connection failed; if the transaction landed,
			// its IDs sit in a window and are never reissued.
			nd.valid = false
			return false
		}
	}
	return false
}

// usedUp reports whether this client saw window w of sequence name with
// every ID handed out, and at which version: a used-up window is never
// written again, so it can be deleted at that version.
func (c *Client) usedUp(name, w string) (int32, bool) {
	wn := c.window(name, w)
	if !wn.mu.TryLock() {
		return 0, false
	}
	defer wn.mu.Unlock()
	if !wn.valid || wn.state.Fresh() > 0 || len(wn.state.Recycled) > 0 {
		return 0, false
	}
	return wn.version, true
}

// forget drops the cached node of a znode that is gone (a retired or
// pruned window), so that a long-lived client does not keep one node per
// window it ever used.
func (c *Client) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.nodes, path)
}
