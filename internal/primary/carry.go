package primary

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// carryOutAll makes the ZooKeeper changes of the plans that are not
// pipelined, up to Parallelism at once, once the store holds their
// ceilings, and records what was written as the state now. The
// registrations initialised are births: the store learns their
// incarnation, and only then are they stamped for clients to take from
// (seqzk.Unconfirmed), so that no ID is handed out from an incarnation a
// ZooKeeper loss would not restore.
func (p *Primary) carryOutAll(ctx context.Context, plans []plan) error {
	births, errs := p.carryOutEach(ctx, plans)
	if err := p.confirmBirths(ctx, births); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i := range births {
		births[i].kind = planConfirm
	}
	_, more := p.carryOutEach(ctx, births)
	return errors.Join(append(errs, more...)...)
}

// carryOutEach is carryOutAll's pass over plans; it returns the births
// initialised.
func (p *Primary) carryOutEach(ctx context.Context, plans []plan) ([]plan, []error) {
	var mu sync.Mutex
	var errs []error
	var births []plan
	done := make(map[string]carried, len(plans))
	parallel.Each(len(plans), p.cfg.Parallelism, func(i int) {
		pl := plans[i]
		if pl.kind == planLegacyMark {
			return // a mark lives only in the store
		}
		var before state.State
		if t := p.seqs[pl.name]; t != nil {
			before = t.state
		}
		// Every operation is safe to abandon (the store already holds its
		// ceiling) and is retried at the next event or sweep, so a
		// compare-and-set loop that cannot win must not stall the
		// primary's other work.
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		st, moved, czxid, err := p.carryOut(octx, pl, before)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		} else if st.Name != "" {
			done[pl.name] = carried{st, moved, czxid}
			if pl.kind == planInit && seqzk.Unconfirmed(st) {
				pl.born = st
				births = append(births, pl)
			}
		}
	})
	p.noteCarried(done)
	return births, errs
}

// carried is what carryOut wrote for one sequence.
type carried struct {
	st    state.State
	moved int64 // how far it moved next itself
	czxid int64 // of a rotated sequence's new znode
}

// noteCarried records what carryOutAll wrote, by sequence name, as the
// state now: deciding again from the events of our own writes, or from a
// sweep before they arrive, must not redo it.
func (p *Primary) noteCarried(done map[string]carried) {
	p.view.Lock()
	defer p.view.Unlock()
	for name, r := range done {
		t := p.seqs[name]
		if t == nil {
			continue
		}
		t.state, t.fresh = r.st, false
		// Our own move of next is not consumption: shift the rate's
		// baseline by it, or every fast-forward would look like a
		// burst, size a bigger reserve, and the next fast-forward skip
		// more (the reserve would grow exponentially).
		t.lastNext += r.moved
		if r.st.Legacy {
			// Written by us in this epoch: no further forward until
			// the next election, even before our write's event.
			t.mzxid = max(t.mzxid, p.zkEpoch<<32)
		}
		if r.czxid != 0 {
			// Rotated: recognise the new znode as ours, not as one
			// re-created by someone else. The next store write of the
			// sequence records it; a successor primary that reads the
			// old one fast-forwards the sequence (one reserve).
			t.czxid, t.version = r.czxid, 0
			if rec, ok := p.record(name); ok {
				rec.czxid = r.czxid
				p.setRecord(name, rec)
			}
		}
	}
}

// confirmBirths tells the store of the incarnations ZooKeeper now holds
// (their Live): until then the store held only their ceilings, so that a
// birth a delete overtook (its guarded initialisation failed) never made
// the store claim a live name ZooKeeper does not hold. Should this write
// fail, or the primary stop before it, the births stay unconfirmed (no
// client takes from them), and whoever decides on them next stores the
// birth with their ceiling before stamping them (decide); a ZooKeeper
// data loss meanwhile forgets registrations that handed out nothing.
func (p *Primary) confirmBirths(ctx context.Context, births []plan) error {
	if len(births) == 0 {
		return nil
	}
	recs := make([]persist.Record, len(births))
	for i, pl := range births {
		recs[i] = pl.rec
		recs[i].Live = pl.born.PushFloor // its floor, as ZooKeeper holds it
	}
	if err := p.put(ctx, recs); err != nil {
		return fmt.Errorf("record %d new incarnations in the store (the next sweep will): %w", len(births), err)
	}
	p.view.Lock()
	defer p.view.Unlock()
	for _, r := range recs {
		p.joinRecord(r)
	}
	return nil
}

// carryOut makes one plan's ZooKeeper change, after the store holds its
// ceiling.
// It also returns how far the primary itself moved next (a fast-forward,
// windows carved): that is not consumption, and the rate must not count it.
func (p *Primary) carryOut(ctx context.Context, pl plan, before state.State) (state.State, int64, int64, error) {
	var (
		st    state.State
		czxid int64
		err   error
	)
	switch pl.kind {
	case planRaise:
		st, err = p.raiseOne(ctx, p.log, pl)
		p.count(func(s *Stats) { s.Raises++ })
	case planLegacyForward:
		st, err = p.seq.Keeper().ForwardLegacy(ctx, pl.name, pl.floor)
		p.count(func(s *Stats) { s.Revalidated++ })
	case planRotate:
		st, czxid, err = p.seq.Keeper().Rotate(ctx, pl.name)
		p.count(func(s *Stats) { s.Rotated++ })
		if err == nil {
			p.log.Info().Str("sequence", pl.name).Msg("primary: rotated the sequence onto a fresh znode (its data version neared the limit)")
		}
	case planInit:
		st, err = p.seq.Keeper().Initialise(ctx, pl.name, pl.floor, pl.rec.Ceiling, pl.guard)
		p.count(func(s *Stats) { s.Initialised++ })
	case planConfirm:
		st, err = p.seq.Keeper().Confirm(ctx, pl.name, pl.born)
	case planRevalidate:
		st, err = p.seq.Keeper().Restamp(ctx, pl.name, pl.rec.Czxid, pl.floor, pl.rec.Ceiling, false)
		p.count(func(s *Stats) { s.Revalidated++ })
	case planFastForward:
		st, err = p.seq.Keeper().Restamp(ctx, pl.name, pl.rec.Czxid, pl.floor, pl.rec.Ceiling, true)
		p.count(func(s *Stats) { s.Revalidated++ })
	}
	if errors.Is(err, seqzk.ErrUnknownSequence) || errors.Is(err, seqzk.ErrChangedMeanwhile) {
		return state.State{}, 0, 0, nil // deleted meanwhile; the watcher reports it
	}
	if err != nil {
		return state.State{}, 0, 0, err
	}
	p.log.Debug().Str("sequence", pl.name).Int64("next", st.Next).Int64("ceiling", st.Ceiling).
		Int64("zk_epoch", st.ZKEpoch).Msg("primary: ceiling set")
	var moved int64
	if pl.kind != planRaise && st.Next > before.Next {
		moved = st.Next - before.Next
	}
	if st.Windows > 0 && st.Validated() {
		carved, err := p.topUpWindows(ctx, pl.name, st)
		return st, moved + carved, czxid, err
	}
	return st, moved, czxid, nil
}

// topUpWindows keeps a window open in every slot of a windowed sequence,
// sized from the demand each slot's last window saw, or from the
// sequence's smoothed rate shared among its slots (internal/seqzk,
// TopUpWindows). Clients carve each slot's next window themselves before
// it runs dry; this fills the slots of a new or revalidated sequence and
// those whose clients found the ceiling. Windows are carved below the
// ceiling, so they need no store write of their own.
func (p *Primary) topUpWindows(ctx context.Context, name string, st state.State) (int64, error) {
	var demand float64
	if t := p.seqs[name]; t != nil {
		demand = p.rateOf(t)
	}
	carved, err := p.seq.Keeper().TopUpWindows(ctx, name, p.cfg.RotateVersion, demand)
	if carved > 0 {
		p.log.Debug().Str("sequence", name).Int("windows", st.Windows).Int64("carved", carved).
			Float64("rate_ids_per_second", demand).Msg("primary: windows topped up")
	}
	return carved, err
}
