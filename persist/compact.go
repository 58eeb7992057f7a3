package persist

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
)

// CompactResult says what one Compact did.
type CompactResult struct {
	// Segments is how many log segments were folded into bucket objects,
	// and Records how many records they held.
	Segments int
	Records  int
	// Buckets is how many bucket objects were written.
	Buckets int
	// Deleted is how many segments were deleted after their fold.
	Deleted int
}

// Compact folds the log into the bucket objects for a writer of leader
// epoch epoch: it lists and reads every segment, merges their records into
// the buckets they belong to (the merge of Put, by conditional write), and
// only then deletes the folded segments. A compaction stopped at any point
// loses nothing: the merge is idempotent, so segments folded and not yet
// deleted are folded again by the next one, and a reader finds a deleted
// segment's records in the buckets.
//
// One Compact runs at a time per Store; Puts go on meanwhile. It returns
// ErrFenced (wrapped) when a newer epoch holds the store.
func (s *Store) Compact(ctx context.Context, epoch int64) (CompactResult, error) {
	var res CompactResult
	l, err := s.layout(ctx)
	if err != nil {
		return res, err
	}
	if err := acquire(ctx, s.compactSem); err != nil {
		return res, fmt.Errorf("store %s: compact: waiting for this store's other compaction: %w", s.b, err)
	}
	defer release(s.compactSem)
	v, err := s.readLog(ctx, l)
	if err == nil {
		err = s.fence(epoch)
	}
	if err != nil {
		return res, fmt.Errorf("store %s: compact: %w", s.b, err)
	}
	if len(v.segs) == 0 {
		return res, nil
	}
	if err := s.fold(ctx, l, epoch, v.segs, &res); err != nil {
		return res, fmt.Errorf("store %s: compact: %w", s.b, err)
	}
	errs := make([]error, len(v.segs))
	parallel.Each(len(v.segs), s.opts.Parallelism, func(i int) {
		errs[i] = s.b.Delete(ctx, segmentKey(v.segs[i].pos))
	})
	for _, err := range errs {
		if err == nil {
			res.Deleted++
		}
	}
	s.seglog.pending.Add(-int64(res.Deleted))
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("store %s: compact: delete folded log segments (the next compaction deletes them): %w", s.b, err)
	}
	s.log.Debug().Int("segments", res.Segments).Int("records", res.Records).Int("buckets", res.Buckets).
		Int("deleted", res.Deleted).Msg("store: compacted the log")
	return res, nil
}

// fold merges the records of segs into their buckets.
func (s *Store) fold(ctx context.Context, l *layout, epoch int64, segs []*segment, res *CompactResult) error {
	var recs []Record
	for _, sg := range segs {
		res.Segments++
		res.Records += len(sg.recs)
		recs = append(recs, sg.recs...)
	}
	groups := groupByBucket(mergeSorted(recs), l.n)
	errs := make([]error, len(groups))
	parallel.Each(len(groups), s.opts.Parallelism, func(i int) {
		if err := s.putBucket(ctx, l, groups[i].bucket, epoch, groups[i].recs); err != nil {
			errs[i] = s.bucketError(l, groups[i].bucket, err)
		}
	})
	res.Buckets = len(groups)
	return errors.Join(errs...)
}
