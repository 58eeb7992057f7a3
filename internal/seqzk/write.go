package seqzk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// write is the one way this package writes ZooKeeper (write_test.go holds
// it to that): ops as one transaction, sent even after ctx ends (sent),
// counted, the epoch it landed in learned (every operation of a
// transaction carries its zxid), and its failure classified once:
//
//   - a marker's check failed (the marker is gone: the state was prepared
//     in another history or on another incarnation): errMarkerGone,
//     wrapping the transaction's error; nothing was written;
//   - another guard failed (a version, a znode that exists or does not, a
//     parent with children): the transaction's error (a
//     *zkclient.MultiError: errors.Is and zkclient.FailedOp tell which),
//     counted as a conflict; nothing was written;
//   - anything else, a connection error included (zkclient.IsTransient:
//     the write may have landed), is returned as it is.
func (c *Client) write(ctx context.Context, ops ...zkclient.Op) ([]zkclient.OpResult, error) {
	res, err := c.zk.Session().Multi(sent(ctx), ops...)
	c.stats.requests.Add(1)
	if err == nil {
		for _, r := range res {
			if r.Stat != nil {
				c.observe(r.Stat)
				break
			}
		}
		return res, nil
	}
	i := zkclient.FailedOp(err)
	switch {
	case i >= 0 && i < len(ops) && ops[i].IsCheck() && errors.Is(err, zkclient.ErrNoNode) &&
		strings.HasPrefix(path.Base(ops[i].Path()), state.MarkerPrefix):
		return nil, fmt.Errorf("%w: %w", errMarkerGone, err)
	case i >= 0 && i < len(ops) && ops[i].IsCheck() && ops[i].Path() == c.neverPath():
		// A preflight's own check (lifecycle.go): no conflict.
	case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNodeExists),
		errors.Is(err, zkclient.ErrNotEmpty):
		c.stats.conflicts.Add(1)
	}
	return nil, err
}

// errMarkerGone reports a write refused because the marker of the state it
// was prepared from no longer exists: nothing was written.
var errMarkerGone = errors.New("marker znode gone")
