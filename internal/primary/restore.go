package primary

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// The primary's births: the two ways a sequence's znode comes to hold a
// usable state in a new incarnation or after a loss (initialising a
// registration, restoring a lost sequence), the lifecycle protocol's
// steps in bulk (seqzk.Keeper.Lifecycle). Each reads its floor afresh
// once it has seen what it acts on (ZooKeeper's deletion record, then the
// store), writes the store's ceiling first, carries out its ZooKeeper
// write in a transaction that fails if the name's deletion record changed
// since it was read (seqzk.Restoration, seqzk.Keeper.Initialise), and
// only then tells the store of a new incarnation (confirmBirths): a delete
// cannot be overtaken by a birth decided before it. An initialised
// registration is stamped for clients only after that (Keeper.Confirm):
// no ID goes out of a birth the store does not hold.

// deletionsOf reads the deletion records of names, one by one for a few
// and all at once for many.
func (p *Primary) deletionsOf(ctx context.Context, names []string) (map[string]seqzk.Deletion, error) {
	if len(names) > 64 {
		return p.seq.Meta().Deletions(ctx)
	}
	out := make(map[string]seqzk.Deletion, len(names))
	for _, name := range names {
		d, err := p.seq.Meta().ReadDeletion(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = d
	}
	return out, nil
}

// prepareBirths reads, for the registrations among names, the floor their
// initialisation starts from: above the store's ceiling for the name, as
// the store says now, and above ZooKeeper's deletion record, which it
// keeps as the guard of the initialisation. ZooKeeper is read first: the
// record is the guard, so a delete after it fails the initialisation, and
// the store then covers every ceiling ZooKeeper showed. A name whose floor
// cannot be read now is decided at a later event or sweep.
func (p *Primary) prepareBirths(ctx context.Context, names []string) {
	var regs []string
	for _, name := range names {
		if t := p.seqs[name]; t != nil && t.corrupt == nil && t.state.Registered && !p.inFlight(name) {
			regs = append(regs, name)
		}
	}
	if len(regs) == 0 {
		return
	}
	// An initialisation's guard lives under the root's own znode: make
	// sure it exists (if it was deleted by hand, the next restore reads
	// that as a loss of the root's data and sets a new era).
	if err := p.seq.Meta().EnsureMeta(ctx); err != nil {
		p.log.Warn().Err(err).Msg("primary: cannot create the root's own znode; initialising new sequences later")
		return
	}
	dels, err := p.deletionsOf(ctx, regs)
	if err != nil {
		p.log.Warn().Err(err).Int("sequences", len(regs)).Msg("primary: cannot read the deletion records of new sequences; initialising them later")
		return
	}
	fresh, err := p.refresh(ctx, regs)
	if err != nil {
		p.log.Warn().Err(err).Int("sequences", len(regs)).Msg("primary: cannot read the store's records of new sequences; initialising them later")
		return
	}
	for _, name := range regs {
		floor := int64(1)
		if r, ok := fresh[name]; ok {
			floor = state.AddSat(r.Ceiling, 1)
		}
		d := dels[name]
		if d.Exists {
			floor = max(floor, state.AddSat(d.Ceiling, 1))
		}
		p.births[name] = birth{floor: floor, guard: d}
	}
}

// restore re-creates, above its stored ceiling, every sequence the store
// holds live that ZooKeeper lost. A sequence missing from ZooKeeper is
// lost only if ZooKeeper is known to have lost data since it last held it
// (seqzk.Era.Lost, or the root's data gone); one missing in the era it was
// last seen in was deleted by hand, and is left alone (logged). One that
// ZooKeeper's deletion record says is deleted is not restored either: its
// tombstone is written into the store again, which lost it.
func (p *Primary) restore(ctx context.Context) error {
	candidates := p.restoreCandidates()
	if len(candidates) == 0 {
		p.wiped = false
		return nil
	}
	// The watcher may simply not have reported them yet: list once.
	children, err := p.listForRestore(ctx)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	present := make(map[string]bool, len(children))
	for _, c := range children {
		present[c] = true
	}
	candidates = slices.DeleteFunc(candidates, func(name string) bool { return present[name] })
	if len(candidates) == 0 {
		return nil
	}
	// ZooKeeper's deletion records first, then the store: a delete
	// records the deletion in ZooKeeper before the store, so one that
	// this reading of ZooKeeper missed fails the guarded restore.
	dels, err := p.deletionsOf(ctx, candidates)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fresh, err := p.refresh(ctx, candidates)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	lost, err := p.sortMissing(ctx, candidates, dels, fresh)
	if err != nil {
		return err
	}
	if len(lost) == 0 {
		p.wiped = false
		return nil
	}
	return p.recreateLost(ctx, lost, dels)
}

// restoreCandidates returns the sequences the store holds live that the
// primary does not know in ZooKeeper, except those already found deleted
// by hand.
func (p *Primary) restoreCandidates() []string {
	var candidates []string
	for name, r := range p.records {
		if !r.deleted && p.seqs[name] == nil {
			if _, gone := p.handGone[name]; !gone {
				candidates = append(candidates, name)
			}
		}
	}
	return candidates
}

// listForRestore lists the sequences ZooKeeper holds now, and notices data
// ZooKeeper lost under this primary: the sequences root gone (then none
// are listed), or the root's era znode gone or replaced. Either sets
// p.wiped; a lost era is read again (CurrentEra) and the cluster marker
// claimed again.
func (p *Primary) listForRestore(ctx context.Context) ([]string, error) {
	children, err := p.seq.Names(ctx)
	if errors.Is(err, seqzk.ErrUnknownSequence) {
		p.log.Warn().Str("root", p.seq.Root()).Msg("primary: the sequences root is gone: ZooKeeper lost its data; restoring")
		p.wiped, p.relayout = true, true
		children = nil
	} else if err != nil {
		return nil, err
	}
	if era, err := p.seq.Meta().ReadEra(ctx); err != nil {
		return nil, err
	} else if !era.Exists || era.Value != p.era.Value {
		// The root's own znode is gone (or was replaced): its data was
		// lost under this primary.
		p.wiped, p.relayout = true, true
		if p.era, err = p.seq.Meta().CurrentEra(ctx, p.zkEpoch); err != nil {
			return nil, err
		}
		if err := p.seq.Operator().Claim(ctx, p.cfg.MarkerPath, "marker_path"); err != nil {
			return nil, fmt.Errorf("cluster marker: %w", err)
		}
	}
	return children, nil
}

// sortMissing decides, for each candidate ZooKeeper lacks, from its
// deletion record dels and its store record fresh (both just read), and
// returns the lost ones to re-create. A name deleted meanwhile is left
// alone; one whose deletion record the store's tombstone lacks gets that
// tombstone written into the store (and the view); one missing in the
// era it was last seen in, with the root not wiped, was deleted by hand:
// logged, counted, remembered, and not restored.
func (p *Primary) sortMissing(ctx context.Context, candidates []string, dels map[string]seqzk.Deletion, fresh map[string]persist.Record) ([]persist.Record, error) {
	var lost, handGone []persist.Record
	var repairs []persist.Record
	for _, name := range candidates {
		r, ok := fresh[name]
		d := dels[name]
		switch {
		case !ok || r.Deleted():
			// Deleted meanwhile (the audit writes ZooKeeper's copy of the
			// tombstone if it lacks one).
		case d.Exists && d.Ceiling >= r.Live:
			repairs = append(repairs, persist.Record{Name: name, Ceiling: d.Ceiling, Dead: d.Ceiling})
		case p.wiped || p.era.Lost(r.Seen, p.zkEpoch):
			lost = append(lost, r)
		default:
			handGone = append(handGone, r)
		}
	}
	p.count(func(s *Stats) { s.HandDeleted += int64(len(handGone)) })
	for _, r := range handGone {
		p.handGone[r.Name] = struct{}{}
		p.log.Warn().Str("sequence", r.Name).Int64("stored_ceiling", r.Ceiling).
			Msg("primary: sequence missing from ZooKeeper, which lost no data since it last held it: deleted by hand, without a tombstone; not restored ('seqkeeper delete' it to record the tombstone, or 'seqkeeper restore --lost' it)")
	}
	if len(repairs) > 0 {
		if err := p.put(ctx, repairs); err != nil {
			return nil, fmt.Errorf("restore: write %d tombstones the store lost: %w", len(repairs), err)
		}
		p.count(func(s *Stats) { s.Repaired += int64(len(repairs)) })
		p.log.Warn().Int("tombstones", len(repairs)).Msg("primary: the store lacked tombstones that ZooKeeper's deletion records hold (lost, or a delete not done writing them); written")
		p.view.Lock()
		for _, r := range repairs {
			p.joinRecord(r)
		}
		p.view.Unlock()
	}
	return lost, nil
}

// recreateLost re-creates the lost sequences above their stored ceilings
// (reconcile.Recreate), the store first: it persists their new ceilings,
// then creates them in ZooKeeper, each guarded by its deletion record in
// dels. It clears p.wiped once every one is settled.
func (p *Primary) recreateLost(ctx context.Context, lost []persist.Record, dels map[string]seqzk.Deletion) error {
	sort.Slice(lost, func(i, j int) bool { return lost[i].Name < lost[j].Name })
	rs := make([]seqzk.Restoration, 0, len(lost))
	recs := make([]persist.Record, 0, len(lost))
	for _, r := range lost {
		st, r := reconcile.Recreate(r, p.cfg.MinReserve) // no traffic seen yet
		rs = append(rs, seqzk.Restoration{State: st, Guard: dels[r.Name]})
		recs = append(recs, r)
	}
	if err := p.put(ctx, recs); err != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return fmt.Errorf("restore: persist %d ceilings: %w", len(recs), err)
	}
	p.view.Lock()
	for _, r := range recs {
		p.setRecord(r.Name, storedOf(r))
	}
	p.view.Unlock()
	created, stale, err := p.seq.Keeper().Restore(ctx, rs, p.zkEpoch)
	p.count(func(s *Stats) { s.Restored += int64(len(created)) })
	p.log.Warn().Int("restored", len(created)).Int("of", len(rs)).Int("stale_epoch", len(stale)).
		Msg("primary: restored sequences ZooKeeper lost at their stored ceiling + 1")
	if err == nil {
		p.wiped = false
	}
	return err
}
