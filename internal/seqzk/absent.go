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
// session) could be answered "does not exist". With it, NoNode means that
// no create that returned before confirmNoNode began holds the znode. A
// read that finds the znode costs nothing more. Every read whose NoNode
// becomes an answer that a sequence does not exist goes through here;
// a listing (Names) syncs before it reads.
func (c *Client) confirmNoNode(ctx context.Context, s zkclient.Session, path string, read func() error) error {
	err := read()
	if !errors.Is(err, zkclient.ErrNoNode) {
		return err
	}
	if err := c.sync(ctx, s, path); err != nil {
		return err
	}
	return read()
}

// sync waits until the server of session s has applied every write the
// ZooKeeper leader had committed when the sync reached it.
func (c *Client) sync(ctx context.Context, s zkclient.Session, path string) error {
	c.stats.requests.Add(1)
	c.stats.syncs.Add(1)
	if err := s.Sync(ctx, path); err != nil {
		return fmt.Errorf("sync %s with the zookeeper leader: %w", path, err)
	}
	return nil
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
