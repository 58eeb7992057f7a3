package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Delete deletes sequence name for good, by the lifecycle protocol
// (Lifecycle): one transaction deletes the znode, with its windows and
// marker, at the version read, and writes ZooKeeper's copy of the
// tombstone (Deletion), guarded by that record as read; only then does the
// store learn the tombstone. It returns the tombstone's ceiling: every ID
// any deleted incarnation of the name may have handed out, the sequence's
// ceiling or more (the store's ceiling, an earlier tombstone).
//
// Delete may run beside a primary, busy clients and other operators: a
// take or a raise that lands first makes it read again; a birth of the
// name checks the deletion record in its own transaction, so no
// incarnation is born below the tombstone; and the store's tombstone ends
// only incarnations ZooKeeper has deleted. A name ZooKeeper deleted whose
// tombstone the store lacks (a delete whose store write failed) has it
// written: running a delete again completes it.
func (o Operator) Delete(ctx context.Context, name string, store Store) (int64, error) {
	c := o.c
	tried := false
	done, err := c.Keeper().Lifecycle(ctx, store, name, func(h Holding, rec persist.Record) (Step, error) {
		d := h.Deletion
		switch {
		case h.Exists:
			tried = true
			dead := max(TombstoneCeiling(h.State), rec.Ceiling, rec.Live, d.Ceiling, 1)
			return Step{Change: Change{Dead: dead}, After: tombstone(name, dead)}, nil
		case d.Exists && (rec.Dead < d.Ceiling || tried):
			return Step{After: tombstone(name, d.Ceiling)}, nil
		}
		return Step{}, h.Missing()
	})
	if errors.Is(err, state.ErrCorrupt) {
		return 0, fmt.Errorf("%w; repair it before deleting the sequence (its ceiling must be known for the tombstone)", err)
	}
	if err != nil {
		return 0, err
	}
	return done.Step.After.Dead, nil
}

// tombstone is the store's record of a deletion up to dead.
func tombstone(name string, dead int64) *persist.Record {
	return &persist.Record{Name: name, Ceiling: dead, Dead: dead}
}

// TombstoneCeiling is where the tombstone of a sequence in state st ends:
// the highest ID it may have issued (its ceiling, for a legacy counter the
// counter itself, for a registration nothing: start-1), and at least the
// floor of its incarnation (PushFloor, the Live the store records of it,
// perhaps only after the delete), which lies past the ceiling for a name
// born again after its whole space went out.
func TombstoneCeiling(st state.State) int64 {
	switch {
	case st.Legacy:
		return st.Next
	case st.Registered:
		return st.Start - 1
	}
	return max(st.Ceiling, st.PushFloor)
}
