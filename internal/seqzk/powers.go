package seqzk

// The powers other than the worker's, each a handle on the same Client:
// its node cache and its one compare-and-set engine (write.go).

// Keeper holds the writes that keep counters valid: raises, stamps,
// windows, rotation, restore, and the lifecycle protocol (Lifecycle,
// Hold, Commit). Workers never make them.
type Keeper struct{ c *Client }

// Meta holds the root's own records, on its meta znode: the eras of its
// ZooKeeper histories and the tombstones of deleted sequences.
type Meta struct{ c *Client }

// Operator holds the operator's writes: create, delete, the ACL layout,
// and the claim that names a root's store.
type Operator struct{ c *Client }

// Keeper returns the handle of c's keeping writes.
func (c *Client) Keeper() Keeper { return Keeper{c} }

// Meta returns the handle of c's root records.
func (c *Client) Meta() Meta { return Meta{c} }

// Operator returns the handle of c's operator writes.
func (c *Client) Operator() Operator { return Operator{c} }
