package persist

import (
	"context"
	"errors"
	"fmt"
)

// BucketError is a failure confined to one bucket object. Put, Get and Load
// return it (wrapped) so a caller can tell which sequences a failure concerns
// and keep serving the others; see Affects.
type BucketError struct {
	Key     string // the object's key
	Bucket  int    // its index
	Buckets int    // the store's bucket count
	Err     error
}

// Error is the inner error's message, which names the key.
func (e *BucketError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is see ErrCorrupt, ErrConflict, ErrFenced and the rest.
func (e *BucketError) Unwrap() error { return e.Err }

// Holds reports whether the sequence name is kept in this bucket.
func (e *BucketError) Holds(name string) bool { return bucketOf(name, e.Buckets) == e.Bucket }

// Affects reports whether err, returned by a read (Get, GetMany, Load) or
// Compact, may concern the sequence name. (A Put is one log segment, all or
// nothing: its error concerns every record it carried.) It is false only when every failure in err is a BucketError
// for a bucket that does not hold name, so that a corrupt or unreadable
// bucket marks only its own sequences unhealthy.
func Affects(err error, name string) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *BucketError:
		return e.Holds(name)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if Affects(inner, name) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		inner := e.Unwrap()
		return inner == nil || Affects(inner, name)
	default:
		return true
	}
}

// Partial reports whether err, returned by Load or Seal, concerns only some
// buckets: every failure in it is a BucketError, so the records of every
// other bucket were read.
func Partial(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *BucketError:
		return true
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if !Partial(inner) {
				return false
			}
		}
		return len(e.Unwrap()) > 0
	case interface{ Unwrap() error }:
		return Partial(e.Unwrap())
	default:
		return false
	}
}

// readBucket reads and checks bucket b. A missing object is an empty bucket;
// anything unreadable is an error, never an empty bucket.
func (s *Store) readBucket(ctx context.Context, l *layout, b int) (*bucketState, error) {
	key := bucketKey(b)
	data, etag, err := s.b.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return &bucketState{obj: &bucketObject{bucket: b, buckets: l.n, root: l.root}}, nil
	}
	if err != nil {
		return nil, err
	}
	obj, err := decodeBucket(data)
	err = s.explain(ctx, err)
	if err == nil {
		err = checkBucket(obj, b, l.n, l.root)
	}
	if err != nil {
		s.log.Error().Str("key", key).Err(err).Msg("store: unreadable bucket object")
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	s.observeEpoch(obj.epoch)
	return &bucketState{etag: etag, data: data, obj: obj}, nil
}

func (s *Store) bucketError(l *layout, b int, err error) error {
	return &BucketError{Key: bucketKey(b), Bucket: b, Buckets: l.n, Err: err}
}

// offerCache caches a bucket read outside a write, unless a writer holds the
// slot or something is cached already (which may be newer).
func (l *layout) offerCache(b int, st *bucketState) {
	slot := &l.slots[b]
	select {
	case slot.sem <- struct{}{}:
		if slot.cached == nil {
			slot.cached = cacheOf(st)
		}
		release(slot.sem)
	default:
	}
}
