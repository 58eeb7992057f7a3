package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Seal makes every bucket object carry leader epoch epoch, re-writing by
// conditional write each bucket that carries a lower one (creating missing
// ones), and returns every record, tombstones included, sorted by name. A
// primary calls it after AdvanceEpoch, before acting on what the store
// holds. Once Seal has returned nil, no writer of a lower epoch can change
// any bucket (a bucket with a higher epoch is never written, and a write
// that raced the seal fails on its ETag, so the seal read it), and the
// records returned include every write of every earlier epoch: a new
// primary's view of the store is complete, and a deposed primary's late
// writes are refused rather than merely harmless.
//
// Transient read and write errors are retried a few times. Like Load, Seal
// returns the records of the buckets it could read and a BucketError for
// each it could not (see Affects); ErrFenced when a bucket carries a
// higher epoch.
func (s *Store) Seal(ctx context.Context, epoch int64) ([]Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return nil, err
	}
	parts := make([][]Record, l.n)
	errs := make([]error, l.n)
	each(l.n, s.opts.Parallelism, func(b int) {
		recs, err := s.sealBucket(ctx, l, b, epoch)
		if err != nil {
			errs[b] = s.bucketError(l, b, err)
			return
		}
		parts[b] = recs
	})
	recs := slices.Concat(parts...)
	slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Name, b.Name) })
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return recs, fmt.Errorf("store %s: seal: %w", s.b, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return recs, fmt.Errorf("store %s: seal: %w", s.b, err)
	}
	return recs, nil
}

// sealBucketAttempts bounds the retries of one bucket's seal after
// transient errors.
const sealBucketAttempts = 5

func (s *Store) sealBucket(ctx context.Context, l *layout, b int, epoch int64) ([]Record, error) {
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
		case st.obj.epoch == epoch && st.etag != "":
			slot.cached = st
			return st.obj.recs, nil
		}
		sealed := *st.obj
		sealed.epoch = epoch
		data, err := encodeBucket(&sealed)
		if err != nil {
			return nil, fmt.Errorf("%s: encode: %w", key, err)
		}
		etag, err := s.b.Put(ctx, key, data, st.etag)
		if err != nil {
			last = err // a conflict: someone wrote it; read again
			continue
		}
		slot.cached = &bucketState{etag: etag, obj: &sealed}
		return sealed.recs, nil
	}
	return nil, fmt.Errorf("%s: seal for leader epoch %d: %w", key, epoch, last)
}
