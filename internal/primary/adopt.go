package primary

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// adoptAttempts bounds the re-reads of a counter that workers keep moving
// under Adopt.
const adoptAttempts = 1000

// ErrAdoptContended reports an Adopt that gave up because workers kept
// moving the counter. Nothing was changed in ZooKeeper.
var ErrAdoptContended = errors.New("the counter keeps moving under adopt")

// Adopted is what Adopt did.
type Adopted struct {
	// Counter is the legacy counter it replaced.
	Counter seqzk.LegacyCounter
	// State is the sequence it wrote in its place.
	State state.State
}

// Adopt moves the legacy 8-byte counter of sequence name (Curator's
// DistributedAtomicLong) to seqkeeper's state format, for an operator: from then on the sequence has a reserved
// ceiling in the store, and the full guarantee. The new state hands out
// IDs from above the counter, and above every mark of it the store holds
// (after a ZooKeeper data loss the counter may be behind IDs it handed
// out), with the reserve of an idle sequence (twice minReserve).
//
// Store first: the store records the new incarnation and its ceiling,
// then ZooKeeper's counter is replaced in one compare-and-set at the
// version read, so that a worker that moves the counter meanwhile makes
// Adopt read again (and raise the store again). It is safe beside the
// seqkeeper library's takers (they read the new format) and a running
// primary. Writers of other libraries must be stopped first: Curator
// would read the new data as a number, and write one back.
//
// A sequence in the state format already is ErrNotLegacy (nothing to do);
// a name the store holds a tombstone for is refused.
func Adopt(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, minReserve int64) (Adopted, error) {
	if err := seqzk.ValidateName(name); err != nil {
		return Adopted{}, err
	}
	headroom := reconcile.Headroom(reconcile.CapReserve(minReserve, state.DefaultStart, state.MaxID, false))
	rec, err := store.Get(ctx, name)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		rec = persist.Record{Name: name}
	case err != nil:
		return Adopted{}, fmt.Errorf("sequence %q: read its record in the store: %w; nothing was changed", name, err)
	case rec.Deleted():
		return Adopted{}, fmt.Errorf("sequence %q: %w: the store holds a tombstone for it (a delete is under way); nothing was changed", name, seqzk.ErrAdvanceRefused)
	}
	// stored is the ceiling the store holds for the new incarnation: a
	// retry after a worker moved the counter writes the store again only
	// when the counter has eaten into the reserve (busy takers would
	// otherwise win every race against a store write).
	var born persist.Record
	for range adoptAttempts {
		lc, err := seqs.ReadLegacy(ctx, name)
		if err != nil {
			return Adopted{}, err
		}
		// Above the counter and above every mark of it the store holds.
		floor := max(state.AddSat(lc.Value, 1), state.AddSat(rec.Ceiling, 1), state.DefaultStart)
		if floor >= state.MaxID-1 {
			return Adopted{}, fmt.Errorf("sequence %q: %w: the counter is at %d, the end of the ID space", name, seqzk.ErrAdvanceRefused, lc.Value)
		}
		if born.Ceiling == 0 || floor > born.Ceiling-headroom/2 {
			// A new incarnation, born at floor: above the counter's, so
			// the store's merge takes its settings whole. Room for the
			// takers that may move the counter before the switch.
			ceiling := reconcile.Ceiling(floor, 2*headroom, state.MaxID-1)
			born = persist.Record{Name: name, Live: max(born.Live, floor), Start: state.DefaultStart, End: state.MaxID, Ceiling: ceiling}
			if err := PutAtCurrentEpoch(ctx, store, born); err != nil {
				return Adopted{}, fmt.Errorf("sequence %q: write ceiling %d to the store: %w; nothing was changed in ZooKeeper", name, ceiling, err)
			}
		}
		st, err := seqs.Adopt(ctx, name, lc.Version, floor, born.Ceiling)
		switch {
		case err == nil:
			return Adopted{Counter: lc, State: st}, nil
		case errors.Is(err, seqzk.ErrChangedMeanwhile), zkclient.IsTransient(err):
			continue // moved by a worker, or the reply was lost: read again
		default:
			return Adopted{}, err
		}
	}
	return Adopted{}, fmt.Errorf("sequence %q: %w (%d attempts); stop the writers of other libraries and run adopt again", name, ErrAdoptContended, adoptAttempts)
}
