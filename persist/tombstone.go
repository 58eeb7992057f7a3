package persist

import (
	"context"
	"errors"
	"fmt"
)

// Tombstone records that the sequence name, whose znode has creation zxid
// czxid, is deleted, with at least ceiling: a sequence created later under
// the name starts above it. It writes as the current leader epoch (a
// tombstone merges by max like every record, so it can neither lower a
// ceiling nor fence the primary) and returns nil only once the store holds
// the tombstone. It fails, writing nothing that matters, when the store's
// record describes another incarnation of the znode (the caller should read
// the znode again).
func (s *Store) Tombstone(ctx context.Context, name string, ceiling, czxid int64) (Record, error) {
	for attempt := 0; ; attempt++ {
		epoch, _, err := s.Epoch(ctx)
		if err != nil {
			return Record{}, err
		}
		err = s.Put(ctx, epoch, Record{Name: name, Ceiling: ceiling, Czxid: czxid, Deleted: true})
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
		if !got.Deleted || got.Ceiling < ceiling {
			return got, fmt.Errorf("store %s: tombstone of %q (creation zxid %#x) did not take: %w (creation zxid %#x)", s.b, name, czxid, ErrOtherIncarnation, got.Czxid)
		}
		return got, nil
	}
}
