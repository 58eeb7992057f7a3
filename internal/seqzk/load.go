// Reading a sequence's znode into the node cache: its data, its children
// and the watches that tell when the cache is stale.

package seqzk

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// usable reports whether the cached state may be used: read on the current
// connection, and its child watch not fired. It consumes a fired watch, so
// the next load re-arms it.
func (n *node) usable(conn int64) bool {
	if !n.valid || n.deleted == nil || n.conn != conn {
		return false
	}
	select {
	case <-n.deleted:
		n.deleted, n.valid = nil, false
		return false
	default:
		return true
	}
}

// load reads the znode into the cache. With dataWatch it also returns a
// watch that fires on the next change of the data (used to wait for a
// raise). The caller holds n.mu.
func (c *Client) load(ctx context.Context, name string, n *node, dataWatch bool) (<-chan zkclient.Event, error) {
	for attempt := 0; ; attempt++ {
		gen := c.zk.Connection()
		s := c.zk.Session()
		if n.deleted != nil {
			select {
			case <-n.deleted: // fired: one-shot, so it must be set again
				n.deleted = nil
			default:
			}
		}
		if n.deleted == nil || n.conn != gen {
			if err := c.watchChildren(ctx, name, n, s, gen); err != nil {
				return nil, err
			}
		}
		var (
			data  []byte
			stat  *zkclient.Stat
			watch <-chan zkclient.Event
			err   error
		)
		if dataWatch {
			data, stat, watch, err = s.GetW(ctx, n.path)
		} else {
			data, stat, err = s.Get(ctx, n.path)
		}
		c.stats.requests.Add(1)
		if err != nil {
			n.valid = false
			return nil, c.zkError(name, err)
		}
		if stat.Czxid != n.czxid || c.zk.Connection() != gen {
			// Re-created (or reconnected) between the two requests: the
			// watch may belong to another incarnation or history.
			n.deleted, n.valid = nil, false
			if attempt > 10 {
				return nil, fmt.Errorf("sequence %q: znode keeps being re-created; is something deleting it?", name)
			}
			continue
		}
		st, err := state.ParseState(name, data)
		if err != nil {
			n.valid = false
			return nil, err
		}
		n.state, n.version, n.mzxid, n.valid, n.seen = st, stat.Version, stat.Mzxid, true, true
		return watch, nil
	}
}

// watchChildren sets n's deletion watch and reads its children in session
// s of connection gen: it records the watch, the creation zxid and the
// connection, and the windows and markers, and forgets the cached windows
// gone since (pruned or retired by someone else). Set before load reads the
// data, the watch covers whatever incarnation that read then sees (load
// compares creation zxids). The caller holds n.mu.
func (c *Client) watchChildren(ctx context.Context, name string, n *node, s zkclient.Session, gen int64) error {
	var (
		children []string
		stat     *zkclient.Stat
		ch       <-chan zkclient.Event
	)
	read := func() (err error) {
		children, stat, ch, err = s.ChildrenW(ctx, n.path)
		c.stats.requests.Add(1)
		return err
	}
	// A window's NoNode is never the answer (the take reads the
	// sequence's list again), so only the sequence's syncs.
	var err error
	if n.path == n.seq {
		err = c.confirmNoNode(ctx, s, n.path, read)
	} else {
		err = read()
	}
	if err != nil {
		return c.zkError(name, err)
	}
	sort.Strings(children)
	n.deleted, n.czxid, n.conn = ch, stat.Czxid, gen
	windows := childrenWith(children, state.WindowPrefix)
	for _, w := range n.windows {
		if _, found := slices.BinarySearch(windows, w); !found {
			c.forget(n.path + "/" + w) // pruned or retired by someone else
		}
	}
	n.windows = windows
	n.markers = childrenWith(children, state.MarkerPrefix)
	return nil
}
