package primary

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// Widen moves the end of sequence name's space up to end, for an operator,
// store first: the store's record of the sequence learns the new end (so
// that a restore after a ZooKeeper loss brings it back with it), then
// ZooKeeper's state, by compare-and-set (seqzk.Client.Widen). It is safe
// beside busy takers and a running primary, which raises the ceiling into
// the wider space as it would for any sequence. A space never narrows; a
// legacy counter, a deleted name and an end beyond the int64 range are
// refused (seqzk.ErrAdvanceRefused), nothing changed. It returns the state
// ZooKeeper holds after it.
func Widen(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, end int64) (sequence.State, error) {
	if err := sequence.ValidateName(name); err != nil {
		return sequence.State{}, err
	}
	st, _, err := seqs.Describe(ctx, name)
	if err != nil {
		return sequence.State{}, err
	}
	if err := seqzk.CheckWiden(st, end); err != nil {
		return sequence.State{}, err
	}
	if st.End == end {
		return st, nil
	}
	rec, err := store.Get(ctx, name)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		rec = persist.Record{Name: name}
	case err != nil:
		return sequence.State{}, fmt.Errorf("sequence %q: read its record in the store: %w; nothing was changed", name, err)
	case rec.Deleted():
		return sequence.State{}, fmt.Errorf("sequence %q: %w: the store holds a tombstone for it (a delete is under way); nothing was changed", name, seqzk.ErrAdvanceRefused)
	}
	// The incarnation the store knows, with the wider space (the join
	// keeps the widest).
	rec.Start, rec.End, rec.Windows, rec.Legacy = st.Start, end, st.Windows, false
	if err := PutAtCurrentEpoch(ctx, store, rec); err != nil {
		return sequence.State{}, fmt.Errorf("sequence %q: write the new end %d to the store: %w; nothing was changed in ZooKeeper", name, end, err)
	}
	w, err := seqs.Widen(ctx, name, end)
	if err != nil {
		return sequence.State{}, fmt.Errorf("%w (the store already holds the end %d: run widen again)", err, end)
	}
	return w, nil
}
