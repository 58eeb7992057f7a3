package primary

import (
	"context"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Adopted is what Adopt did.
type Adopted struct {
	// Counter is the legacy counter it replaced.
	Counter seqzk.LegacyCounter
	// State is the sequence it wrote in its place.
	State state.State
}

// Adopt moves the legacy 8-byte counter of sequence name (Curator's
// DistributedAtomicLong) to seqkeeper's state format, for an operator:
// from then on the sequence has a reserved ceiling in the store, and the
// full guarantee. It is a birth of the lifecycle protocol
// (seqzk.Keeper.Lifecycle): the new incarnation hands out IDs from above
// the counter, every mark of it the store holds (after a ZooKeeper data
// loss the counter may be behind IDs it handed out) and the name's
// deletion record, with the reserve of an idle sequence (twice
// minReserve). The store holds its ceiling first; the counter is replaced
// in one transaction at the version read, guarded by the deletion record;
// then the store learns the incarnation. A worker that moves the counter,
// or a delete, meanwhile makes it read again. It is safe beside the
// seqkeeper library's takers (they read the new format) and a running
// primary. Writers of other libraries must be stopped first: Curator
// would read the new data as a number, and write one back.
//
// A sequence in the state format already is seqzk.ErrNotLegacy (nothing
// to do).
func Adopt(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, minReserve int64) (Adopted, error) {
	headroom := reconcile.Headroom(reconcile.CapReserve(minReserve, state.DefaultStart, state.MaxID, false))
	var out Adopted
	var stored int64 // the ceiling an earlier attempt stored
	room := headroom // the IDs above the floor that ceiling gives
	var born persist.Record
	var counter int64 // the creation zxid of the counter's znode, once a step would replace it
	_, err := seqs.Keeper().Lifecycle(ctx, store, name, func(h seqzk.Holding, rec persist.Record) (seqzk.Step, error) {
		if out.State.Marker != "" && h.Exists && h.Czxid == counter && !h.State.Legacy && !h.State.Registered {
			// Ours, landed (its reply lost, or in an epoch ZooKeeper has
			// left): the counter's znode holds the state format, which
			// only an adoption writes. The primary stamps it again, above
			// the store's ceiling, perhaps before this reads it, so the
			// marker may be the primary's. The store learns the
			// incarnation; the caller, what ZooKeeper holds.
			out.State = h.State
			return seqzk.Step{After: &born}, nil
		}
		lc, err := seqzk.Legacy(h)
		if err != nil {
			return seqzk.Step{}, err
		}
		counter = h.Czxid
		floor := max(state.AddSat(lc.Value, 1), state.AddSat(rec.Ceiling, 1), state.AddSat(h.Deletion.Ceiling, 1), state.DefaultStart)
		if floor >= state.MaxID-1 {
			return seqzk.Step{}, fmt.Errorf("sequence %q: %w: the counter is at %d, the end of the ID space", name, seqzk.ErrAdvanceRefused, lc.Value)
		}
		// Room for the takers that may move the counter before the
		// switch: a ceiling stored by an earlier attempt serves while
		// half of its headroom is left (busy takers would otherwise win
		// every race against a store write).
		if floor > stored-headroom/2 {
			// Each new ceiling gives the takers twice the room of the
			// last, so that a store write slower than they are cannot
			// keep the adoption from ever finding its ceiling stored.
			room = min(2*room, state.MaxID/4)
			stored = reconcile.Ceiling(floor, room, state.MaxID-1)
		}
		ceiling := stored
		st := state.State{Name: name, Start: state.DefaultStart, End: state.MaxID}
		out = Adopted{Counter: lc, State: seqzk.Advanced(st, floor, ceiling, h.Epoch)}
		inc := persist.Record{Name: name, Start: state.DefaultStart, End: state.MaxID, Ceiling: ceiling}
		born = inc
		born.Live = floor
		return seqzk.Step{Change: seqzk.Change{State: &out.State}, Before: &inc, After: &born}, nil
	})
	if err != nil {
		return Adopted{}, err
	}
	return out, nil
}
