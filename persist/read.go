package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
)

// Get returns the record of the sequence name, tombstones included, read from
// the backend (its bucket object and the log). It returns an error wrapping
// ErrNotFound when the store has no record of the name.
func (s *Store) Get(ctx context.Context, name string) (Record, error) {
	recs, err := s.GetMany(ctx, []string{name})
	if err != nil {
		return Record{}, fmt.Errorf("store %s: get %q: %w", s.b, name, err)
	}
	r, ok := recs[name]
	if !ok {
		return Record{}, fmt.Errorf("store %s: sequence %q: %w", s.b, name, ErrNotFound)
	}
	return r, nil
}

// GetMany returns the records of names that the store holds, by name,
// read from the backend in one reading of the log and of the bucket
// objects that hold them (in parallel): what Get does for one, for many at
// the cost of about one. A name the store has no record of is not in the
// map.
func (s *Store) GetMany(ctx context.Context, names []string) (map[string]Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(names))
	var buckets []int
	seen := make(map[int]bool)
	for _, name := range names {
		want[name] = true
		if b := bucketOf(name, l.n); !seen[b] {
			seen[b] = true
			buckets = append(buckets, b)
		}
	}
	states := make([]*bucketState, len(buckets))
	v, err := s.readView(ctx, l, func() error {
		errs := make([]error, len(buckets))
		parallel.Each(len(buckets), s.opts.Parallelism, func(i int) {
			if states[i], errs[i] = s.readBucket(ctx, l, buckets[i]); errs[i] != nil {
				errs[i] = s.bucketError(l, buckets[i], errs[i])
			}
		})
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.b, err)
	}
	var recs []Record
	for i, st := range states {
		l.offerCache(buckets[i], st)
		for _, r := range st.obj.recs {
			if want[r.Name] {
				recs = append(recs, r)
			}
		}
	}
	for _, sg := range v.segs {
		for _, r := range sg.recs {
			if want[r.Name] {
				recs = append(recs, r)
			}
		}
	}
	out := make(map[string]Record, len(names))
	for _, r := range mergeSorted(recs) {
		out[r.Name] = r
	}
	return out, nil
}

// Load returns every record in the store, tombstones included, sorted by
// name. It reads all buckets in parallel (StoreOptions.Parallelism) and the
// log's segments.
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
	parallel.Each(l.n, s.opts.Parallelism, func(b int) {
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
