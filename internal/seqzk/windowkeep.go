package seqzk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// OpenWindow carves the next size fresh IDs of sequence name (fewer if the
// ceiling is nearer) into a new window znode, atomically with advancing the
// sequence's next, and returns the window's name. Windows only ever hold IDs
// below the durable ceiling, so a window's own ceiling is its end. It
// returns errAtCeiling wrapped with the name when nothing is left to carve.
func (k Keeper) OpenWindow(ctx context.Context, name string, size int64) (string, error) {
	c := k.c
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
		res, err := c.write(ctx,
			zkclient.CheckOp(nd.path+"/"+st.Marker, 0),
			c.createOp(ctx, KindSequenceChild, nd.path+"/"+state.WindowPrefix, w.Encode(), zkclient.Sequential),
			zkclient.SetOp(nd.path, st.Encode(), nd.version),
		)
		switch {
		case err == nil:
			nd.valid = false // the child watch fired; re-read next time
			return strings.TrimPrefix(res[1].Path, nd.path+"/"), nil
		case errors.Is(err, zkclient.ErrBadVersion):
			// Lost to another writer: read again.
		case errors.Is(err, zkclient.ErrNoNode):
			return "", fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		default:
			// A lost reply may leave a window created: harmless, its IDs
			// are below the ceiling and taken from the sequence's next.
			return "", c.zkError(name, err)
		}
	}
}

// openWindow is one window as readWindows read it.
type openWindow struct {
	name  string
	slot  int
	state state.State
	stat  *zkclient.Stat
}

// readWindows lists the windows of sequence name and reads them, a few at
// a time (go-zookeeper pipelines the reads on the one connection). A
// window deleted between the listing and its read is left out.
func (c *Client) readWindows(ctx context.Context, name string) ([]openWindow, error) {
	s := c.zk.Session()
	children, _, err := s.Children(ctx, c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return nil, c.zkError(name, err)
	}
	names := childrenWith(children, state.WindowPrefix)
	out := make([]openWindow, len(names))
	errs := make([]error, len(names))
	parallel.Each(len(names), 8, func(i int) {
		w := names[i]
		data, stat, err := s.Get(ctx, c.Path(name)+"/"+w)
		c.stats.requests.Add(1)
		switch {
		case errors.Is(err, zkclient.ErrNoNode):
			return // pruned meanwhile
		case err != nil:
			errs[i] = c.zkError(name, err)
			return
		}
		st, err := state.ParseState(name+"/"+w, data)
		if err != nil {
			errs[i] = err
			return
		}
		out[i] = openWindow{name: w, slot: windowSlot(w), state: st, stat: stat}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	read := out[:0]
	for _, w := range out {
		if w.stat != nil {
			read = append(read, w)
		}
	}
	return read, nil
}

// prune deletes the windows of ws that have handed out every ID, or whose
// data version reached maxVersion (a busy window nearing ZooKeeper's int32
// version wrap: the IDs it still holds are lost, at most one window's
// worth), each at the version read. It returns the windows left open and
// the newest one pruned in each slot.
func (c *Client) prune(ctx context.Context, name string, ws []openWindow, maxVersion int32) (open []openWindow, gone map[int]openWindow, err error) {
	gone = make(map[int]openWindow)
	for _, w := range ws {
		if w.state.Available() > 0 && w.stat.Version < maxVersion {
			open = append(open, w)
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		_, err := c.write(ctx, zkclient.DeleteOp(c.Path(name)+"/"+w.name, w.stat.Version))
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) && !errors.Is(err, zkclient.ErrBadVersion) {
			return nil, nil, c.zkError(name, err)
		}
		c.forget(c.Path(name) + "/" + w.name)
		if w.name > gone[w.slot].name {
			gone[w.slot] = w
		}
	}
	return open, gone, nil
}

// PruneWindows deletes the windows of sequence name that have handed out
// every ID, or whose data version reached maxVersion (a busy window nearing
// ZooKeeper's int32 version wrap: the IDs it still holds are lost, at most
// one window's worth), and returns how many windows remain open.
func (k Keeper) PruneWindows(ctx context.Context, name string, maxVersion int32) (int, error) {
	c := k.c
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	ws, err := c.readWindows(ctx, name)
	if err != nil {
		return 0, err
	}
	open, _, err := c.prune(ctx, name, ws, maxVersion)
	return len(open), err
}

// TopUpWindows keeps the windows of sequence name: it prunes them as
// PruneWindows does, then opens a window in every slot (0 to
// State.Windows-1) that has none open, all in one transaction, and returns
// how many IDs it carved. A new window is sized (windowSize) from the
// demand its slot's last window saw; a slot with no history gets an even
// share of demand, the IDs per second the whole sequence sees (0 when not
// known). Clients refill their slots themselves before they run dry (see
// the package's windows), so this is for new and revalidated sequences and
// for slots whose clients found the ceiling when they tried.
//
// It carves only fresh IDs below the ceiling ZooKeeper holds, which the
// store covers, so it needs no store write of its own. It retries
// conflicts with clients until ctx is done; nothing fresh to carve is not
// an error (the next raise tops the slots up).
func (k Keeper) TopUpWindows(ctx context.Context, name string, maxVersion int32, demand float64) (int64, error) {
	c := k.c
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	nd := c.node(c.Path(name))
	for attempt := 0; ; attempt++ {
		ws, err := c.readWindows(ctx, name)
		if err != nil {
			return 0, err
		}
		open, gone, err := c.prune(ctx, name, ws, maxVersion)
		if err != nil {
			return 0, err
		}
		nd.mu.Lock()
		carved, retry, err := c.carveSlots(ctx, name, nd, ws, open, gone, demand)
		nd.mu.Unlock()
		if !retry {
			return carved, err
		}
		if attempt >= 3 {
			if err := retryDelay.Wait(ctx, attempt-3); err != nil {
				return 0, err
			}
		}
	}
}

// carveSlots opens a window in every slot of sequence name without one in
// open, in one transaction. ws are the windows read before, gone the
// newest pruned window of each slot. The caller holds nd.mu. It reports
// retry when the sequence changed meanwhile.
func (c *Client) carveSlots(ctx context.Context, name string, nd *node, ws, open []openWindow, gone map[int]openWindow, demand float64) (carved int64, retry bool, err error) {
	if _, err := c.load(ctx, name, nd, false); err != nil {
		return 0, zkclient.IsTransient(err), err
	}
	st := nd.state
	if st.Legacy || !st.Validated() {
		return 0, false, fmt.Errorf("sequence %q: windows need an initialised, validated, non-legacy sequence", name)
	}
	if nd.version < 0 || nd.version >= state.VersionLimit {
		return 0, false, fmt.Errorf("sequence %q: znode version %d is at the limit; rotate it first", name, nd.version)
	}
	full := make(map[int]bool, len(open))
	for _, w := range open {
		full[w.slot] = true
	}
	// A window carved after the windows were read (by a client) is open:
	// the load above lists the children after it.
	read := make(map[string]bool, len(ws))
	for _, w := range ws {
		read[w.name] = true
	}
	children, _, err := c.zk.Session().Children(ctx, nd.path)
	c.stats.requests.Add(1)
	if err != nil {
		return 0, zkclient.IsTransient(err), c.zkError(name, err)
	}
	for _, w := range childrenWith(children, state.WindowPrefix) {
		if !read[w] {
			full[windowSlot(w)] = true
		}
	}

	fresh := st.Fresh()
	left := fresh
	ops := []zkclient.Op{zkclient.CheckOp(nd.path+"/"+st.Marker, 0), {}}
	for k := 0; k < st.Windows && left > 0; k++ {
		if full[k] {
			continue
		}
		rate, prev := demand/float64(st.Windows), int64(0)
		if g, ok := gone[k]; ok {
			rate, prev = windowRate(g.state, g.stat), g.state.End-g.state.Start+1
		}
		size := min(left, windowSize(rate, prev, fresh, st.Windows))
		w := state.State{Name: name, Start: st.Next, Next: st.Next, Ceiling: st.Next + size - 1, End: st.Next + size - 1,
			ZKEpoch: st.ZKEpoch, Marker: st.Marker}
		ops = append(ops, c.createOp(ctx, KindSequenceChild, nd.path+"/"+slotPrefix(k), w.Encode(), zkclient.Sequential))
		st.Next += size
		left -= size
	}
	if len(ops) == 2 {
		return 0, false, nil // every slot has a window, or nothing is left to carve
	}
	ops[1] = zkclient.SetOp(nd.path, st.Encode(), nd.version)
	_, err = c.write(ctx, ops...)
	switch {
	case err == nil:
		nd.valid = false // the child watch fired; re-read next time
		return fresh - left, false, nil
	case errors.Is(err, zkclient.ErrBadVersion):
		return 0, true, nil
	case errors.Is(err, errMarkerGone):
		return 0, false, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
	case zkclient.IsTransient(err):
		// A lost reply may leave the windows created: harmless, their IDs
		// are below the ceiling and were taken from the sequence's next.
		return 0, true, nil
	default:
		return 0, false, c.zkError(name, err)
	}
}
