package primary

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// takeStore takes a new leader epoch in the store and seals every bucket
// with it (persist.Store.Seal): from then on no earlier primary can write,
// and the records returned hold everything earlier primaries wrote. If the
// buckets carry an epoch above the epoch object's (the object was lost), it
// advances again past them at once instead of losing a term to each.
func (p *Primary) takeStore(ctx context.Context) ([]persist.Record, error) {
	for attempt := 0; ; attempt++ {
		epoch, err := p.deps.Store.AdvanceEpoch(ctx, p.deps.Holder)
		if err != nil {
			return nil, fmt.Errorf("primary: advance the leader epoch in %s: %w", p.deps.Store, err)
		}
		p.view.Lock()
		p.epoch = epoch
		p.view.Unlock()
		recs, err := p.deps.Store.Seal(ctx, epoch)
		if errors.Is(err, persist.ErrFenced) && attempt < 3 {
			// Still ours in the epoch object: the fence came from objects
			// carrying a higher epoch than the object did (it was lost or
			// rolled back), which this store has now seen.
			if _, holder, eerr := p.deps.Store.Epoch(ctx); eerr == nil && holder == p.deps.Holder {
				p.deps.Logger.Warn().Int64("epoch", epoch).Err(err).
					Msg("primary: store buckets carry a newer epoch than the epoch object (was it lost?); advancing past them")
				continue
			}
		}
		if errors.Is(err, persist.ErrFenced) {
			return nil, fmt.Errorf("primary: %w", err)
		}
		if err != nil && !persist.Partial(err) {
			return nil, fmt.Errorf("primary: seal %s at leader epoch %d: %w", p.deps.Store, epoch, err)
		}
		// Carry on with what could be read: only the sequences of the
		// buckets that failed (corrupt, or a read that kept failing) are
		// left alone, and the buckets are read again at every sweep.
		p.view.Lock()
		p.broken = err
		p.view.Unlock()
		if err != nil {
			p.deps.Logger.Error().Err(err).Msg("primary: some store objects are unreadable; their sequences are left alone (unhealthy) until they can be read")
		}
		return recs, nil
	}
}

// audit reads the whole store again (sealing any bucket object that was
// lost and comes back empty) and takes what it holds as the truth: a record
// the store lost, or holds lower than this primary wrote, is forgotten, so
// that the next decision persists the sequence's ceiling anew. It also
// reads again the objects that were unreadable, so that a transient failure
// or an object repaired by an operator does not leave their sequences alone
// for the rest of the term.
func (p *Primary) audit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*p.cfg.StoreTimeout)
	defer cancel()
	recs, err := p.deps.Store.Seal(ctx, p.epoch)
	if errors.Is(err, persist.ErrFenced) {
		return err
	}
	if ctx.Err() != nil {
		return nil // try again at the next sweep
	}
	p.audited = time.Now()
	held := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		held[r.Name] = r
	}
	lost := 0
	p.view.Lock()
	p.eachRecord(func(name string, old stored) {
		if err != nil && persist.Affects(err, name) {
			return // unreadable: keep what we know
		}
		r, ok := held[name]
		if !ok || r.Ceiling < old.ceiling {
			lost++
		}
		if !ok {
			p.dropRecord(name)
		}
	})
	for name, r := range held {
		p.setRecord(name, storedOf(r))
	}
	wasBroken := p.broken != nil
	p.broken = err
	p.view.Unlock()
	if lost > 0 {
		p.count(func(s *Stats) { s.StoreLost += int64(lost) })
		p.log.Warn().Int("sequences", lost).Msg("primary: the store lost ceilings it had accepted (an object deleted or rolled back); persisting them again")
	}
	if wasBroken && err == nil {
		p.log.Info().Msg("primary: the store objects that were unreadable are readable again")
	}
	if err := p.mirrorDeletions(ctx, held, err); err != nil {
		p.log.Warn().Err(err).Msg("primary: could not compare the store's tombstones with ZooKeeper's deletion records; trying again at the next audit")
	}
	p.keepLayout(ctx)
	return nil
}

// keepLayout holds the root to the replicas' configured ACL layout
// (zk_acl_*; seqzk.Keeper.KeepLayout), and every znode after ZooKeeper
// lost data (relayout): at the start of a term, and at each audit, which
// follows a rollback of ZooKeeper at once. It logs what it changed and
// what it could not.
func (p *Primary) keepLayout(ctx context.Context) {
	changed, failed, err := p.seq.Keeper().KeepLayout(ctx, p.deps.ElectionPath, p.cfg.MarkerPath, p.relayout)
	switch {
	case errors.Is(err, zkclient.ErrNoAuth):
		p.log.Error().Err(err).Msg("primary: the root's ACL is not the configured layout (zk_acl_*), and this replica may not change it: " +
			"give the replicas the layout an admin applied, or run 'seqkeeper acl apply' as an admin with the configured identities")
	case err != nil:
		p.log.Warn().Err(err).Msg("primary: could not hold the znodes to the configured ACL layout; trying again at the next audit")
	default:
		for _, f := range failed {
			p.log.Warn().Err(f.Err).Str("znode", f.Path).Msg("primary: could not set this znode's ACL to the configured layout")
		}
		p.relayout = false // a znode it may not set is logged, not walked again at every audit
	}
	if changed > 0 {
		p.log.Info().Int("znodes", changed).Msg("primary: set ACLs to the configured layout")
	}
}

// mirrorDeletions keeps every deletion in two places, the store and
// ZooKeeper's deletion records, repairing whichever side lost it (an object
// lost or rolled back, a store written before deletion records existed).
// held are the store's records as the audit read them; broken, the buckets
// it could not read.
//
//   - A deletion record the store lacks (or holds lower) is written into
//     the store as a tombstone; if the name's znode exists and was created
//     after the record was written, it is an incarnation born after that
//     deletion (the record is written in the transaction that deletes the
//     znode), and the store learns that it is live when it held it as
//     deleted.
//   - A tombstone of a name whose znode does not exist, and that ZooKeeper
//     lacks, is written into ZooKeeper (seqzk.Meta.Bury, which
//     refuses while a znode of the name exists).
//
// A tombstone in the store of a name whose znode exists, with no newer
// deletion record, is left alone: ZooKeeper restored from a copy taken
// before the delete (a delete records the deletion in ZooKeeper first).
func (p *Primary) mirrorDeletions(ctx context.Context, held map[string]persist.Record, broken error) error {
	dels, err := p.seq.Meta().Deletions(ctx)
	if err != nil {
		return err
	}
	var repairs []persist.Record
	for name, d := range dels {
		if broken != nil && persist.Affects(broken, name) {
			continue
		}
		r, ok := held[name]
		fix := persist.Record{Name: name}
		if !ok || r.Dead < d.Ceiling {
			fix.Dead, fix.Ceiling = d.Ceiling, max(d.Ceiling, r.Ceiling)
		}
		// The znode must be an incarnation born after the deletion: this
		// primary's view of it may predate the delete that wrote the
		// record (and deleted the znode in the same transaction).
		if t := p.seqs[name]; t != nil && t.corrupt == nil && !t.state.Registered && ok && r.Deleted() && d.Ceiling >= r.Dead && d.BornAfter(t.czxid) {
			// The incarnation takes its configuration along: a record
			// of an incarnation without it would restore the sequence
			// with the defaults (an unbounded space).
			st := t.state
			fix.Live, fix.Ceiling = state.AddSat(d.Ceiling, 1), max(fix.Ceiling, r.Ceiling)
			fix.Start, fix.End, fix.Windows, fix.Legacy = st.Start, st.End, st.Windows, st.Legacy
		}
		if fix.Dead > 0 || fix.Live > 0 {
			repairs = append(repairs, fix)
		}
	}
	written := 0
	for name, r := range held {
		d, ok := dels[name]
		if !r.Deleted() || p.seqs[name] != nil || ok && d.Ceiling >= r.Ceiling {
			continue
		}
		if err := p.seq.Meta().Bury(ctx, name, r.Ceiling); err != nil {
			if errors.Is(err, seqzk.ErrExists) {
				continue // a znode of the name exists after all
			}
			return err
		}
		written++
	}
	if len(repairs) > 0 {
		if err := p.put(ctx, repairs); err != nil {
			return fmt.Errorf("write %d records from ZooKeeper's deletion records: %w", len(repairs), err)
		}
		p.view.Lock()
		for _, r := range repairs {
			p.joinRecord(r)
		}
		p.view.Unlock()
	}
	if n := len(repairs) + written; n > 0 {
		p.count(func(s *Stats) { s.Repaired += int64(n) })
		p.log.Warn().Int("into_store", len(repairs)).Int("into_zookeeper", written).
			Msg("primary: a deletion was known on one side only (an object lost or rolled back, or written by an older release); repaired")
	}
	return nil
}

// checkFence reads the store's leader epoch and returns ErrFenced (wrapped)
// if a newer primary has taken it. Read errors are left to the store
// writes, which fence too.
func (p *Primary) checkFence(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	epoch, holder, err := p.deps.Store.Epoch(ctx)
	if err != nil || epoch <= p.epoch {
		return nil
	}
	return fmt.Errorf("%w: leader epoch %d, held by %q, has replaced this primary's epoch %d", persist.ErrFenced, epoch, holder, p.epoch)
}

// refresh re-reads the records of names from the store into p.record (in
// one reading of the log and of the buckets that hold them) and returns
// what it read, whole, by name (a name the store has no record of is not
// in it).
func (p *Primary) refresh(ctx context.Context, names []string) (map[string]persist.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	fresh, err := p.deps.Store.GetMany(ctx, names)
	if err != nil {
		return nil, err
	}
	p.view.Lock()
	for _, r := range fresh {
		p.setRecord(r.Name, storedOf(r))
	}
	p.view.Unlock()
	return fresh, nil
}

// put writes records to the store within StoreTimeout.
func (p *Primary) put(ctx context.Context, recs []persist.Record) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	return p.deps.Store.Put(ctx, p.epoch, recs...)
}
