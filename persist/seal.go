package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// Seal makes the store this writer's for leader epoch epoch, and returns
// every record, tombstones included, sorted by name. A primary calls it
// after AdvanceEpoch, before acting on what the store holds. It re-writes by
// conditional write every bucket object that carries a lower epoch (creating
// missing ones), reads the log, and appends an empty segment of its own at
// the log's tail. Once Seal has returned nil, no writer of a lower epoch can
// change any bucket (a bucket with a higher epoch is never written, and a
// write that raced the seal fails on its ETag, so the seal read it) or add
// to the log unseen (it meets the seal's segment, or reads the newer epoch
// after its write), and the records returned include every write of every
// earlier epoch: a new primary's view of the store is complete, and a
// deposed primary's late writes are refused rather than merely harmless.
//
// Transient read and write errors of buckets are retried a few times. Like
// Load, Seal returns the records of the buckets it could read and a
// BucketError for each it could not (see Affects); ErrFenced when an object
// carries a higher epoch. An unreadable log segment fails the whole seal:
// it could hold any sequence's ceiling.
func (s *Store) Seal(ctx context.Context, epoch int64) ([]Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return nil, err
	}
	if err := acquire(ctx, s.seglog.appendSem); err != nil {
		return nil, fmt.Errorf("store %s: seal: waiting for this store's other write: %w", s.b, err)
	}
	defer release(s.seglog.appendSem)
	if err := s.ensureLog(ctx, l); err != nil {
		return nil, fmt.Errorf("store %s: seal: %w", s.b, err)
	}
	var parts [][]Record
	var berr error
	v, err := s.readView(ctx, l, func() error {
		parts, berr = s.loadBuckets(ctx, l, func(b int) (*bucketState, error) { return s.sealBucket(ctx, l, b, epoch) })
		if errors.Is(berr, ErrFenced) {
			return berr
		}
		return nil
	})
	if err == nil {
		err = s.fence(epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: seal: %w", s.b, err)
	}
	s.seglog.tail.Store(max(s.seglog.tail.Load(), v.last+1))
	s.seglog.pending.Store(int64(len(v.segs)))
	others, err := s.appendSegment(ctx, l, &segment{epoch: epoch})
	if err != nil {
		return nil, fmt.Errorf("store %s: seal: claim the log's tail: %w", s.b, err)
	}
	recs := withLog(parts, append(v.segs, others...), berr)
	if berr != nil {
		return recs, fmt.Errorf("store %s: seal: %w", s.b, berr)
	}
	return recs, nil
}

// sealBucketAttempts bounds the retries of one bucket's seal after
// transient errors.
const sealBucketAttempts = 5

func (s *Store) sealBucket(ctx context.Context, l *layout, b int, epoch int64) (*bucketState, error) {
	slot := &l.slots[b]
	key := bucketKey(b)
	if err := acquire(ctx, slot.sem); err != nil {
		return nil, fmt.Errorf("%s: waiting for this store's other write: %w", key, err)
	}
	defer release(slot.sem)
	var last error
	for attempt := 0; attempt < sealBucketAttempts; attempt++ {
		if attempt > 0 {
			if err := retry.Wait(ctx, attempt); err != nil {
				return nil, fmt.Errorf("%s: %w (after %v)", key, err, last)
			}
		}
		slot.cached = nil
		st, err := s.readBucket(ctx, l, b)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
			return nil, err // waiting does not mend it
		}
		if err != nil {
			last = err
			continue
		}
		switch {
		case st.obj.epoch > epoch:
			return nil, fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, st.obj.epoch, epoch)
		case st.obj.epoch == epoch && st.etag != "" && (st.obj.root == l.root || l.root == ""):
			slot.cached = cacheOf(st)
			return st, nil
		}
		sealed := *st.obj
		sealed.epoch = epoch
		sealed.root = cmp.Or(l.root, sealed.root)
		data, err := encodeBucket(&sealed)
		if err != nil {
			return nil, fmt.Errorf("%s: encode: %w", key, err)
		}
		etag, err := s.b.Put(ctx, key, data, st.etag)
		if err != nil {
			last = err // a conflict: someone wrote it; read again
			continue
		}
		slot.cached = &cachedBucket{etag: etag, data: data}
		return &bucketState{etag: etag, data: data, obj: &sealed}, nil
	}
	return nil, fmt.Errorf("%s: seal for leader epoch %d: %w", key, epoch, last)
}
