package persist

import (
	"context"
	"errors"
	"fmt"
)

// Tombstone records that the incarnation of sequence name that has handed
// out IDs up to at most ceiling, and every incarnation before it, is
// deleted: a restore never brings it back, and a sequence created later
// under the name starts above ceiling. It reads the record first and
// deletes the incarnation the store knows too (Dead is at least its Live):
// a delete reads its sequence in ZooKeeper while it exists, and no new
// incarnation can be born under the name while it does.
//
// It writes as the current leader epoch (a tombstone joins like every
// record, so it can neither lower anything nor fence the primary) and
// returns the stored record once it holds the tombstone. It fails with
// ErrOtherIncarnation, having deleted nothing that was live, when the store
// meanwhile learnt of a newer incarnation (the caller should read the
// sequence again). A tombstone always deletes something: at least ID 1 is
// taken as issued (a registration with start 1 deleted before it was
// initialised starts at 2 when created again).
func (s *Store) Tombstone(ctx context.Context, name string, ceiling int64) (Record, error) {
	if ceiling < 0 {
		return Record{}, fmt.Errorf("store %s: tombstone %q: negative ceiling %d", s.b, name, ceiling)
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.Get(ctx, name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Record{}, err
		}
		dead := max(ceiling, cur.Live, 1)
		epoch, _, err := s.Epoch(ctx)
		if err != nil {
			return Record{}, err
		}
		err = s.Put(ctx, epoch, Record{Name: name, Ceiling: dead, Dead: dead})
		if errors.Is(err, ErrFenced) && attempt < 3 {
			continue // a primary advanced the epoch meanwhile: write as the new one
		}
		if err != nil {
			return Record{}, err
		}
		got, err := s.Get(ctx, name)
		if err != nil {
			return Record{}, err
		}
		if !got.Deleted() {
			return got, fmt.Errorf("store %s: tombstone of %q up to %d did not take: %w (born at %d)", s.b, name, dead, ErrOtherIncarnation, got.Live)
		}
		return got, nil
	}
}

// Bury writes the tombstone of sequence name (Tombstone) and returns the
// ceiling it holds: the store is the seqzk.Tombstoner of a delete
// (sequence.Client.Delete). A newer incarnation is ErrOtherIncarnation,
// whose ReadAgain method says to read the sequence again.
func (s *Store) Bury(ctx context.Context, name string, ceiling int64) (int64, error) {
	rec, err := s.Tombstone(ctx, name, ceiling)
	if err != nil {
		return 0, err
	}
	return rec.Ceiling, nil
}

// readAgainError is an error after which the caller should read the
// sequence again and retry (ErrOtherIncarnation).
type readAgainError string

func (e readAgainError) Error() string { return string(e) }

// ReadAgain reports that the caller should read the sequence again.
func (readAgainError) ReadAgain() bool { return true }
