package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Put makes the store hold recs, written by a primary of leader epoch epoch.
// When it returns nil, every record is durable: the stored record is at
// least the one given in every field (the caller may raise ZooKeeper to
// its ceiling).
//
// Records are joined with what is stored (Merge), never written over it:
// every field takes the maximum of the stored and the new value (the
// observation and the incarnation each as one tuple), so a stored ceiling
// never decreases and a deleted incarnation never comes back, whoever
// writes and in whatever order. A record's ceiling is raised to its Dead
// (a tombstone promises that a later incarnation starts above it); Epoch
// is set to epoch and Updated stamped with the current time when zero.
//
// One Put is one new object: a log segment holding recs (see log.go), all
// or nothing; a Put of more than defaultSegmentBudget's worth of records (a
// restore of a million sequences) is several, each all or nothing.
// Compact later folds them into the bucket objects.
//
// Fencing: if this Store has seen a higher leader epoch than epoch (in the
// epoch object, read after every write and at most
// StoreOptions.EpochCheckInterval before one, or in any object), Put returns
// ErrFenced. An error other than ErrFenced or a validation error leaves the
// outcome unknown (the records may have landed); calling Put again is safe.
func (s *Store) Put(ctx context.Context, epoch int64, recs ...Record) error {
	if epoch < 0 {
		return fmt.Errorf("store %s: put: negative epoch %d", s.b, epoch)
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Name == "":
			return fmt.Errorf("store %s: put: record %d has no name", s.b, i)
		case r.Ceiling < 0 || r.Live < 0 || r.Dead < 0 || r.Start < 0 || r.End < 0 || r.Windows < 0:
			return fmt.Errorf("store %s: put %q: negative ceiling, live, dead, start, end or windows: %+v", s.b, r.Name, *r)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	l, err := s.layout(ctx)
	if err != nil {
		return err
	}
	if err := s.fence(epoch); err != nil {
		return fmt.Errorf("store %s: put: %w", s.b, err)
	}
	if err := s.refreshEpoch(ctx, s.now()-int64(s.opts.EpochCheckInterval)); err != nil {
		return fmt.Errorf("store %s: put: check the leader epoch: %w", s.b, err)
	}
	if err := s.fence(epoch); err != nil {
		s.log.Warn().Int64("epoch", epoch).Err(err).Msg("store: writer fenced")
		return fmt.Errorf("store %s: put: %w", s.b, err)
	}
	if err := acquire(ctx, s.seglog.appendSem); err != nil {
		return fmt.Errorf("store %s: put: waiting for this store's other write: %w", s.b, err)
	}
	defer release(s.seglog.appendSem)
	for _, part := range segmentParts(normalise(recs, epoch, time.Now()), s.segmentBudget) {
		sg := &segment{epoch: epoch, recs: part}
		if _, err := s.appendSegment(ctx, l, sg); err != nil {
			if errors.Is(err, ErrFenced) {
				s.log.Warn().Int64("epoch", epoch).Err(err).Msg("store: writer fenced")
			}
			return fmt.Errorf("store %s: write %d records: %w", s.b, len(sg.recs), err)
		}
	}
	return nil
}

// defaultSegmentBudget bounds the records' text in one log segment, a quarter of
// what a reader decompresses (maxDecoded): a Put of more (a restore or an
// import of a million sequences is about 70 MB) is written as several
// segments, each durable on its own, where one would be refused by every
// later read as corrupt.
const defaultSegmentBudget = maxDecoded / 4

// segmentParts cuts sorted records into runs whose text fits budget
// bytes each.
func segmentParts(recs []Record, budget int) [][]Record {
	var parts [][]Record
	line := make([]byte, 0, 128)
	first, size := 0, 0
	for i := range recs {
		line = appendRecord(line[:0], &recs[i])
		if i > first && size+len(line) > budget {
			parts = append(parts, recs[first:i])
			first, size = i, 0
		}
		size += len(line)
	}
	return append(parts, recs[first:])
}

// normalise returns recs sorted by name, each name once (joined), with
// Epoch set to epoch, Updated to the millisecond (now when zero) and the
// ceiling at least Dead.
func normalise(recs []Record, epoch int64, now time.Time) []Record {
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		r.Epoch = epoch
		if r.Updated.IsZero() {
			r.Updated = now
		}
		r.Updated = time.UnixMilli(r.Updated.UnixMilli()).UTC()
		r.Ceiling = max(r.Ceiling, r.Dead)
		out = append(out, r)
	}
	return mergeSorted(out)
}

// mergeSorted sorts recs by name and joins the records of each name.
func mergeSorted(recs []Record) []Record {
	slices.SortFunc(recs, func(x, y Record) int { return cmp.Compare(x.Name, y.Name) })
	out := recs[:0]
	for _, r := range recs {
		if k := len(out) - 1; k >= 0 && out[k].Name == r.Name {
			out[k] = Merge(out[k], r)
			continue
		}
		out = append(out, r)
	}
	return out
}

// bucketGroup is the part of a fold that goes to one bucket: sorted by
// name, each name once.
type bucketGroup struct {
	bucket int
	recs   []Record
}

// groupByBucket splits sorted, unique records by bucket.
func groupByBucket(recs []Record, n int) []bucketGroup {
	byBucket := make(map[int][]Record)
	for _, r := range recs {
		b := bucketOf(r.Name, n)
		byBucket[b] = append(byBucket[b], r)
	}
	groups := make([]bucketGroup, 0, len(byBucket))
	for b, rs := range byBucket {
		groups = append(groups, bucketGroup{bucket: b, recs: rs})
	}
	slices.SortFunc(groups, func(x, y bucketGroup) int { return cmp.Compare(x.bucket, y.bucket) })
	return groups
}

// putBucket merges recs into bucket b: read (or use the cache), merge,
// conditional write, and on a conflict the same again.
func (s *Store) putBucket(ctx context.Context, l *layout, b int, epoch int64, recs []Record) error {
	slot := &l.slots[b]
	key := bucketKey(b)
	if err := acquire(ctx, slot.sem); err != nil {
		return fmt.Errorf("%s: waiting for this store's other write: %w", key, err)
	}
	defer release(slot.sem)
	for attempt := 0; ; attempt++ {
		st, fresh, err := s.bucketToWrite(ctx, l, b)
		if err != nil {
			return err
		}
		if st.obj.epoch > epoch {
			return fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, st.obj.epoch, epoch)
		}
		merged, changed := mergeBucket(st.obj, epoch, recs)
		if merged.root != l.root && l.root != "" {
			merged.root, changed = l.root, true // a bucket of format v1
		}
		if !changed {
			if !fresh {
				// Nothing to write, so no conditional write would tell a
				// stale cache: read the object, which a successor's seal
				// marks with its epoch, before saying the store holds it.
				slot.cached = nil
				continue
			}
			return nil // the store already holds as much (it is monotone)
		}
		data, err := encodeBucket(merged)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", key, err)
		}
		etag, err := s.b.Put(ctx, key, data, st.etag)
		switch {
		case err == nil:
			slot.cached = &cachedBucket{etag: etag, data: data}
			return nil
		case errors.Is(err, ErrConflict):
			slot.cached = nil
			s.log.Debug().Str("key", key).Int64("epoch", epoch).Int("attempt", attempt).Msg("store: bucket changed under us; re-reading")
			if err := s.refreshEpoch(ctx, s.now()); err != nil {
				return fmt.Errorf("%s: check the leader epoch after a conflict: %w", key, err)
			}
			if err := s.fence(epoch); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if err := retry.Wait(ctx, attempt); err != nil {
				return fmt.Errorf("%s: retrying after a conflict: %w", key, err)
			}
		default:
			slot.cached = nil // the write may have landed
			return err
		}
	}
}

// bucketToWrite is bucket b as the slot's cache holds it, or as read when
// the cache holds nothing (fresh) and is then cached. The caller holds
// the slot.
func (s *Store) bucketToWrite(ctx context.Context, l *layout, b int) (st *bucketState, fresh bool, err error) {
	slot := &l.slots[b]
	if slot.cached != nil {
		if st, err := slot.cached.state(l, b); err == nil {
			return st, false, nil
		}
		slot.cached = nil
	}
	if st, err = s.readBucket(ctx, l, b); err != nil {
		return nil, false, err
	}
	slot.cached = cacheOf(st)
	return st, true, nil
}

// mergeBucket returns old with in joined (see Put), and whether anything
// changed. The bucket's epoch is the highest of its own, epoch (the
// writer's) and its records'. in is sorted, unique and normalised; old is
// not modified.
func mergeBucket(old *bucketObject, epoch int64, in []Record) (*bucketObject, bool) {
	out := make([]Record, 0, len(old.recs)+len(in))
	changed := false
	top := max(old.epoch, epoch)
	i, j := 0, 0
	for i < len(old.recs) || j < len(in) {
		switch {
		case j == len(in) || (i < len(old.recs) && old.recs[i].Name < in[j].Name):
			out = append(out, old.recs[i])
			i++
		case i == len(old.recs) || in[j].Name < old.recs[i].Name:
			out = append(out, in[j])
			top = max(top, in[j].Epoch)
			changed = true
			j++
		default:
			m := Merge(old.recs[i], in[j])
			if !Equal(m, old.recs[i]) {
				changed = true
			}
			top = max(top, m.Epoch)
			out = append(out, m)
			i++
			j++
		}
	}
	return &bucketObject{bucket: old.bucket, buckets: old.buckets, epoch: top, root: old.root, recs: out}, changed
}

// Merge is the join of the record lattice: the record that knows what a
// and b know together. It is associative, commutative and idempotent, so
// any order, grouping or repetition of merges gives one result, and it
// never loses what either side knows: the ceiling is the higher one, a
// deletion (Dead) stays, and a newer incarnation (Live) wins. a and b must
// describe the same name.
//
// Three groups are taken whole from the side that is greater in them,
// compared lexicographically:
//
//   - the observation (Ceiling, Mzxid, Czxid, Version): the znode as seen
//     by the write of the highest ceiling (a raise always raises it; among
//     equal ceilings the later zxid is the newer observation);
//   - the incarnation (Live, Start, End, Windows, Legacy): the newest
//     incarnation's configuration;
//   - Dead, Seen, Epoch and Updated, each on its own.
func Merge(a, b Record) Record {
	m := a
	if cmpObservation(a, b) < 0 {
		m.Ceiling, m.Mzxid, m.Czxid, m.Version = b.Ceiling, b.Mzxid, b.Czxid, b.Version
	}
	if cmpIncarnation(a, b) < 0 {
		m.Live, m.Start, m.End, m.Windows, m.Legacy = b.Live, b.Start, b.End, b.Windows, b.Legacy
	}
	m.Dead = max(a.Dead, b.Dead)
	m.Seen = max(a.Seen, b.Seen)
	m.Epoch = max(a.Epoch, b.Epoch)
	if b.Updated.After(a.Updated) {
		m.Updated = b.Updated
	}
	return m
}

func cmpObservation(a, b Record) int {
	return cmp.Or(cmp.Compare(a.Ceiling, b.Ceiling), cmp.Compare(a.Mzxid, b.Mzxid), cmp.Compare(a.Czxid, b.Czxid), cmp.Compare(a.Version, b.Version))
}

func cmpIncarnation(a, b Record) int {
	return cmp.Or(cmp.Compare(a.Live, b.Live), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End),
		cmp.Compare(a.Windows, b.Windows), cmpBool(a.Legacy, b.Legacy))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// Equal reports whether two records hold the same values (Updated compared
// as an instant).
func Equal(a, b Record) bool {
	return a.Name == b.Name && cmpObservation(a, b) == 0 && cmpIncarnation(a, b) == 0 &&
		a.Dead == b.Dead && a.Seen == b.Seen && a.Epoch == b.Epoch && a.Updated.Equal(b.Updated)
}
