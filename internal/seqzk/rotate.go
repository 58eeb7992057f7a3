package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
func (c *Client) Rotate(ctx context.Context, name string) (state.State, int64, error) {
	if err := ValidateName(name); err != nil {
		return state.State{}, 0, err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if retry, err := c.reload(ctx, name, nd, attempt); retry {
			continue
		} else if err != nil {
			return state.State{}, 0, err
		}
		st := nd.state
		if st.Legacy || !st.Validated() {
			return state.State{}, 0, fmt.Errorf("sequence %q: only a validated sequence can be rotated", name)
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
			return state.State{}, 0, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		}
		ops = append(ops, zkclient.DeleteOp(nd.path, nd.version))
		ops = append(ops, c.createOps(st)...)
		_, err := c.zk.Multi(sent(ctx), ops...)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			nd.valid, nd.deleted = false, nil
			ok, stat, err := c.zk.Exists(ctx, nd.path)
			c.stats.requests.Add(1)
			if err != nil || !ok {
				return st, 0, nil // the caller learns the czxid from its next read
			}
			c.observe(stat)
			return st, stat.Czxid, nil
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNotEmpty):
			c.stats.conflicts.Add(1)
			nd.valid, nd.deleted = false, nil
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return state.State{}, 0, err
			}
		case zkclient.IsTransient(err):
			nd.valid = false
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return state.State{}, 0, err
			}
		default:
			return state.State{}, 0, c.zkError(name, err)
		}
	}
}

// OpenWindow carves the next size fresh IDs of sequence name (fewer if the
// ceiling is nearer) into a new window znode, atomically with advancing the
// sequence's next, and returns the window's name. Windows only ever hold IDs
// below the durable ceiling, so a window's own ceiling is its end. It
// returns errAtCeiling wrapped with the name when nothing is left to carve.
func (c *Client) OpenWindow(ctx context.Context, name string, size int64) (string, error) {
	if size < 1 {
		return "", fmt.Errorf("sequence %q: window size %d must be at least 1", name, size)
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if _, err := c.load(ctx, name, nd, false); err != nil {
			return "", err
		}
		st := nd.state
		if st.Legacy || !st.Validated() {
			return "", fmt.Errorf("sequence %q: windows need an initialised, validated, non-legacy sequence", name)
		}
		if nd.version < 0 || nd.version >= state.VersionLimit {
			return "", fmt.Errorf("sequence %q: znode version %d is at the limit; rotate it first", name, nd.version)
		}
		k := min(size, st.Fresh())
		if k < 1 {
			return "", fmt.Errorf("sequence %q: %w %d: no fresh IDs to open a window with", name, errAtCeiling, st.Ceiling)
		}
		w := state.State{Name: name, Start: st.Next, Next: st.Next, Ceiling: st.Next + k - 1, End: st.Next + k - 1,
			ZKEpoch: st.ZKEpoch, Marker: st.Marker}
		st.Next += k
		// The marker check keeps a carve prepared from a state of a lost
		// history (or an earlier incarnation) from landing.
		res, err := c.zk.Multi(sent(ctx),
			zkclient.CheckOp(nd.path+"/"+st.Marker, 0),
			zkclient.CreateOp(nd.path+"/"+state.WindowPrefix, w.Encode(), zkclient.Sequential),
			zkclient.SetOp(nd.path, st.Encode(), nd.version),
		)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			c.observe(res[2].Stat)
			nd.valid = false // the child watch fired; re-read next time
			return strings.TrimPrefix(res[1].Path, nd.path+"/"), nil
		case errors.Is(err, zkclient.ErrBadVersion):
			c.stats.conflicts.Add(1)
		case errors.Is(err, zkclient.ErrNoNode):
			return "", fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		default:
			// A lost reply may leave a window created: harmless, its IDs
			// are below the ceiling and taken from the sequence's next.
			return "", c.zkError(name, err)
		}
	}
}

// PruneWindows deletes the windows of sequence name that have handed out
// every ID, or whose data version reached maxVersion (a busy window nearing
// ZooKeeper's int32 version wrap: the IDs it still holds are lost, at most
// one window's worth), and returns how many windows remain open.
func (c *Client) PruneWindows(ctx context.Context, name string, maxVersion int32) (int, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	s := c.zk.Session()
	children, _, err := s.Children(ctx, c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return 0, c.zkError(name, err)
	}
	open := 0
	for _, w := range childrenWith(children, state.WindowPrefix) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		p := c.Path(name) + "/" + w
		data, stat, err := s.Get(ctx, p)
		c.stats.requests.Add(1)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, c.zkError(name, err)
		}
		st, err := state.ParseState(name+"/"+w, data)
		if err != nil {
			return 0, err
		}
		if st.Available() > 0 && stat.Version < maxVersion {
			open++
			continue
		}
		err = s.Delete(sent(ctx), p, stat.Version)
		c.stats.requests.Add(1)
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) && !errors.Is(err, zkclient.ErrBadVersion) {
			return 0, c.zkError(name, err)
		}
	}
	return open, nil
}
