package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Get returns the record of the sequence name, tombstones included, read from
// the backend (not the cache). It returns an error wrapping ErrNotFound when
// the store has no record of the name.
func (s *Store) Get(ctx context.Context, name string) (Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return Record{}, err
	}
	b := bucketOf(name, l.n)
	st, err := s.readBucket(ctx, l, b)
	if err != nil {
		return Record{}, fmt.Errorf("store %s: get %q: %w", s.b, name, s.bucketError(l, b, err))
	}
	l.offerCache(b, st)
	i, ok := slices.BinarySearchFunc(st.obj.recs, name, func(r Record, n string) int { return cmp.Compare(r.Name, n) })
	if !ok {
		return Record{}, fmt.Errorf("store %s: sequence %q: %w", s.b, name, ErrNotFound)
	}
	return st.obj.recs[i], nil
}

// Load returns every record in the store, tombstones included, sorted by
// name. It reads all buckets in parallel (StoreOptions.Parallelism).
//
// If err is not nil the result is incomplete: the records of the buckets
// named in err (BucketErrors; see Affects) are missing, and a caller
// restoring from it must not take a missing name for a sequence the store
// never had.
func (s *Store) Load(ctx context.Context) ([]Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return nil, err
	}
	parts := make([][]Record, l.n)
	errs := make([]error, l.n)
	each(l.n, s.opts.Parallelism, func(b int) {
		st, err := s.readBucket(ctx, l, b)
		if err != nil {
			errs[b] = s.bucketError(l, b, err)
			return
		}
		l.offerCache(b, st)
		parts[b] = st.obj.recs
	})
	recs := slices.Concat(parts...)
	slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Name, b.Name) })
	if err := errors.Join(errs...); err != nil {
		return recs, fmt.Errorf("store %s: load: %w", s.b, err)
	}
	return recs, nil
}
