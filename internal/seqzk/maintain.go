package seqzk

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Registration is what an operator asks for when creating a sequence. The
// zero value asks for the defaults.
type Registration struct {
	Start   int64 // first ID; 0 means state.DefaultStart
	End     int64 // last ID; 0 means state.MaxID
	Windows int   // window slots, about one per concurrent client; 0 for none
}

// Register creates the znode of sequence name holding a registration; the
// primary initialises it. The root must exist. It fails if the sequence
// exists.
func (c *Client) Register(ctx context.Context, name string, r Registration) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st := state.State{Name: name, Registered: true, Start: r.Start, End: r.End, Windows: r.Windows}
	if st.Start == 0 {
		st.Start = state.DefaultStart
	}
	if st.End == 0 {
		st.End = state.MaxID
	}
	if err := st.Validate(); err != nil {
		return err
	}
	_, err := c.write(ctx, c.createOp(ctx, KindSequence, c.Path(name), st.Encode(), 0))
	if errors.Is(err, zkclient.ErrNodeExists) {
		return fmt.Errorf("sequence %q %w", name, ErrExists)
	}
	if err != nil {
		return c.zkError(name, err)
	}
	return nil
}

// Raise moves the reserved ceiling of sequence name up to ceiling (capped at
// the end of the space; it never lowers it) and returns the new state. It
// keeps the state's ZooKeeper epoch stamp; a registration must first be
// initialised with Revalidate. Legacy counters have no ceiling and are
// refused.
//
// Raise is the primary's operation: it must be called only after the
// durable store has accepted ceiling, or invariant 2 (durable before usable)
// breaks. Tests use it to stand in for the primary. It retries conflicts
// with clients until ctx is done.
func (k Keeper) Raise(ctx context.Context, name string, ceiling int64) (state.State, error) {
	c := k.c
	return c.update(ctx, name, func(st *state.State) (bool, error) {
		if st.Legacy {
			return false, fmt.Errorf("sequence %q is a legacy 8-byte counter: it has no ceiling to raise", name)
		}
		if st.Registered {
			return false, fmt.Errorf("sequence %q is not initialised yet: the primary initialises it with Revalidate", name)
		}
		ceiling = min(ceiling, st.End)
		if ceiling <= st.Ceiling {
			return false, nil
		}
		st.Ceiling = ceiling
		return true, nil
	})
}

// ForwardLegacy moves the legacy 8-byte counter of sequence name up to at
// least to (it never lowers it) and returns the new state. The primary
// calls it after a ZooKeeper leader election, with the mark the store
// holds, in case the election followed a restore from an older copy. It
// retries conflicts with workers until ctx is done.
func (k Keeper) ForwardLegacy(ctx context.Context, name string, to int64) (state.State, error) {
	c := k.c
	return c.update(ctx, name, func(st *state.State) (bool, error) {
		if !st.Legacy {
			return false, fmt.Errorf("sequence %q is not a legacy 8-byte counter", name)
		}
		if to <= st.Next {
			return false, nil
		}
		st.Next = min(to, state.MaxLegacyCounter)
		return true, nil
	})
}

// reload reads nd afresh for the primary's read-modify-write loops. It
// reports retry after a connection error (having backed off), and an error
// when the loop must stop (ctx done, the znode missing or corrupt).
func (c *Client) reload(ctx context.Context, name string, nd *node, attempt int) (retry bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if _, err := c.load(ctx, name, nd, false); err != nil {
		if !zkclient.IsTransient(err) {
			return false, err
		}
		if err := retryDelay.Wait(ctx, attempt); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// Revalidate makes sequence name usable in the current ZooKeeper epoch and
// raises its ceiling; it is how the primary initialises, fast-forwards and
// restores sequences. See State.ZKEpoch for why.
//
// If the state is a registration, or is stamped with another epoch than the
// current one, ZooKeeper may have lost writes since it was validated, so:
// next moves up to at least floor (the primary passes the stored ceiling +
// 1, above every ID ever issued); the recycled list and every window are
// dropped, since their IDs may have been issued again since; and the
// current epoch is stamped. The IDs skipped are the price of the rule: at
// most one reserve per sequence per ZooKeeper leader election. A state
// already stamped with the current epoch keeps its next and recycled IDs.
// In both cases the ceiling then rises to ceiling (capped at the end of the
// space).
//
// Like Raise, it must be called only after the durable store holds
// ceiling. It retries until the stamp matches the epoch its write landed
// in, or ctx is done.
//
// It refuses a state the primary initialised and has not stamped yet
// (Unconfirmed): the store may not know that birth, and only the
// primary's stamp records it first.
func (k Keeper) Revalidate(ctx context.Context, name string, floor, ceiling int64) (state.State, error) {
	c := k.c
	return c.revalidate(ctx, name, floor, ceiling, false, nil, -1)
}

// Initialise is Revalidate for the primary's initialisation of a
// registration, the birth of a new incarnation of the name: the state is
// written only if the name's deletion record is still as guard says (the
// primary read it, and the store, to choose floor). If a delete of the name
// happened since, it fails with ErrChangedMeanwhile and writes nothing; the
// primary decides again.
//
// The state it writes is not validated (no epoch, see Unconfirmed): no
// client takes from it until the store has recorded the birth and the
// primary has stamped it (Confirm), so a name that handed out an ID is
// always one the store restores after a ZooKeeper loss. A state already
// initialised so is left as it is; a validated one is revalidated as by
// Revalidate.
func (k Keeper) Initialise(ctx context.Context, name string, floor, ceiling int64, guard Deletion) (state.State, error) {
	c := k.c
	return c.revalidate(ctx, name, floor, ceiling, false, &guard, 0)
}

// Restamp is the primary's Revalidate of the incarnation it planned for,
// the znode created at czxid (0: whichever), an Unconfirmed birth
// included (the primary stored it with the ceiling): a znode created since (a
// delete and a registration or a re-creation meanwhile) is
// ErrChangedMeanwhile, nothing written. With force it always moves next
// up to floor and drops recycled IDs and windows, even when the state
// carries the current epoch: the primary forces it for a znode whose
// creation zxid differs from the one the store recorded (deleted and
// re-created, possibly with old data) and for a state whose marker is
// gone.
func (k Keeper) Restamp(ctx context.Context, name string, czxid, floor, ceiling int64, force bool) (state.State, error) {
	c := k.c
	return c.revalidate(ctx, name, floor, ceiling, force, nil, czxid)
}

// revalidate is Revalidate (czxid -1: an Unconfirmed state is refused),
// Initialise (with guard: it writes one) and Restamp (with czxid, and
// force: it stamps one): under the node's lock it plans the state (planStamp)
// and writes it, a stamp by transaction (writeStamp) and a raise by
// compare-and-set, until it lands in the epoch it was stamped for. It
// rides out conflicts and connection errors, and a state whose marker is
// gone is stamped anew.
func (c *Client) revalidate(ctx context.Context, name string, floor, ceiling int64, force bool, guard *Deletion, czxid int64) (state.State, error) {
	var out state.State
	err := c.locked(ctx, name, func(nd *node, attempt int) (bool, error) {
		switch {
		case guard != nil && Unconfirmed(nd.state):
			out = nd.state // initialised already: a stamp waits for the store
			return true, nil
		case czxid < 0 && Unconfirmed(nd.state):
			return true, fmt.Errorf("sequence %q: %w: the primary initialised it and stamps it once its store has recorded the birth", name, ErrChangedMeanwhile)
		}
		st, stamp, err := c.planStamp(ctx, name, nd, floor, ceiling, force, czxid)
		if err != nil {
			return true, err
		}
		if guard != nil && nd.state.Registered {
			st.ZKEpoch = 0 // a birth: Unconfirmed until the store records it
		}
		if st.Equal(nd.state) {
			out = st
			return true, nil // already valid in this epoch and high enough
		}
		if err := st.Validate(); err != nil {
			return true, err
		}
		var stat *zkclient.Stat
		if stamp {
			stat, err = c.writeStamp(ctx, name, nd, st, guard)
		} else {
			stat, err = c.cas(ctx, nd, st)
		}
		switch {
		case err == nil:
			landed := epochOf(stat.Mzxid) // write observed it
			nd.state, nd.version = st, stat.Version
			if stamp {
				nd.valid = false // the child watch fired
			}
			if landed == st.ZKEpoch || Unconfirmed(st) {
				out = st
				return true, nil
			}
			force = false // next is already past floor
			// ZooKeeper changed epochs under us (or our guess was from
			// before a restore): validate again in the epoch we now know.
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNodeExists),
			errors.Is(err, zkclient.ErrNotEmpty), errors.Is(err, errMarkerGone):
			// Lost to a client's take, or the children changed meanwhile:
			// read again, listing the children afresh. Back off once it
			// keeps happening, so that a transaction that cannot succeed
			// never spins hot.
			nd.valid, nd.deleted = false, nil
			if errors.Is(err, errMarkerGone) {
				force = true // the state is not of this history: stamp it
			}
			if attempt >= 3 {
				if err := retryDelay.Wait(ctx, attempt-3); err != nil {
					return true, err
				}
			}
		case errors.Is(err, ErrChangedMeanwhile):
			return true, err
		case errors.As(err, new(*unvalidatedError)):
			return true, fmt.Errorf("sequence %q: %w", name, err)
		case zkclient.IsTransient(err):
			nd.valid = false
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return true, err
			}
		default:
			return true, c.zkError(name, err)
		}
		return false, nil
	})
	if err != nil {
		return state.State{}, err
	}
	return out, nil
}

// planStamp decides, from nd's state just read, the state revalidate
// writes and whether it is a stamp. It refuses a legacy counter, and a
// znode created again since czxid (when czxid > 0) with
// ErrChangedMeanwhile. It stamps when forced, for a registration, and for a
// state not validated in the current epoch: next moves up to floor (a
// registration starts over from its settings), recycled IDs are dropped,
// and the state gets the epoch, a new marker and a push floor at next. The
// ceiling is raised to ceiling, within the space.
func (c *Client) planStamp(ctx context.Context, name string, nd *node, floor, ceiling int64, force bool, czxid int64) (state.State, bool, error) {
	st := nd.state
	if st.Legacy {
		return st, false, fmt.Errorf("sequence %q is a legacy 8-byte counter: it has no state to validate", name)
	}
	epoch := c.Epoch()
	if epoch == 0 {
		epoch = c.probeEpoch(ctx)
	}
	if czxid > 0 && nd.czxid != czxid {
		// Deleted and created again since the plan was made (a
		// registration, say: a birth, which only Initialise makes,
		// guarded by the deletion record). The floor planned for the
		// old incarnation proves nothing of the IDs handed out since;
		// the watcher reports the new one.
		return st, false, fmt.Errorf("sequence %q: %w: created again since its plan was made", name, ErrChangedMeanwhile)
	}
	stamp := force || st.Registered || !st.Validated() || st.ZKEpoch != epoch
	if stamp {
		next := st.Next
		if st.Registered {
			next = st.Start
			st = state.State{Name: st.Name, Start: st.Start, End: st.End, Windows: st.Windows}
		}
		st.Next = next
		skipTo(&st, floor) // PushFloor: next, or the floor past the end
		st.Recycled = nil
		st.ZKEpoch = epoch
		st.Marker = newMarker()
	}
	st.Ceiling = max(st.Ceiling, min(ceiling, st.End))
	return st, stamp, nil
}

// writeStamp writes the stamped state st over nd's state in one
// transaction: the new state, its new marker, and the removal of every
// window and older marker (their IDs and writes may belong to a lost
// history). The children come from the load just made, which lists them
// afresh after any reconnect or child event. No marker check: next moves to
// at least floor, above everything the store covers, whatever history this
// lands in. With guard, a registration's stamp (a birth) also requires the
// name's deletion record to be as guard read it, and fails with
// ErrChangedMeanwhile if it changed.
func (c *Client) writeStamp(ctx context.Context, name string, nd *node, st state.State, guard *Deletion) (*zkclient.Stat, error) {
	h := Holding{Name: name, Exists: true, State: nd.state, Version: nd.version, Children: slices.Concat(nd.windows, nd.markers)}
	ops := c.changeOps(ctx, h, Change{State: &st})
	unguarded := len(ops)
	guarded := guard != nil && nd.state.Registered
	if guarded {
		ops = append(ops, c.guardOps(name, *guard)...)
	}
	res, err := c.write(ctx, ops...)
	if err == nil {
		return res[0].Stat, nil
	}
	if guarded && zkclient.FailedOp(err) >= unguarded {
		return nil, fmt.Errorf("sequence %q: %w: its deletion record changed after it was read", name, ErrChangedMeanwhile)
	}
	return nil, err
}

// newMarker returns a fresh marker name (see State.Marker).
func newMarker() string {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic("sequence: crypto/rand failed: " + err.Error())
	}
	return state.MarkerPrefix + hex.EncodeToString(b[:])
}

// clampNext keeps next within the space: at most end+1, or MaxID when end
// is MaxID (the space is then used up).
func clampNext(next, end int64) int64 {
	if end == state.MaxID {
		return min(next, state.MaxID)
	}
	return min(next, end+1)
}

// probeEpoch learns the current ZooKeeper epoch with a write (the empty data
// of the root znode, which nothing else uses), or returns 0.
func (c *Client) probeEpoch(ctx context.Context) int64 {
	e, _ := c.touchRoot(ctx)
	return e
}

// touchRoot writes the root's empty data and returns the epoch it landed
// in.
func (c *Client) touchRoot(ctx context.Context) (int64, error) {
	res, err := c.write(ctx, zkclient.SetOp(c.opts.Root, nil, zkclient.AnyVersion))
	if err != nil {
		return 0, err
	}
	return epochOf(res[0].Stat.Mzxid), nil
}

// CurrentEpoch returns the current ZooKeeper epoch, learned by writing the
// (unused, empty) data of the root znode: only a write reveals the zxid of
// now. The primary calls it periodically to notice leader elections. A
// missing root (ZooKeeper lost its data) is created first, so that an
// operator's verify and restore work in the case they exist for.
func (m Meta) CurrentEpoch(ctx context.Context) (int64, error) {
	c := m.c
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	e, err := c.touchRoot(ctx)
	if errors.Is(err, zkclient.ErrNoNode) {
		if err := c.ensureRoot(ctx); err != nil {
			return 0, fmt.Errorf("probe zookeeper epoch: %w", err)
		}
		e, err = c.touchRoot(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("probe zookeeper epoch at %s: %w", c.opts.Root, err)
	}
	return e, nil
}

// update applies change to a freshly read state of sequence name and writes
// it back by compare-and-set, retrying conflicts. change reports whether it
// changed anything.
func (c *Client) update(ctx context.Context, name string, change func(*state.State) (bool, error)) (state.State, error) {
	var out state.State
	err := c.locked(ctx, name, func(nd *node, attempt int) (bool, error) {
		st := nd.state
		changed, err := change(&st)
		if err != nil || !changed {
			out = nd.state
			return true, err
		}
		if err := st.Validate(); err != nil {
			return true, err
		}
		stat, err := c.cas(ctx, nd, st)
		switch {
		case err == nil:
			nd.state, nd.version = st, stat.Version
			out = st
			return true, nil
		case errors.Is(err, errMarkerGone):
			return true, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		case errors.As(err, new(*unvalidatedError)):
			return true, fmt.Errorf("sequence %q: %w", name, err)
		case errors.Is(err, zkclient.ErrBadVersion):
			return false, nil
		case zkclient.IsTransient(err):
			// A raise is idempotent: re-reading shows whether it landed.
			return false, retryDelay.Wait(ctx, attempt)
		}
		return true, c.zkError(name, err)
	})
	if err != nil && out.Name == "" {
		return state.State{}, err
	}
	return out, err
}

// locked is the read-decide-write loop of the writes that act on a whole
// sequence (the primary's, the operators'): under the node's lock, it
// loads sequence name afresh (riding out connection errors) and calls step,
// again and again until step is done or fails. step gets the attempt
// number, for its backoff; a step that lost a race returns false, nil.
func (c *Client) locked(ctx context.Context, name string, step func(nd *node, attempt int) (done bool, err error)) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if retry, err := c.reload(ctx, name, nd, attempt); retry {
			continue
		} else if err != nil {
			return err
		}
		if done, err := step(nd, attempt); done || err != nil {
			return err
		}
	}
}

// skipTo moves st's next up to floor (within its space) when it is below
// it, with the ceiling at least next-1 and no push below the new next
// without a recorded key (state.State.PushFloor): the IDs skipped may have
// gone out in a lost history. A revalidation and a widen past a lost one
// both skip so.
func skipTo(st *state.State, floor int64) {
	st.Next = clampNext(max(st.Next, floor), st.End)
	st.Ceiling = max(st.Ceiling, st.Next-1)
	st.PushFloor = max(st.PushFloor, st.Next, floor) // above next only past the end
}
