package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A registration's birth (docs/design.md, "One lifecycle protocol", step
// 6): Initialise writes it Unconfirmed, the primary stores it, and
// Confirm stamps it for clients.

// Unconfirmed reports whether st is a birth the primary initialised
// (Initialise) and has not stamped yet: it has a marker and no epoch. The
// store may not know the new incarnation yet, so no client takes from it;
// the primary stamps it once the store holds the birth.
func Unconfirmed(st state.State) bool { return !st.Legacy && st.ZKEpoch == 0 && st.Marker != "" }

// Confirm stamps birth, the Unconfirmed state Initialise wrote, once the
// store has recorded the birth: with the epoch the birth landed in, and
// only while the znode holds it unchanged. Nothing can have been handed
// out of it then, so it keeps its next. A birth changed since, or read
// back in another epoch (a leader election since it was written: a
// restore from a copy may have brought it back after IDs went out of it
// in a lost history), is ErrChangedMeanwhile, nothing written; so is a
// stamp that lands in another epoch (clients refuse it). Either way the
// primary decides again, from the store.
func (k Keeper) Confirm(ctx context.Context, name string, birth state.State) (state.State, error) {
	c := k.c
	var out state.State
	err := c.locked(ctx, name, func(nd *node, attempt int) (bool, error) {
		if !Unconfirmed(nd.state) || !nd.state.Equal(birth) {
			return true, fmt.Errorf("sequence %q: %w: not the birth initialised", name, ErrChangedMeanwhile)
		}
		st := birth
		st.ZKEpoch = epochOf(nd.mzxid)
		if e := c.Epoch(); e != 0 && e != st.ZKEpoch {
			return true, fmt.Errorf("sequence %q: %w: ZooKeeper elected a leader since its birth", name, ErrChangedMeanwhile)
		}
		stat, err := c.cas(ctx, nd, st)
		switch {
		case err == nil:
			nd.state, nd.version = st, stat.Version
			if epochOf(stat.Mzxid) != st.ZKEpoch {
				return true, fmt.Errorf("sequence %q: %w: ZooKeeper elected a leader since its birth", name, ErrChangedMeanwhile)
			}
			out = st
			return true, nil
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, errMarkerGone):
			nd.valid = false // read again: the state decides
			return false, nil
		case zkclient.IsTransient(err):
			nd.valid = false
			return false, retryDelay.Wait(ctx, attempt)
		}
		return true, c.zkError(name, err)
	})
	return out, err
}
