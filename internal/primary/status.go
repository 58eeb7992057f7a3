package primary

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Stats count the primary's work across terms.
type Stats struct {
	Raises        int64 // ceilings raised in ZooKeeper
	StorePuts     int64 // successful store writes
	StoreErrors   int64 // failed store writes (nothing raised)
	Initialised   int64 // registrations initialised
	Revalidated   int64 // sequences fast-forwarded (new epoch, re-created znode)
	Restored      int64 // znodes re-created from the store
	Rotated       int64 // sequences moved onto a fresh znode (version limit)
	StoreLost     int64 // ceilings found missing or lower in the store by an audit
	LegacyOverrun int64 // legacy counters seen above their stored mark
	Compactions   int64 // store log compactions that folded something
	CompactErrors int64 // store log compactions that failed
	Compacted     int64 // log segments folded into the store's buckets
	Deferred      int64 // decisions put off while the sequence's raise was in flight
	// Repaired counts what the primary wrote again because the store or
	// ZooKeeper had lost it (one object lost or rolled back): tombstones
	// into the store from ZooKeeper's deletion records and back, and the
	// incarnation of a live sequence the store held as deleted.
	Repaired int64
	// HandDeleted counts sequences found missing from ZooKeeper in the era
	// they were last seen in (deleted without 'seqkeeper delete'): not
	// restored.
	HandDeleted int64
	// Syncs counts the watcher's full resynchronisations handled (the
	// first one follows every sequence of the root).
	Syncs int64
}

// SequenceStatus describes one sequence as the primary sees it.
type SequenceStatus struct {
	Name          string  `json:"name"`
	Legacy        bool    `json:"legacy"`
	Next          int64   `json:"next"`
	Ceiling       int64   `json:"ceiling"`
	StoredCeiling int64   `json:"stored_ceiling"`
	Rate          float64 `json:"rate_per_second"`
	// RunwaySeconds is how long the outstanding reserve lasts at the
	// current rate (capped at a day for idle sequences).
	RunwaySeconds float64 `json:"runway_seconds"`
	Healthy       bool    `json:"healthy"`
	Problem       string  `json:"problem,omitempty"`
	// Exhausted is a sequence that handed out every ID of its space: it
	// is not Healthy, but nothing is wrong that an alert should page for
	// (it ends there; widen it, or delete it once its users moved on).
	Exhausted bool `json:"exhausted,omitempty"`
	// LegacyMargin is, for a legacy counter, the smallest gap seen between
	// the stored mark and the counter; negative means the counter once ran
	// past the mark (IDs not covered by the store for a while).
	LegacyMargin int64 `json:"legacy_margin,omitempty"`
}

// Status is a snapshot of the primary's view.
type Status struct {
	Leading   bool             `json:"leading"`
	Epoch     int64            `json:"epoch"`
	ZKEpoch   int64            `json:"zookeeper_epoch"`
	LastSweep time.Time        `json:"last_sweep,omitzero"`
	Sequences []SequenceStatus `json:"sequences"`
}

// Status returns the primary's view of every sequence it follows. The
// list is built when asked, in O(sequences): StatusOf lists fewer.
func (p *Primary) Status() Status {
	return p.StatusOf(func(*SequenceStatus) bool { return true })
}

// Following returns how many sequences the primary follows: what
// StatusOf would visit, counted in O(1) (a caller that polls while the
// primary is still learning of a million sequences must not rebuild the
// sorted list each time).
func (p *Primary) Following() int {
	p.view.Lock()
	defer p.view.Unlock()
	return len(p.seqs)
}

// StatusOf returns the primary's view, listing in Sequences only the
// sequences keep accepts. keep sees every sequence the primary follows, in
// name order, so it can also sum them up; the *SequenceStatus is valid
// only during the call. The primary's loop waits while StatusOf runs, so
// keep must be quick and must not call the Primary.
//
// Nothing is kept between calls: at 100,000 sequences a snapshot rebuilt
// after every batch of work cost about 200 bytes per sequence and a pass
// over all of them for every batch, whether anyone asked or not.
func (p *Primary) StatusOf(keep func(*SequenceStatus) bool) Status {
	p.mu.Lock()
	st := p.status
	p.mu.Unlock()
	if !st.Leading {
		return st
	}
	p.view.Lock()
	defer p.view.Unlock()
	st.Epoch, st.ZKEpoch = p.epoch, p.zkEpoch
	for _, name := range p.sortedNames() {
		s := p.sequenceStatus(name, p.seqs[name])
		if keep(&s) {
			st.Sequences = append(st.Sequences, s)
		}
	}
	return st
}

// Filter returns st listing only the sequences keep accepts, calling keep
// as StatusOf does: st.Filter stands in for a Primary's StatusOf.
func (st Status) Filter(keep func(*SequenceStatus) bool) Status {
	all := st.Sequences
	st.Sequences = nil
	for i := range all {
		if keep(&all[i]) {
			st.Sequences = append(st.Sequences, all[i])
		}
	}
	return st
}

// Stats returns the counters.
func (p *Primary) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Primary) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// sortedNames returns the names in p.seqs in order, sorted again only
// when the set changed (namesStale): sorting 100,000 names for every
// status cost more than the rest of it. Call it holding p.view.
func (p *Primary) sortedNames() []string {
	if p.namesStale {
		p.names = slices.Sorted(maps.Keys(p.seqs))
		p.namesStale = false
	}
	return p.names
}

// sequenceStatus describes one sequence. Call it holding p.view, or from
// Run's goroutine.
func (p *Primary) sequenceStatus(name string, t *tracked) SequenceStatus {
	st := t.state
	s := SequenceStatus{Name: name, Legacy: st.Legacy, Next: st.Next, Ceiling: st.Ceiling,
		StoredCeiling: p.storedCeiling(name), Rate: p.rateOf(t), Healthy: true}
	left := st.Ceiling - st.Next + 1
	if st.Legacy {
		left = s.StoredCeiling - st.Next
		s.LegacyMargin = min(p.legacyMargin(name), left)
	}
	s.RunwaySeconds = 86400
	if s.Rate > 0 {
		s.RunwaySeconds = min(86400, float64(left)/s.Rate)
	}
	switch {
	case t.corrupt != nil:
		s.Healthy, s.Problem = false, t.corrupt.Error()
	case p.broken != nil && persist.Affects(p.broken, name):
		s.Healthy, s.Problem = false, "its store object is unreadable: "+p.broken.Error()
	case p.storeErrs[name] != nil:
		s.Healthy, s.Problem = false, "the last store write failed: "+p.storeErrs[name].Error()
	case st.Registered:
		s.Healthy, s.Problem = false, "registered, not initialised yet"
	case seqzk.Unconfirmed(st):
		s.Healthy, s.Problem = false, "initialised, not stamped yet: waiting for the store to record its birth"
	case !st.Legacy && (st.ZKEpoch != p.zkEpoch || !st.Validated()):
		s.Healthy, s.Problem = false, "not validated in the current ZooKeeper epoch yet"
	case !st.Legacy && s.StoredCeiling < st.Ceiling:
		s.Healthy, s.Problem = false, "ZooKeeper ceiling above the stored ceiling"
	case st.Legacy && s.LegacyMargin < 0:
		s.Healthy, s.Problem = false, "legacy counter ran past its stored mark"
	case !st.Legacy && st.Next > min(st.End, state.MaxID-1) && len(st.Recycled) == 0:
		s.Healthy, s.Exhausted, s.RunwaySeconds = false, true, 0
		s.Problem = "exhausted: every ID of its space is issued or skipped; widen it ('seqkeeper widen'), or move to a new sequence and delete this one"

	}
	return s
}

// noteLegacy updates the smallest margin seen of the legacy counters that
// moved since the last call (p.legacyMoved), once the batch that saw them
// move has persisted their marks, and counts those that ran past theirs.
func (p *Primary) noteLegacy() {
	for name := range p.legacyMoved {
		t := p.seqs[name]
		if t == nil || !t.state.Legacy {
			continue
		}
		left := p.storedCeiling(name) - t.state.Next
		margin := p.legacyMargin(name)
		if left < 0 && margin >= 0 {
			p.count(func(s *Stats) { s.LegacyOverrun++ })
		}
		if left < margin {
			p.view.Lock()
			p.legacyMargins[name] = left
			p.view.Unlock()
		}
	}
	clear(p.legacyMoved)
}

// legacyMargin is the smallest stored mark - counter seen of legacy counter
// name (p.legacyMargins), or math.MaxInt64 before noteLegacy saw it move.
func (p *Primary) legacyMargin(name string) int64 {
	if m, ok := p.legacyMargins[name]; ok {
		return m
	}
	return math.MaxInt64
}
