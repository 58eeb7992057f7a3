package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Holding is what ZooKeeper holds of a name, as a lifecycle change reads
// it (Hold): the sequence znode, if any, and the name's deletion record.
type Holding struct {
	Name string
	// Exists reports whether the sequence znode exists; State, Version,
	// Czxid and Children (its windows and markers, sorted) are its.
	Exists   bool
	State    state.State
	Version  int32
	Czxid    int64
	Children []string
	// Deletion is the name's deletion record (Exists false: none).
	Deletion Deletion
	// Epoch is the current ZooKeeper epoch as far as the client knows:
	// the stamp of a state written now.
	Epoch int64
	// guarded is set when Deletion was read, so that a transaction
	// decided from this holding checks it.
	guarded bool
	root    string
}

// Missing returns an error matching ErrUnknownSequence when no znode of the
// name exists, else nil.
func (h Holding) Missing() error {
	if h.Exists {
		return nil
	}
	return &UnknownSequenceError{Name: h.Name, Root: h.root}
}

// Trusted reports whether the held state may keep its next and recycled
// IDs: validated in the current ZooKeeper epoch, its marker present. Any
// other state may have been rolled back since it was written, and must
// move above everything the store covers.
func (h Holding) Trusted() bool {
	st := h.State
	_, marker := slices.BinarySearch(h.Children, st.Marker)
	return h.Exists && st.Validated() && st.ZKEpoch == h.Epoch && marker
}

// Hold reads name for a lifecycle change: the znode's children, then in
// one request its data and the name's deletion record (so that a step
// decided from it has one round trip to lose before its transaction). A
// state that cannot be parsed is its error.
func (k Keeper) Hold(ctx context.Context, name string) (Holding, error) {
	c := k.c
	return c.hold(ctx, name, false)
}

// hold is Hold, after a sync of the session with the ZooKeeper leader when
// synced is set: a step whose transaction lost to a write read a server
// behind the leader, and busy takers keep it behind.
func (c *Client) hold(ctx context.Context, name string, synced bool) (Holding, error) {
	if err := ValidateName(name); err != nil {
		return Holding{}, err
	}
	h := Holding{Name: name, guarded: true, Epoch: c.Epoch(), root: c.opts.Root}
	if h.Epoch == 0 {
		h.Epoch = c.probeEpoch(ctx)
	}
	s, p := c.zk.Session(), c.Path(name)
	if synced {
		if err := c.sync(ctx, s, p); err != nil {
			return Holding{}, err
		}
	}
	var cstat *zkclient.Stat
	err := c.confirmNoNode(ctx, s, p, func() (err error) {
		h.Children, cstat, err = s.Children(ctx, p)
		c.stats.requests.Add(1)
		return err
	})
	if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return Holding{}, c.zkError(name, err)
	}
	h.Exists = err == nil
	reads, err := s.MultiRead(ctx, p, c.deletionPath(name))
	c.stats.requests.Add(1)
	if err != nil {
		return Holding{}, c.zkError(name, err)
	}
	if z := reads[0]; h.Exists {
		if z.Err != nil || z.Stat.Czxid != cstat.Czxid {
			return Holding{}, fmt.Errorf("sequence %q: %w", name, ErrChangedMeanwhile)
		}
		if h.State, err = state.ParseState(name, z.Data); err != nil {
			return Holding{}, err
		}
		slices.Sort(h.Children)
		h.Version, h.Czxid = z.Stat.Version, z.Stat.Czxid
	} else if z.Err == nil {
		return Holding{}, fmt.Errorf("sequence %q: %w", name, ErrChangedMeanwhile)
	}
	d := reads[1]
	switch {
	case errors.Is(d.Err, zkclient.ErrNoNode):
	case d.Err != nil:
		return Holding{}, fmt.Errorf("read the deletion record %s: %w", c.deletionPath(name), d.Err)
	default:
		h.Deletion, err = deletionOf(c.deletionPath(name), d.Data, d.Stat)
	}
	return h, err
}
