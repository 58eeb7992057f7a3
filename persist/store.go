package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
)

// Defaults and limits for StoreOptions.
const (
	DefaultBuckets            = 256
	MaxBuckets                = 1 << 16 // bucket keys have four hex digits
	DefaultParallelism        = 16
	DefaultEpochCheckInterval = 5 * time.Second
)

// Object keys of the store, relative to the backend's root or prefix.
const (
	metaKey  = "meta"
	epochKey = "epoch"
)

// retry spaces the retries of a conditional write that lost a race (putBucket,
// AdvanceEpoch) and of a bucket's seal after a transient error: 5ms before
// retry 0, doubling with each attempt up to 100ms from retry 5 on, so that
// contenders spread out and repeated conflicts wait longer. The delay is
// drawn from the upper half of that nominal figure (see backoff.Policy), so
// every retry waits at least half of it; a fully random draw from zero could
// send contenders that failed together back almost at once.
var retry = backoff.Policy{Initial: 5 * time.Millisecond, Max: 100 * time.Millisecond}

// Record is what the store keeps for one sequence: enough to restore it after
// ZooKeeper loses its data, and to tell a znode that was recreated or rolled
// back from the one the primary last saw.
type Record struct {
	// Name is the sequence name (the znode's name under the sequences
	// root). Any non-empty string.
	Name string
	// Ceiling is the highest ID that may have been handed out: the reserved
	// ceiling, written here before ZooKeeper may hold it. Restoring at
	// Ceiling+1 never reissues an ID. It never decreases.
	Ceiling int64
	// Epoch is the leader epoch of the writer that last changed the record.
	// Put sets it; the value passed in is ignored.
	Epoch int64
	// Czxid, Mzxid and Version are the znode's creation zxid, modification
	// zxid and data version as the primary last saw them.
	Czxid   int64
	Mzxid   int64
	Version int32
	// Legacy marks a bare 8-byte counter. Its ceiling is a reserve-ahead
	// mark the primary persists reactively, after workers have moved the
	// counter, rather than a limit enforced before IDs are handed out.
	Legacy bool
	// Start, End and Windows are the sequence's configuration (first ID,
	// last ID, open windows), kept so a sequence ZooKeeper lost can be
	// re-created as it was. Zero means unknown: the defaults.
	Start, End int64
	Windows    int
	// Deleted marks a tombstone: the sequence was deleted on purpose. The
	// record stays, with its ceiling, so a sequence created again under
	// the same name starts above every ID the old one handed out.
	Deleted bool
	// Updated is when the primary wrote the record, kept to the
	// millisecond. Put stamps the current time when it is zero.
	Updated time.Time
}

// StoreOptions configure a Store. The zero value is usable; NewStore applies
// the defaults and refuses values that cannot work.
type StoreOptions struct {
	// Buckets is how many bucket objects the records are spread over. It is
	// fixed when the store is first used and recorded in the meta object:
	// zero adopts an existing store's count (DefaultBuckets for a new
	// store); any other value must equal an existing store's count, or every
	// operation fails with ErrBucketMismatch. At most MaxBuckets. About
	// 1,000 records per bucket keeps a raise (one bucket rewritten) cheap.
	Buckets int
	// Parallelism bounds the concurrent backend requests of one Put or
	// Load. Default DefaultParallelism.
	Parallelism int
	// EpochCheckInterval is how old this store's reading of the epoch object
	// may be when Put decides whether its writer is fenced. It is re-read
	// sooner after any write conflict. A deposed primary may keep raising
	// ceilings (never lowering anything) for up to this long in buckets its
	// successor has not written. Default DefaultEpochCheckInterval.
	EpochCheckInterval time.Duration
	// Logger receives store events (epoch changes, conflicts, fencing),
	// never data or secrets. Default: disabled.
	Logger *zerolog.Logger
}

// Store keeps the durable Record of every sequence on a Backend: the state
// the primary writes before raising a ceiling in ZooKeeper and restores from
// after ZooKeeper loses its data. It is safe for concurrent use, and several
// Stores (in several processes) may share one backend: every write is a
// conditional, monotone merge.
//
// A Store caches each bucket it has read or written, with its ETag, so a
// raise costs a single PUT while nobody else writes the bucket. A stale
// cache costs a conflict and a re-read, never a lost update.
type Store struct {
	b    *counted
	opts StoreOptions
	log  zerolog.Logger
	born time.Time // base of the monotonic clock now()

	initSem chan struct{} // held while reading or creating the meta object
	lay     atomic.Pointer[layout]

	// maxEpoch is the highest leader epoch seen in any object: writers
	// below it are fenced.
	maxEpoch atomic.Int64
	epochSem chan struct{} // one reader of the epoch object at a time
	// epochRead is now() when the last successful read of the epoch object
	// started.
	epochRead atomic.Int64

	seglog     logState
	compactSem chan struct{} // one Compact at a time
}

// layout is the store's shape once the meta object is known.
type layout struct {
	n     int
	slots []bucketSlot
}

// bucketSlot serialises this Store's writes to one bucket and holds its
// cache. A channel rather than a mutex, so waiting honours ctx.
type bucketSlot struct {
	sem    chan struct{}
	cached *bucketState // guarded by sem; nil when unknown
}

// bucketState is a bucket object as last read or written, with the ETag
// that a conditional write must match ("" when the object does not exist).
type bucketState struct {
	etag string
	obj  *bucketObject
}

// NewStore returns a Store on b. It checks the options but does no I/O: the
// meta object is read (or created) by the first operation, so a store that is
// unreachable at start-up delays the first operation instead of failing
// construction.
func NewStore(b Backend, opts StoreOptions) (*Store, error) {
	if b == nil {
		return nil, errors.New("persist: NewStore: nil backend")
	}
	if opts.Buckets < 0 || opts.Buckets > MaxBuckets {
		return nil, fmt.Errorf("persist: NewStore: Buckets %d out of range 1..%d (0 for the default)", opts.Buckets, MaxBuckets)
	}
	if opts.Parallelism < 0 {
		return nil, fmt.Errorf("persist: NewStore: negative Parallelism %d", opts.Parallelism)
	}
	if opts.EpochCheckInterval < 0 {
		return nil, fmt.Errorf("persist: NewStore: negative EpochCheckInterval %s", opts.EpochCheckInterval)
	}
	if opts.Parallelism == 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.EpochCheckInterval == 0 {
		opts.EpochCheckInterval = DefaultEpochCheckInterval
	}
	s := &Store{
		b:        &counted{Backend: b},
		opts:     opts,
		log:      zerolog.Nop(),
		born:     time.Now(),
		initSem:  make(chan struct{}, 1),
		epochSem: make(chan struct{}, 1),

		seglog:     newLogState(),
		compactSem: make(chan struct{}, 1),
	}
	if opts.Logger != nil {
		s.log = *opts.Logger
	}
	s.log = s.log.With().Str("store", b.String()).Logger()
	s.epochRead.Store(math.MinInt64)
	return s, nil
}

// String names the store's backend.
func (s *Store) String() string { return s.b.String() }

// now is a monotonic clock reading.
func (s *Store) now() int64 { return int64(time.Since(s.born)) }

func acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func release(sem chan struct{}) { <-sem }

// layout returns the store's shape, reading or creating the meta object the
// first time.
func (s *Store) layout(ctx context.Context) (*layout, error) {
	if l := s.lay.Load(); l != nil {
		return l, nil
	}
	if err := acquire(ctx, s.initSem); err != nil {
		return nil, fmt.Errorf("store %s: read meta: %w", s.b, err)
	}
	defer release(s.initSem)
	if l := s.lay.Load(); l != nil {
		return l, nil
	}
	n, err := s.readMeta(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.b, err)
	}
	l := &layout{n: n, slots: make([]bucketSlot, n)}
	for i := range l.slots {
		l.slots[i].sem = make(chan struct{}, 1)
	}
	s.lay.Store(l)
	return l, nil
}

func (s *Store) readMeta(ctx context.Context) (int, error) {
	for {
		data, _, err := s.b.Get(ctx, metaKey)
		switch {
		case err == nil:
			n, err := decodeMeta(data)
			if err != nil {
				return 0, fmt.Errorf("meta object %q: %w", metaKey, err)
			}
			if s.opts.Buckets != 0 && s.opts.Buckets != n {
				return 0, fmt.Errorf("%w: the store was created with %d buckets, the options ask for %d; the count cannot change (leave Buckets at 0 to adopt the store's)",
					ErrBucketMismatch, n, s.opts.Buckets)
			}
			return n, nil
		case errors.Is(err, ErrNotFound):
			n := cmp.Or(s.opts.Buckets, DefaultBuckets)
			_, err := s.b.Put(ctx, metaKey, encodeMeta(n), "")
			if errors.Is(err, ErrConflict) {
				continue // another store created it first: read theirs
			}
			if err != nil {
				return 0, fmt.Errorf("create meta object: %w", err)
			}
			s.log.Info().Int("buckets", n).Msg("store: initialised a new store")
			return n, nil
		default:
			return 0, fmt.Errorf("read meta object: %w", err)
		}
	}
}

// Check is a cheap health probe (for /readyz): it reads the epoch object,
// and the meta object the first time.
func (s *Store) Check(ctx context.Context) error {
	if _, err := s.layout(ctx); err != nil {
		return err
	}
	st, _, err := s.readEpoch(ctx)
	if err != nil {
		return fmt.Errorf("store %s: %w", s.b, err)
	}
	s.observeEpoch(st.epoch)
	return nil
}

// each calls fn(i) for every i in [0, n) on at most par goroutines.
func each(n, par int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
