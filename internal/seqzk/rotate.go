package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Rotate moves sequence name onto a fresh znode, so that its data version
// restarts at 0, far from the int32 wrap (see state.VersionLimit). In one
// transaction it deletes the znode at the version read (with its windows
// and marker) and creates it again with the same state under a new marker.
// Recycled IDs are kept; the IDs that open windows had not handed out are
// lost (at most one window's worth each), since window names restart with
// the new znode. Writes prepared against the old znode fail on its marker.
// It returns the new state and the new znode's creation zxid.
//
// Rotate is the primary's operation; the state must be validated.
func (k Keeper) Rotate(ctx context.Context, name string) (state.State, int64, error) {
	c := k.c
	var out state.State
	var czxid int64
	err := c.locked(ctx, name, func(nd *node, attempt int) (bool, error) {
		st := nd.state
		if st.Legacy || !st.Validated() {
			return true, fmt.Errorf("sequence %q: only a validated sequence can be rotated", name)
		}
		old := st.Marker
		st.Marker = newMarker()
		var ops []zkclient.Op
		for _, w := range nd.windows {
			// Unconditional on purpose: whatever a window holds goes.
			ops = append(ops, zkclient.DeleteOp(nd.path+"/"+w, zkclient.AnyVersion))
		}
		for _, m := range nd.markers {
			ops = append(ops, zkclient.DeleteOp(nd.path+"/"+m, 0))
		}
		if !slices.Contains(nd.markers, old) {
			return true, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		}
		ops = append(ops, zkclient.DeleteOp(nd.path, nd.version))
		ops = append(ops, c.changeOps(ctx, Holding{Name: name}, Change{State: &st})...)
		_, err := c.write(ctx, ops...)
		switch {
		case err == nil:
			nd.valid, nd.deleted = false, nil
			out = st
			ok, stat, err := c.zk.Session().Exists(ctx, nd.path)
			c.stats.requests.Add(1)
			if err != nil || !ok {
				return true, nil // the caller learns the czxid from its next read
			}
			c.observe(stat)
			czxid = stat.Czxid
			return true, nil
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNotEmpty):
			nd.valid, nd.deleted = false, nil
			return false, retryDelay.Wait(ctx, attempt)
		case zkclient.IsTransient(err):
			nd.valid = false
			return false, retryDelay.Wait(ctx, attempt)
		}
		return true, c.zkError(name, err)
	})
	if err != nil {
		return state.State{}, 0, err
	}
	return out, czxid, nil
}
