package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// confirmNoNode runs read, a read of path on session s. When it finds no
// znode, it syncs s with the ZooKeeper leader and runs read again, and
// returns what that second read found. A server answers reads from the
// writes it has applied, which may lag the leader's: without the sync, a
// name whose create returned a moment ago through another server (another
// session) could be answered "does not exist". With it, NoNode means no
// create that returned before confirmNoNode began holds the znode, and a
// delete that returned before is seen. A read that finds the znode costs
// nothing more, so every read that may end in ErrUnknownSequence or
// another "does not exist" goes through here, and no other.
func (c *Client) confirmNoNode(ctx context.Context, s zkclient.Session, path string, read func() error) error {
	err := read()
	if !errors.Is(err, zkclient.ErrNoNode) {
		return err
	}
	c.stats.requests.Add(1)
	c.stats.syncs.Add(1)
	if err := s.Sync(ctx, path); err != nil {
		return fmt.Errorf("sync with the zookeeper leader before saying %s does not exist: %w", path, err)
	}
	return read()
}

// get reads path on session s, through confirmNoNode.
func (c *Client) get(ctx context.Context, s zkclient.Session, path string) (data []byte, stat *zkclient.Stat, err error) {
	err = c.confirmNoNode(ctx, s, path, func() (err error) {
		data, stat, err = s.Get(ctx, path)
		c.stats.requests.Add(1)
		return err
	})
	return data, stat, err
}
