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
// When it returns nil, every record's ceiling is durable: the stored ceiling
// is at least the one given (the caller may raise ZooKeeper to it).
//
// Records are merged into what is stored, never written over it:
//
//   - Ceiling becomes the maximum of the stored and the new one. A stored
//     ceiling never decreases, whoever writes and in whatever order.
//   - The other fields (Czxid, Mzxid, Version, Legacy, Deleted, Updated)
//     describe one observation of the znode and are taken together from the
//     record with the higher (Ceiling, Mzxid). The ceiling comes first
//     because it is the one order that survives a ZooKeeper wipe (zxids
//     restart with a new ensemble; ceilings are restored above the stored
//     ones). Among equal ceilings the later zxid is the newer observation.
//     A record with a lower ceiling, or an equal ceiling and an older Mzxid,
//     is stale (a deposed primary, or a slow goroutine of this one) and
//     changes nothing. To record a new observation a caller must raise the
//     ceiling or report a later Mzxid.
//   - On an exact tie of (Ceiling, Mzxid) the later write wins (fencing
//     means its writer is the same primary or a newer one).
//   - A tombstone sticks to the znode it was written for (its Czxid): a
//     record for the same znode, even with a higher ceiling, keeps Deleted,
//     so a primary raising the znode while an operator deletes it cannot
//     undo the deletion. Only a record of a re-created znode (another
//     Czxid) clears it.
//   - Epoch becomes epoch for every record written; Updated is stamped
//     with the current time when zero.
//
// One Put is one new object: a log segment holding recs (see log.go), all
// or nothing. Compact later folds it into the bucket objects.
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
		if recs[i].Name == "" {
			return fmt.Errorf("store %s: put: record %d has no name", s.b, i)
		}
		if recs[i].Ceiling < 0 {
			return fmt.Errorf("store %s: put %q: negative ceiling %d", s.b, recs[i].Name, recs[i].Ceiling)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if _, err := s.layout(ctx); err != nil {
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
	sg := &segment{epoch: epoch, recs: normalise(recs, epoch, time.Now())}
	if _, err := s.appendSegment(ctx, sg); err != nil {
		if errors.Is(err, ErrFenced) {
			s.log.Warn().Int64("epoch", epoch).Err(err).Msg("store: writer fenced")
		}
		return fmt.Errorf("store %s: write %d records: %w", s.b, len(sg.recs), err)
	}
	return nil
}

// normalise returns recs sorted by name, each name once (merged in order),
// with Epoch set to epoch and Updated to the millisecond (now when zero).
func normalise(recs []Record, epoch int64, now time.Time) []Record {
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		r.Epoch = epoch
		if r.Updated.IsZero() {
			r.Updated = now
		}
		r.Updated = time.UnixMilli(r.Updated.UnixMilli()).UTC()
		out = append(out, r)
	}
	return mergeSorted(out)
}

// mergeSorted sorts recs by name (stably) and merges the records of each
// name in their order, keeping the epoch of the record that wins.
func mergeSorted(recs []Record) []Record {
	slices.SortStableFunc(recs, func(x, y Record) int { return cmp.Compare(x.Name, y.Name) })
	out := recs[:0]
	for _, r := range recs {
		if k := len(out) - 1; k >= 0 && out[k].Name == r.Name {
			out[k] = mergeRecord(out[k], r)
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
		fresh := false
		if slot.cached == nil {
			st, err := s.readBucket(ctx, l, b)
			if err != nil {
				return err
			}
			slot.cached, fresh = st, true
		}
		st := slot.cached
		if st.obj.epoch > epoch {
			return fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, st.obj.epoch, epoch)
		}
		merged, changed := mergeBucket(st.obj, epoch, recs)
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
			slot.cached = &bucketState{etag: etag, obj: merged}
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

// mergeBucket returns old with in merged (see Put), and whether anything
// changed: a changed record takes the epoch of the record merged in, and
// the bucket the highest of its own and epoch (the writer's). in is sorted,
// unique and normalised; old is not modified.
func mergeBucket(old *bucketObject, epoch int64, in []Record) (*bucketObject, bool) {
	out := make([]Record, 0, len(old.recs)+len(in))
	changed := false
	i, j := 0, 0
	for i < len(old.recs) || j < len(in) {
		switch {
		case j == len(in) || (i < len(old.recs) && old.recs[i].Name < in[j].Name):
			out = append(out, old.recs[i])
			i++
		case i == len(old.recs) || in[j].Name < old.recs[i].Name:
			out = append(out, in[j])
			changed = true
			j++
		default:
			o := old.recs[i]
			m := mergeRecord(o, in[j])
			if sameRecord(m, o) {
				m = o
			} else {
				m.Epoch = in[j].Epoch
				changed = true
			}
			out = append(out, m)
			i++
			j++
		}
	}
	return &bucketObject{bucket: old.bucket, buckets: old.buckets, epoch: max(old.epoch, epoch), recs: out}, changed
}

// mergeRecord is the merge rule of Put for one name.
func mergeRecord(old, in Record) Record {
	m := old
	switch {
	case in.Deleted && !old.Deleted && (sameZnode(old, in) || in.Ceiling >= old.Ceiling):
		// A tombstone of the znode the record describes wins whatever its
		// ceiling: the delete read the znode before a raise that the
		// store has since seen (the raise's ceiling is kept below). A
		// tombstone of another znode wins when it covers the record's
		// ceiling: nothing is lost, and the record may describe a znode
		// of a history a ZooKeeper restore threw away, which a sequence
		// whose ceiling cannot rise (its space is used up) never replaces.
		m = in
	case in.Ceiling > old.Ceiling || (in.Ceiling == old.Ceiling && in.Mzxid >= old.Mzxid):
		m = in
		// A tombstone sticks to the znode it was written for: a primary
		// still raising that znode (it races the delete) must not undo
		// it. Only a re-created znode (another creation zxid) clears it.
		if old.Deleted && (sameZnode(old, in) || in.Ceiling == old.Ceiling && in.Mzxid == old.Mzxid) {
			m.Deleted = true
		}
	}
	m.Ceiling = max(old.Ceiling, in.Ceiling)
	return m
}

// sameZnode reports whether two records describe one incarnation of a
// sequence znode. A creation zxid of 0 is unknown (a znode restored from
// the store and not yet seen by the primary) and matches any.
func sameZnode(a, b Record) bool {
	return a.Czxid == b.Czxid || a.Czxid == 0 || b.Czxid == 0
}

// sameRecord compares everything a write would change, except Epoch.
func sameRecord(a, b Record) bool {
	return a.Name == b.Name && a.Ceiling == b.Ceiling && a.Czxid == b.Czxid && a.Mzxid == b.Mzxid &&
		a.Version == b.Version && a.Legacy == b.Legacy && a.Deleted == b.Deleted && a.Updated.Equal(b.Updated) &&
		a.Start == b.Start && a.End == b.End && a.Windows == b.Windows
}
