package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Get returns the record of the sequence name, tombstones included, read from
// the backend (its bucket object and the log above the checkpoint). It
// returns an error wrapping ErrNotFound when the store has no record of the
// name.
func (s *Store) Get(ctx context.Context, name string) (Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return Record{}, err
	}
	b := bucketOf(name, l.n)
	var st *bucketState
	v, err := s.readView(ctx, l, func() error {
		var err error
		st, err = s.readBucket(ctx, l, b)
		if err != nil {
			return s.bucketError(l, b, err)
		}
		return nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("store %s: get %q: %w", s.b, name, err)
	}
	l.offerCache(b, st)
	var recs []Record
	if i, ok := slices.BinarySearchFunc(st.obj.recs, name, byName); ok {
		recs = append(recs, st.obj.recs[i])
	}
	for _, sg := range v.segs {
		if i, ok := slices.BinarySearchFunc(sg.recs, name, byName); ok {
			recs = append(recs, sg.recs[i])
		}
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("store %s: sequence %q: %w", s.b, name, ErrNotFound)
	}
	return mergeSorted(recs)[0], nil
}

func byName(r Record, name string) int { return cmp.Compare(r.Name, name) }

// Load returns every record in the store, tombstones included, sorted by
// name. It reads all buckets in parallel (StoreOptions.Parallelism) and the
// log above the checkpoint.
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
	var parts [][]Record
	var berr error
	v, err := s.readView(ctx, l, func() error {
		parts, berr = s.loadBuckets(ctx, l, func(b int) (*bucketState, error) {
			st, err := s.readBucket(ctx, l, b)
			if err == nil {
				l.offerCache(b, st)
			}
			return st, err
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: load: %w", s.b, err)
	}
	recs := withLog(parts, v.segs, berr)
	if berr != nil {
		return recs, fmt.Errorf("store %s: load: %w", s.b, berr)
	}
	return recs, nil
}

// loadBuckets reads every bucket with read, in parallel. It returns the
// records of each bucket it could read and a BucketError for each it could
// not.
func (s *Store) loadBuckets(ctx context.Context, l *layout, read func(b int) (*bucketState, error)) ([][]Record, error) {
	parts := make([][]Record, l.n)
	errs := make([]error, l.n)
	each(l.n, s.opts.Parallelism, func(b int) {
		st, err := read(b)
		if err != nil {
			errs[b] = s.bucketError(l, b, err)
			return
		}
		parts[b] = st.obj.recs
	})
	return parts, errors.Join(errs...)
}

// withLog merges the buckets' records and the segments' (in log order) into
// one list sorted by name. A name of a bucket that could not be read (in
// berr) gets nothing from the log either: a record built from the log alone
// could be lower than the one in the unreadable bucket.
func withLog(parts [][]Record, segs []*segment, berr error) []Record {
	recs := slices.Concat(parts...)
	for _, sg := range segs {
		for _, r := range sg.recs {
			if berr == nil || !Affects(berr, r.Name) {
				recs = append(recs, r)
			}
		}
	}
	return mergeSorted(recs)
}
