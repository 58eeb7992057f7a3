package persist

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CompactResult says what one Compact did.
type CompactResult struct {
	// Segments is how many log segments were folded into bucket objects,
	// and Records how many records they held.
	Segments int
	Records  int
	// Buckets is how many bucket objects were written.
	Buckets int
	// Checkpoint is the log position every segment at or below which is
	// now folded.
	Checkpoint int64
	// Deleted is how many segments were deleted (this compaction's and
	// any an earlier, interrupted one left behind).
	Deleted int
}

// Compact folds the log into the bucket objects for a writer of leader
// epoch epoch: it reads every segment above the checkpoint, merges their
// records into the buckets they belong to (the merge of Put, by conditional
// write), then raises the checkpoint in the epoch object (a conditional
// write, so a newer primary's AdvanceEpoch fences it), and only then deletes
// the folded segments. A compaction stopped at any point loses nothing: the
// merge is idempotent, so segments folded before a checkpoint that was never
// written are folded again, and segments left behind after a checkpoint are
// deleted by the next compaction.
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
	v, err := s.readLog(ctx)
	if err == nil {
		err = s.fence(epoch)
	}
	if err != nil {
		return res, fmt.Errorf("store %s: compact: %w", s.b, err)
	}
	res.Checkpoint = v.ep.checkpoint
	if len(v.segs) > 0 {
		if err := s.fold(ctx, l, epoch, v.segs, &res); err != nil {
			return res, fmt.Errorf("store %s: compact: %w", s.b, err)
		}
	}
	ep, err := s.advanceCheckpoint(ctx, epoch, v.end())
	if err != nil {
		return res, fmt.Errorf("store %s: compact: %w", s.b, err)
	}
	res.Checkpoint = ep.checkpoint
	if res.Deleted, err = s.sweep(ctx, ep); err != nil {
		return res, fmt.Errorf("store %s: compact: %w", s.b, err)
	}
	if res.Segments > 0 {
		s.log.Debug().Int("segments", res.Segments).Int("records", res.Records).Int("buckets", res.Buckets).
			Int64("checkpoint", res.Checkpoint).Int("deleted", res.Deleted).Msg("store: compacted the log")
	}
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
	each(len(groups), s.opts.Parallelism, func(i int) {
		if err := s.putBucket(ctx, l, groups[i].bucket, epoch, groups[i].recs); err != nil {
			errs[i] = s.bucketError(l, groups[i].bucket, err)
		}
	})
	res.Buckets = len(groups)
	return errors.Join(errs...)
}

// advanceCheckpoint raises the checkpoint in the epoch object to at least
// pos (and the sweep mark to what this Store knows is deleted), by
// conditional write, unless a newer epoch holds the object.
func (s *Store) advanceCheckpoint(ctx context.Context, epoch, pos int64) (epochState, error) {
	for attempt := 0; ; attempt++ {
		ep, etag, err := s.readEpoch(ctx)
		if err != nil {
			return ep, err
		}
		s.observeEpoch(ep.epoch)
		if ep.epoch > epoch {
			return ep, fmt.Errorf("%w: leader epoch %d holds the store; this writer holds epoch %d", ErrFenced, ep.epoch, epoch)
		}
		s.seglog.mu.Lock()
		swept := max(ep.swept, min(s.seglog.swept, pos))
		s.seglog.mu.Unlock()
		if ep.checkpoint >= pos && ep.swept >= swept && ep.version == epochVersion {
			s.seglog.noteCheckpoint(ep)
			return ep, nil
		}
		next := ep
		next.checkpoint, next.swept, next.updated = max(ep.checkpoint, pos), swept, time.Now()
		_, err = s.b.Put(ctx, epochKey, encodeEpoch(next), etag)
		if errors.Is(err, ErrConflict) {
			if err := retry.Wait(ctx, attempt); err != nil {
				return ep, fmt.Errorf("write the checkpoint: %w", err)
			}
			continue
		}
		if err != nil {
			return ep, fmt.Errorf("write the checkpoint %d: %w", next.checkpoint, err)
		}
		s.seglog.noteCheckpoint(next)
		return next, nil
	}
}

// sweep deletes the segments above the sweep mark and at or below the
// checkpoint of ep, and returns how many it deleted. The next checkpoint
// write records the new sweep mark.
func (s *Store) sweep(ctx context.Context, ep epochState) (int, error) {
	from, to := ep.swept+1, ep.checkpoint
	if to < from {
		return 0, nil
	}
	n := int(to - from + 1)
	errs := make([]error, n)
	each(n, s.opts.Parallelism, func(i int) {
		errs[i] = s.b.Delete(ctx, segmentKey(from+int64(i)))
	})
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("delete folded log segments: %w", err)
	}
	s.seglog.mu.Lock()
	s.seglog.swept = max(s.seglog.swept, to)
	s.seglog.mu.Unlock()
	return n, nil
}
