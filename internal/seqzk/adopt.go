package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ErrNotLegacy reports an adoption of a sequence that is in the state
// format already (or a registration): there is nothing to adopt.
var ErrNotLegacy = errors.New("not a legacy counter")

// FormatCurator is the counter format Adopt understands: Apache
// Curator's DistributedAtomicLong (and seqkeeper's own legacy sequences),
// 8 bytes, big-endian. (kazoo's Counter writes decimal text, which
// seqkeeper reads as a registration starting at that number: see
// docs/migrate.md.)
const FormatCurator = "curator 8-byte"

// LegacyCounter is a counter of another library at a sequence's path, as
// ReadLegacy read it.
type LegacyCounter struct {
	// Value is the counter: the highest ID it may have handed out
	// (Curator's increment and kazoo's += return the new value).
	Value int64
	// Format is FormatCurator.
	Format string
	// Version is the znode's data version when it was read.
	Version int32
}

// ReadLegacy reads sequence name as a legacy 8-byte counter, for Adopt. A
// sequence in the state format, or a registration, is ErrNotLegacy; data
// that is neither is its parse error.
func (c *Client) ReadLegacy(ctx context.Context, name string) (LegacyCounter, error) {
	if err := ValidateName(name); err != nil {
		return LegacyCounter{}, err
	}
	data, stat, err := c.get(ctx, c.zk.Session(), c.Path(name))
	if err != nil {
		return LegacyCounter{}, c.zkError(name, err)
	}
	st, err := state.ParseState(name, data)
	switch {
	case err != nil:
		return LegacyCounter{}, err
	case st.Legacy:
		return LegacyCounter{Value: st.Next, Format: FormatCurator, Version: stat.Version}, nil
	case st.Registered:
		return LegacyCounter{}, fmt.Errorf("sequence %q: %w: it is a registration starting at %d (a kazoo counter's decimal text reads as one: see docs/migrate.md)", name, ErrNotLegacy, st.Start)
	}
	return LegacyCounter{}, fmt.Errorf("sequence %q: %w: it is in seqkeeper's state format already", name, ErrNotLegacy)
}

// Adopt replaces the legacy counter of sequence name, if its znode is
// still at version, with a sequence in the state format handing out IDs
// from floor, its ceiling at ceiling, stamped with the current ZooKeeper
// epoch under a fresh marker: one transaction, which fails with
// ErrChangedMeanwhile, writing nothing, when a worker moved the counter
// since it was read (read again). The durable store must already hold
// ceiling for the new incarnation.
func (c *Client) Adopt(ctx context.Context, name string, version int32, floor, ceiling int64) (state.State, error) {
	epoch := c.Epoch()
	if epoch == 0 {
		epoch = c.probeEpoch(ctx)
	}
	st := state.State{
		Name: name, Start: state.DefaultStart, Next: floor, Ceiling: ceiling, End: state.MaxID,
		ZKEpoch: epoch, Marker: newMarker(), PushFloor: floor,
	}
	if err := st.Validate(); err != nil {
		return state.State{}, err
	}
	p := c.Path(name)
	nd := c.node(p)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	_, err := c.zk.Multi(sent(ctx), zkclient.SetOp(p, st.Encode(), version), c.createOp(ctx, KindSequenceChild, p+"/"+st.Marker, nil, 0))
	c.stats.requests.Add(1)
	nd.valid = false // it holds another format now
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNodeExists):
		return state.State{}, fmt.Errorf("sequence %q: %w", name, ErrChangedMeanwhile)
	}
	return state.State{}, c.zkError(name, err)
}
