package primary

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// putAttempts bounds how often an operator's store write is repeated when
// a primary taking over fences it (each time at the new leader epoch).
const putAttempts = 5

// Advanced is what Advance did to a sequence.
type Advanced struct {
	// Replaced is the state the advance replaced, and State the state it
	// wrote. Both are zero when nothing had to change.
	Replaced, State state.State
	// Stored is the ceiling the store held for the sequence before
	// ZooKeeper was changed.
	Stored int64
}

// Changed reports whether the advance wrote anything.
func (a Advanced) Changed() bool { return a.State.Name != "" }

// Skipped returns the IDs the advance made sure are never handed out: the
// ones between the old next and the new one, and the recycled IDs it
// dropped. (The unissued IDs of the windows it dropped are lost too.) Of
// a state ZooKeeper may have lost writes of, only the IDs above the
// store's floor count (see seqzk.Client.Advance): below it, IDs may have
// been handed out after the state was written, and clients may still push
// them back.
func (a Advanced) Skipped() state.Ranges {
	if !a.Changed() {
		return nil
	}
	out := append(state.Ranges(nil), a.Replaced.Recycled...)
	if a.State.Next > a.Replaced.Next {
		out = append(out, state.Range{Start: a.Replaced.Next, End: a.State.Next - 1})
	}
	return out
}

// Advance moves sequence name forward so that from now on it hands out no
// ID below to, for an operator (after an import from another system, or a
// migration). It never moves a sequence backwards: a sequence already at
// or past to, with no recycled IDs and no open window below it, is left
// alone. It refuses (seqzk.ErrAdvanceRefused) a to beyond the end of the
// space and exhausted, legacy or uninitialised sequences.
//
// The store learns the new ceiling first: twice minReserve IDs from to (or
// from above the stored ceiling, see seqzk.Client.Advance), as the primary
// gives an idle sequence, written at the store's current
// leader epoch (again at the new one if a primary taking over fences the
// write). Only then does ZooKeeper move (seqzk.Client.Advance), by
// compare-and-set, so it is safe beside busy takers and a running or
// changing primary. IDs that clients already took (a hi-lo allocator's
// batch) are theirs: they may still be handed out by those clients.
func Advance(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, to, minReserve int64) (Advanced, error) {
	if err := seqzk.ValidateName(name); err != nil {
		return Advanced{}, err
	}
	st, windows, err := seqs.Inspect(ctx, name)
	if err != nil {
		return Advanced{}, err
	}
	if err := seqzk.CheckAdvance(st, to); err != nil {
		return Advanced{}, err
	}
	if !needsAdvance(st, windows, to) {
		return Advanced{}, nil
	}
	rec, err := store.Get(ctx, name)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		rec = persist.Record{Name: name, Start: st.Start, End: st.End, Windows: st.Windows}
	case err != nil:
		return Advanced{}, fmt.Errorf("sequence %q: read its record in the store: %w; nothing was changed", name, err)
	case rec.Deleted():
		return Advanced{}, fmt.Errorf("sequence %q: %w: the store holds a tombstone for it (a delete is under way); nothing was changed", name, seqzk.ErrAdvanceRefused)
	}
	// If ZooKeeper's state cannot be trusted (a leader election since it
	// was validated), the advance moves it above everything the store
	// covered, as the primary would: the headroom is counted from there.
	storedFloor := state.AddSat(rec.Ceiling, 1)
	headroom := reconcile.Headroom(reconcile.CapReserve(minReserve, st.Start, st.End, st.Legacy))
	ceiling := max(st.Ceiling, reconcile.Ceiling(max(to, st.Next, storedFloor), headroom, st.End))
	rec.Ceiling = max(rec.Ceiling, ceiling)
	if err := PutAtCurrentEpoch(ctx, store, rec); err != nil {
		return Advanced{}, fmt.Errorf("sequence %q: write ceiling %d to the store: %w; nothing was changed in ZooKeeper", name, rec.Ceiling, err)
	}
	replaced, advanced, err := seqs.Advance(ctx, name, to, storedFloor, ceiling)
	if err != nil {
		return Advanced{}, fmt.Errorf("%w (the store already holds ceiling %d: run advance again)", err, rec.Ceiling)
	}
	return Advanced{Replaced: replaced, State: advanced, Stored: rec.Ceiling}, nil
}

// needsAdvance reports whether sequence st could still hand out an ID
// below to: from its counter, its recycled IDs or an open window.
func needsAdvance(st state.State, windows []seqzk.Window, to int64) bool {
	if st.Next < to || len(st.Recycled) > 0 && st.Recycled[0].Start < to {
		return true
	}
	for _, w := range windows {
		if w.State.Next <= w.State.Ceiling && w.State.Next < to {
			return true
		}
	}
	return false
}

// PutAtCurrentEpoch writes recs to the store at its current leader epoch,
// as an operator's command does beside a running primary: the merge by
// maximum keeps whatever the primary writes, and a primary that takes over
// meanwhile fences the write, which is then made again at its epoch.
func PutAtCurrentEpoch(ctx context.Context, store *persist.Store, recs ...persist.Record) error {
	var err error
	for range putAttempts {
		var epoch int64
		if epoch, _, err = store.Epoch(ctx); err != nil {
			return err
		}
		if err = store.Put(ctx, epoch, recs...); !errors.Is(err, persist.ErrFenced) {
			return err
		}
	}
	return err
}
