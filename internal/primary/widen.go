package primary

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Widen moves the end of sequence name's space and its window slots up as
// w asks, for an operator, store first: the store's record of the sequence
// learns the new settings (so that a restore after a ZooKeeper loss brings
// it back with them), then ZooKeeper's state, by compare-and-set
// (seqzk.Client.Widen). It is safe beside busy takers and a running
// primary, which raises the ceiling into the wider space as it would for
// any sequence (takers open the new windows). Neither ever goes down; a
// legacy counter, a deleted name and values out of range are refused
// (seqzk.ErrAdvanceRefused), nothing changed. It returns the state
// ZooKeeper holds after it.
func Widen(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, w seqzk.Widening) (state.State, error) {
	if err := seqzk.ValidateName(name); err != nil {
		return state.State{}, err
	}
	st, _, err := seqs.Describe(ctx, name)
	if err != nil {
		return state.State{}, err
	}
	if err := seqzk.CheckWiden(st, w); err != nil {
		return state.State{}, err
	}
	end, windows := max(st.End, w.End), max(st.Windows, w.Windows)
	if st.End == end && st.Windows == windows {
		return st, nil
	}
	rec, err := store.Get(ctx, name)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		rec = persist.Record{Name: name}
	case err != nil:
		return state.State{}, fmt.Errorf("sequence %q: read its record in the store: %w; nothing was changed", name, err)
	case rec.Deleted():
		return state.State{}, fmt.Errorf("sequence %q: %w: the store holds a tombstone for it (a delete is under way); nothing was changed", name, seqzk.ErrAdvanceRefused)
	}
	// The incarnation the store knows, with the wider space (the join
	// keeps the widest).
	rec.Start, rec.End, rec.Windows, rec.Legacy = st.Start, end, windows, false
	if err := PutAtCurrentEpoch(ctx, store, rec); err != nil {
		return state.State{}, fmt.Errorf("sequence %q: write the new end %d and %d windows to the store: %w; nothing was changed in ZooKeeper", name, end, windows, err)
	}
	// A store ceiling above ZooKeeper's end means IDs above that end went
	// out under a widen ZooKeeper has since lost (restored from an older
	// copy): the widened space starts above them.
	var floor int64
	if rec.Ceiling > st.End {
		floor = rec.Ceiling + 1
	}
	widened, err := seqs.Widen(ctx, name, seqzk.Widening{End: end, Windows: windows, Floor: floor})
	if err != nil {
		return state.State{}, fmt.Errorf("%w (the store already holds the end %d and %d windows: run widen again)", err, end, windows)
	}
	return widened, nil
}
