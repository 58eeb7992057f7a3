package primary

import (
	"cmp"
	"context"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

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
// store's floor count (see seqzk.Revalidated): below it, IDs may have
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
// It is a re-stamp of the lifecycle protocol (seqzk.Keeper.Lifecycle).
// The store learns the new ceiling first: twice minReserve IDs from to (or
// from above the stored ceiling, for a state ZooKeeper may have lost
// writes of), as the primary gives an idle sequence. Then one transaction,
// guarded by the version read, the name's deletion record and (for a
// trusted state) its marker, moves next up to to, drops recycled IDs and
// windows and stamps the current epoch under a fresh marker, so it is safe
// beside busy takers, other operators and a running or changing primary.
// IDs that clients already took (a hi-lo allocator's batch) are theirs:
// they may still be handed out by those clients.
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
	// stored is the ceiling this advance stored, and storedFloor the
	// store's floor before it did: what a lost history may have handed
	// out lies below it.
	var stored, storedFloor int64
	done, err := seqs.Keeper().Lifecycle(ctx, store, name, func(h seqzk.Holding, rec persist.Record) (seqzk.Step, error) {
		st := h.State
		if err := cmp.Or(h.Missing(), seqzk.CheckAdvance(st, to)); err != nil {
			return seqzk.Step{}, err
		}
		// A state ZooKeeper may have lost writes of (a leader election
		// since it was validated, its marker gone) moves above everything
		// the store covers too, as the primary's revalidation would: with
		// only the operator's to, it could be stamped valid below IDs a
		// lost history handed out.
		trusted := h.Trusted()
		floorNow := state.AddSat(rec.Ceiling, 1)
		if stored == 0 {
			storedFloor = floorNow
		}
		floor := to
		if !trusted {
			floor = max(to, floorNow)
		} else if !needsAdvance(st, nil, to) && len(h.Children) == 1 {
			return seqzk.Step{}, nil // advanced by someone else meanwhile
		}
		if stored < max(floor, st.Next, st.Ceiling) {
			headroom := reconcile.Headroom(reconcile.CapReserve(minReserve, st.Start, st.End, st.Legacy))
			stored = max(st.Ceiling, reconcile.Ceiling(max(to, st.Next, floorNow), headroom, st.End))
		}
		next := seqzk.Advanced(st, floor, stored, h.Epoch)
		before := persist.Record{Name: name, Ceiling: stored, Start: st.Start, End: st.End, Windows: st.Windows}
		if seqzk.Unconfirmed(st) {
			// A birth ZooKeeper holds and the store may not know yet: the
			// stamp makes it usable, so the store learns it first.
			before.Live = st.PushFloor
		}
		return seqzk.Step{Change: seqzk.Change{State: &next, Keep: trusted}, Before: &before}, nil
	})
	if err != nil || !done.Committed {
		return Advanced{}, err
	}
	replaced := done.Replaced.State
	if !done.Replaced.Trusted() || !done.Landed {
		// As the primary's revalidation makes an untrusted state: below
		// the store's floor, its next and recycled IDs may be from before
		// ZooKeeper lost writes, so the advance skipped none of them.
		replaced = seqzk.Revalidated(replaced, storedFloor)
	}
	return Advanced{Replaced: replaced, State: *done.Step.State, Stored: stored}, nil
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
