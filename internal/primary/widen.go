package primary

import (
	"cmp"
	"context"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Widen moves the end of sequence name's space and its window slots up as
// w asks, for an operator, by the lifecycle protocol
// (seqzk.Keeper.Lifecycle): the store's record of the incarnation learns
// the new settings first (so that a restore after a ZooKeeper loss brings
// it back with them), then ZooKeeper's state, in one transaction guarded
// by the version read, the state's marker and the name's deletion record.
// It is safe beside busy takers and a running primary, which raises the
// ceiling into the wider space as it would for any sequence (takers open
// the new windows). Neither ever goes down; a legacy counter and values
// out of range are refused (seqzk.ErrWidenRefused), nothing changed. It
// returns the state ZooKeeper holds after it.
func Widen(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string, w seqzk.Widening) (state.State, error) {
	done, err := seqs.Keeper().Lifecycle(ctx, store, name, func(h seqzk.Holding, rec persist.Record) (seqzk.Step, error) {
		st := h.State
		if err := cmp.Or(h.Missing(), seqzk.CheckWiden(st, w)); err != nil {
			return seqzk.Step{}, err
		}
		// A store ceiling above ZooKeeper's end means IDs above that end
		// went out under a widen ZooKeeper has since lost (restored from
		// an older copy): the widened space starts above them.
		wide := seqzk.Widening{End: w.End, Windows: w.Windows}
		if rec.Ceiling > st.End {
			wide.Floor = state.AddSat(rec.Ceiling, 1) // a tombstone may sit at MaxInt64
		}
		next, changed := seqzk.Widened(st, wide)
		if !changed {
			return seqzk.Step{}, nil
		}
		// The incarnation the store knows, with the wider space (the join
		// keeps the widest), so that a restore after a ZooKeeper loss
		// brings the sequence back with it.
		inc := persist.Record{Name: name, Live: rec.Live, Start: st.Start, End: next.End, Windows: next.Windows}
		return seqzk.Step{Change: seqzk.Change{State: &next, Keep: true}, Before: &inc}, nil
	})
	switch {
	case err != nil:
		return state.State{}, err
	case done.Committed:
		return *done.Step.State, nil
	}
	return done.Replaced.State, nil
}
