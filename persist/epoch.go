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
		return epochState{}, "", fmt.Errorf("epoch object %q: %w", epochKey, err)
	}
	return st, etag, nil
}

// Epoch returns the current leader epoch (0 before the first AdvanceEpoch)
// and the holder that advanced it.
func (s *Store) Epoch(ctx context.Context) (int64, string, error) {
	if _, err := s.layout(ctx); err != nil {
		return 0, "", err
	}
	st, _, err := s.readEpoch(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("store %s: %w", s.b, err)
	}
	s.observeEpoch(st.epoch)
	return st.epoch, st.holder, nil
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
		next := cur // keeping the log's checkpoint
		next.epoch, next.holder, next.updated = max(cur.epoch, s.maxEpoch.Load())+1, holder, time.Now()
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
