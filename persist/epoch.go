package persist

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// observeEpoch records that leader epoch e has written to the store.
func (s *Store) observeEpoch(e int64) {
	for {
		cur := s.maxEpoch.Load()
		if e <= cur || s.maxEpoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// fence fails if a leader epoch above epoch has been seen.
func (s *Store) fence(epoch int64) error {
	if seen := s.maxEpoch.Load(); seen > epoch {
		return fmt.Errorf("%w: leader epoch %d has written to the store; this writer holds epoch %d", ErrFenced, seen, epoch)
	}
	return nil
}

// refreshEpoch reads the epoch object unless a read that started at or after
// notBefore (a now() reading) has already been done.
func (s *Store) refreshEpoch(ctx context.Context, notBefore int64) error {
	if s.epochRead.Load() >= notBefore {
		return nil
	}
	if err := acquire(ctx, s.epochSem); err != nil {
		return err
	}
	defer release(s.epochSem)
	if s.epochRead.Load() >= notBefore {
		return nil // another goroutine read it while we waited
	}
	start := s.now()
	st, _, err := s.readEpoch(ctx)
	if err != nil {
		return err
	}
	s.observeEpoch(st.epoch)
	s.epochRead.Store(start)
	return nil
}

// confirmEpoch reads the epoch object after a write of leader epoch epoch
// (so that the write's caller learns of a newer primary) and repairs it
// when it names an older epoch than the writer holds: it was lost, or
// rolled back to an older version. Repaired, it names the writer's epoch,
// so a deposed writer below it is fenced at its next write; and a newer
// primary's AdvanceEpoch is past it, since every epoch a writer holds was
// once in the object and AdvanceEpoch goes past every epoch it has seen.
func (s *Store) confirmEpoch(ctx context.Context, epoch int64) error {
	for attempt := 0; ; attempt++ {
		start := s.now()
		ep, etag, err := s.readEpoch(ctx)
		if err != nil {
			return fmt.Errorf("the epoch object could not be read to confirm it: %w", err)
		}
		s.observeEpoch(ep.epoch)
		s.epochRead.Store(start)
		if ep.epoch > epoch {
			return fmt.Errorf("%w: leader epoch %d holds the store; this writer holds epoch %d", ErrFenced, ep.epoch, epoch)
		}
		if ep.epoch == epoch || epoch == 0 {
			return nil
		}
		how := "lost"
		if etag != "" {
			how = fmt.Sprintf("rolled back to epoch %d", ep.epoch)
		}
		next := epochState{epoch: epoch, holder: ep.holder, updated: time.Now()}
		if err := s.recordReleaseOver(ctx, ep); err != nil {
			return err
		}
		_, err = s.b.Put(ctx, epochKey, encodeEpoch(next), etag)
		if errors.Is(err, ErrConflict) {
			if err := retry.Wait(ctx, attempt); err != nil {
				return fmt.Errorf("repair the epoch object: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("repair the epoch object (%s): %w", how, err)
		}
		s.repairs.Add(1)
		s.log.Warn().Int64("epoch", epoch).Str("was", how).Msg("store: the epoch object was lost or rolled back; rebuilt with the writer's epoch")
		return nil
	}
}

// readEpoch reads the epoch object; a missing one is epoch 0 with ETag "".
func (s *Store) readEpoch(ctx context.Context) (epochState, string, error) {
	data, etag, err := s.b.Get(ctx, epochKey)
	if errors.Is(err, ErrNotFound) {
		return epochState{}, "", nil
	}
	if err != nil {
		return epochState{}, "", fmt.Errorf("read epoch object: %w", err)
	}
	st, err := decodeEpoch(data)
	if err != nil {
		return epochState{}, "", fmt.Errorf("epoch object %q: %w", epochKey, s.explain(ctx, err))
	}
	return st, etag, nil
}

// Epoch returns the current leader epoch (0 before the first AdvanceEpoch)
// and the holder that advanced it: the epoch object's, or the highest
// epoch this Store has seen in any object if that is higher (the object
// was lost or rolled back).
func (s *Store) Epoch(ctx context.Context) (int64, string, error) {
	if _, err := s.layout(ctx); err != nil {
		return 0, "", err
	}
	st, _, err := s.readEpoch(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("store %s: %w", s.b, err)
	}
	s.observeEpoch(st.epoch)
	return max(st.epoch, s.maxEpoch.Load()), st.holder, nil
}

// AdvanceEpoch makes holder (a replica's identity, for operators) the holder
// of a new leader epoch and returns it. A primary calls it on taking
// leadership, before its first Put, and writes with the returned epoch from
// then on; every writer with a lower epoch is fenced from then on.
//
// The increment is a conditional write, retried after re-reading when
// another contender wins the race, so concurrent callers get distinct,
// increasing epochs. They need not be consecutive: a write whose reply was
// lost is retried and may skip one. It returns when the write succeeds or
// fails for another reason, or when ctx is done.
func (s *Store) AdvanceEpoch(ctx context.Context, holder string) (int64, error) {
	if _, err := s.layout(ctx); err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		start := s.now()
		cur, etag, err := s.readEpoch(ctx)
		if err != nil {
			return 0, fmt.Errorf("store %s: advance epoch: %w", s.b, err)
		}
		// Past every epoch seen anywhere, not only the epoch object's: if
		// that object was lost, buckets still carry their writers'
		// epochs, and a new epoch below them would be fenced by them.
		next := epochState{epoch: max(cur.epoch, s.maxEpoch.Load()) + 1, holder: holder, updated: time.Now()}
		if err := s.recordReleaseOver(ctx, cur); err != nil {
			return 0, fmt.Errorf("store %s: advance epoch: %w", s.b, err)
		}
		_, err = s.b.Put(ctx, epochKey, encodeEpoch(next), etag)
		if errors.Is(err, ErrConflict) {
			s.log.Debug().Int64("epoch", cur.epoch).Msg("store: lost a race to advance the epoch; retrying")
			if err := retry.Wait(ctx, attempt); err != nil {
				return 0, fmt.Errorf("store %s: advance epoch: %w", s.b, err)
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("store %s: advance epoch to %d: %w", s.b, next.epoch, err)
		}
		s.observeEpoch(next.epoch)
		s.epochRead.Store(start)
		s.log.Info().Int64("epoch", next.epoch).Str("holder", holder).Str("previous_holder", cur.holder).Msg("store: advanced the leader epoch")
		return next.epoch, nil
	}
}
