package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
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
	b    Backend
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
		b:        b,
		opts:     opts,
		log:      zerolog.Nop(),
		born:     time.Now(),
		initSem:  make(chan struct{}, 1),
		epochSem: make(chan struct{}, 1),
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

// Affects reports whether err, returned by Put, Get or Load, may concern the
// sequence name. It is false only when every failure in err is a BucketError
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
		return &bucketState{obj: &bucketObject{bucket: b, buckets: l.n}}, nil
	}
	if err != nil {
		return nil, err
	}
	obj, err := decodeBucket(data)
	if err == nil {
		err = checkBucket(obj, b, l.n)
	}
	if err != nil {
		s.log.Error().Str("key", key).Err(err).Msg("store: unreadable bucket object")
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	s.observeEpoch(obj.epoch)
	return &bucketState{etag: etag, obj: obj}, nil
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
			slot.cached = st
		}
		release(slot.sem)
	default:
	}
}

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
// lost is retried and may skip one. It returns when the write succeeds or fails for another reason, or
// when ctx is done.
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
		_, err = s.b.Put(ctx, epochKey, encodeEpoch(next), etag)
		if errors.Is(err, ErrConflict) {
			s.log.Debug().Int64("epoch", cur.epoch).Msg("store: lost a race to advance the epoch; retrying")
			if err := backoff(ctx, attempt); err != nil {
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

// backoff sleeps a little, more after repeated conflicts, with jitter so
// contenders spread out.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(min(5*time.Millisecond<<min(attempt, 5), 100*time.Millisecond)) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Put makes the store hold recs, written by a primary of leader epoch epoch.
// When it returns nil, every record's ceiling is durable: the stored ceiling
// is at least the one given (the caller may raise ZooKeeper to it).
//
// Records are merged into what is stored, never written over it:
//
//   - Ceiling becomes the maximum of the stored and the new one. A stored
//     ceiling never decreases, whoever writes and in whatever order.
//   - The other fields (Czxid, Mzxid, Version, Legacy, Deleted, Updated)
//     describe one observation of the znode and are taken together from the
//     record with the higher (Ceiling, Mzxid). The ceiling comes first
//     because it is the one order that survives a ZooKeeper wipe (zxids
//     restart with a new ensemble; ceilings are restored above the stored
//     ones). Among equal ceilings the later zxid is the newer observation.
//     A record with a lower ceiling, or an equal ceiling and an older Mzxid,
//     is stale (a deposed primary, or a slow goroutine of this one) and
//     changes nothing. To record a new observation a caller must raise the
//     ceiling or report a later Mzxid.
//   - On an exact tie of (Ceiling, Mzxid) the new record wins (fencing means
//     its writer is the same primary or a newer one).
//   - A tombstone sticks to the znode it was written for (its Czxid): a
//     record for the same znode, even with a higher ceiling, keeps Deleted,
//     so a primary raising the znode while an operator deletes it cannot
//     undo the deletion. Only a record of a re-created znode (another
//     Czxid) clears it.
//   - Epoch becomes epoch for every record the write changes; Updated is
//     stamped with the current time when zero.
//
// Fencing: if this Store has seen a higher leader epoch than epoch (in the
// epoch object, read at most StoreOptions.EpochCheckInterval ago or after a
// conflict, or in any bucket), Put returns ErrFenced and writes nothing more.
//
// Each bucket is written by a conditional PUT on the ETag read (or cached);
// on a conflict Put re-reads, re-merges and tries again until ctx is done.
// Buckets are written in parallel and independently: see BucketError and
// Affects for a partial failure. A corrupt or newer-format bucket is never
// written. Other errors leave the bucket's outcome unknown (the write may
// have landed); calling Put again is safe.
func (s *Store) Put(ctx context.Context, epoch int64, recs ...Record) error {
	if epoch < 0 {
		return fmt.Errorf("store %s: put: negative epoch %d", s.b, epoch)
	}
	for i := range recs {
		if recs[i].Name == "" {
			return fmt.Errorf("store %s: put: record %d has no name", s.b, i)
		}
		if recs[i].Ceiling < 0 {
			return fmt.Errorf("store %s: put %q: negative ceiling %d", s.b, recs[i].Name, recs[i].Ceiling)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	l, err := s.layout(ctx)
	if err != nil {
		return err
	}
	if err := s.fence(epoch); err != nil {
		return fmt.Errorf("store %s: put: %w", s.b, err)
	}
	if err := s.refreshEpoch(ctx, s.now()-int64(s.opts.EpochCheckInterval)); err != nil {
		return fmt.Errorf("store %s: put: check the leader epoch: %w", s.b, err)
	}
	if err := s.fence(epoch); err != nil {
		s.log.Warn().Int64("epoch", epoch).Err(err).Msg("store: writer fenced")
		return fmt.Errorf("store %s: put: %w", s.b, err)
	}

	groups := groupByBucket(recs, epoch, l.n, time.Now())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, len(groups))
	each(len(groups), s.opts.Parallelism, func(i int) {
		g := groups[i]
		if err := s.putBucket(ctx, l, g.bucket, epoch, g.recs); err != nil {
			errs[i] = s.bucketError(l, g.bucket, err)
			if errors.Is(err, ErrFenced) {
				cancel(err) // stop writing the other buckets
			}
		}
	})
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			s.log.Warn().Int64("epoch", epoch).Err(err).Msg("store: writer fenced")
			return fmt.Errorf("store %s: write %d records: %w", s.b, len(recs), err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store %s: write %d records: %w", s.b, len(recs), err)
	}
	return nil
}

// Seal makes every bucket object carry leader epoch epoch, re-writing by
// conditional write each bucket that carries a lower one (creating missing
// ones), and returns every record, tombstones included, sorted by name. A
// primary calls it after AdvanceEpoch, before acting on what the store
// holds. Once Seal has returned nil, no writer of a lower epoch can change
// any bucket (a bucket with a higher epoch is never written, and a write
// that raced the seal fails on its ETag, so the seal read it), and the
// records returned include every write of every earlier epoch: a new
// primary's view of the store is complete, and a deposed primary's late
// writes are refused rather than merely harmless.
//
// Transient read and write errors are retried a few times. Like Load, Seal
// returns the records of the buckets it could read and a BucketError for
// each it could not (see Affects); ErrFenced when a bucket carries a
// higher epoch.
func (s *Store) Seal(ctx context.Context, epoch int64) ([]Record, error) {
	l, err := s.layout(ctx)
	if err != nil {
		return nil, err
	}
	parts := make([][]Record, l.n)
	errs := make([]error, l.n)
	each(l.n, s.opts.Parallelism, func(b int) {
		recs, err := s.sealBucket(ctx, l, b, epoch)
		if err != nil {
			errs[b] = s.bucketError(l, b, err)
			return
		}
		parts[b] = recs
	})
	recs := slices.Concat(parts...)
	slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Name, b.Name) })
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return recs, fmt.Errorf("store %s: seal: %w", s.b, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return recs, fmt.Errorf("store %s: seal: %w", s.b, err)
	}
	return recs, nil
}

// sealBucketAttempts bounds the retries of one bucket's seal after
// transient errors.
const sealBucketAttempts = 5

func (s *Store) sealBucket(ctx context.Context, l *layout, b int, epoch int64) ([]Record, error) {
	slot := &l.slots[b]
	key := bucketKey(b)
	if err := acquire(ctx, slot.sem); err != nil {
		return nil, fmt.Errorf("%s: waiting for this store's other write: %w", key, err)
	}
	defer release(slot.sem)
	var last error
	for attempt := 0; attempt < sealBucketAttempts; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, fmt.Errorf("%s: %w (after %v)", key, err, last)
			}
		}
		slot.cached = nil
		st, err := s.readBucket(ctx, l, b)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
			return nil, err // waiting does not mend it
		}
		if err != nil {
			last = err
			continue
		}
		switch {
		case st.obj.epoch > epoch:
			return nil, fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, st.obj.epoch, epoch)
		case st.obj.epoch == epoch && st.etag != "":
			slot.cached = st
			return st.obj.recs, nil
		}
		sealed := *st.obj
		sealed.epoch = epoch
		data, err := encodeBucket(&sealed)
		if err != nil {
			return nil, fmt.Errorf("%s: encode: %w", key, err)
		}
		etag, err := s.b.Put(ctx, key, data, st.etag)
		if err != nil {
			last = err // a conflict: someone wrote it; read again
			continue
		}
		slot.cached = &bucketState{etag: etag, obj: &sealed}
		return sealed.recs, nil
	}
	return nil, fmt.Errorf("%s: seal for leader epoch %d: %w", key, epoch, last)
}

// bucketGroup is the part of one Put that goes to one bucket: sorted by name,
// each name once, normalised (Epoch set, Updated to the millisecond).
type bucketGroup struct {
	bucket int
	recs   []Record
}

func groupByBucket(recs []Record, epoch int64, n int, now time.Time) []bucketGroup {
	byBucket := make(map[int][]Record)
	for _, r := range recs {
		r.Epoch = epoch
		if r.Updated.IsZero() {
			r.Updated = now
		}
		r.Updated = time.UnixMilli(r.Updated.UnixMilli()).UTC()
		b := bucketOf(r.Name, n)
		byBucket[b] = append(byBucket[b], r)
	}
	groups := make([]bucketGroup, 0, len(byBucket))
	for b, rs := range byBucket {
		slices.SortStableFunc(rs, func(x, y Record) int { return cmp.Compare(x.Name, y.Name) })
		out := rs[:0]
		for _, r := range rs {
			if k := len(out) - 1; k >= 0 && out[k].Name == r.Name {
				out[k] = mergeRecord(out[k], r)
				continue
			}
			out = append(out, r)
		}
		groups = append(groups, bucketGroup{bucket: b, recs: out})
	}
	slices.SortFunc(groups, func(x, y bucketGroup) int { return cmp.Compare(x.bucket, y.bucket) })
	return groups
}

// putBucket merges recs into bucket b: read (or use the cache), merge,
// conditional write, and on a conflict the same again.
func (s *Store) putBucket(ctx context.Context, l *layout, b int, epoch int64, recs []Record) error {
	slot := &l.slots[b]
	key := bucketKey(b)
	if err := acquire(ctx, slot.sem); err != nil {
		return fmt.Errorf("%s: waiting for this store's other write: %w", key, err)
	}
	defer release(slot.sem)
	for attempt := 0; ; attempt++ {
		fresh := false
		if slot.cached == nil {
			st, err := s.readBucket(ctx, l, b)
			if err != nil {
				return err
			}
			slot.cached, fresh = st, true
		}
		st := slot.cached
		if st.obj.epoch > epoch {
			return fmt.Errorf("%s: %w: written by leader epoch %d; this writer holds epoch %d", key, ErrFenced, st.obj.epoch, epoch)
		}
		merged, changed := mergeBucket(st.obj, epoch, recs)
		if !changed {
			if !fresh {
				// Nothing to write, so no conditional write would tell a
				// stale cache: read the object, which a successor's seal
				// marks with its epoch, before saying the store holds it.
				slot.cached = nil
				continue
			}
			return nil // the store already holds as much (it is monotone)
		}
		data, err := encodeBucket(merged)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", key, err)
		}
		etag, err := s.b.Put(ctx, key, data, st.etag)
		switch {
		case err == nil:
			slot.cached = &bucketState{etag: etag, obj: merged}
			return nil
		case errors.Is(err, ErrConflict):
			slot.cached = nil
			s.log.Debug().Str("key", key).Int64("epoch", epoch).Int("attempt", attempt).Msg("store: bucket changed under us; re-reading")
			if err := s.refreshEpoch(ctx, s.now()); err != nil {
				return fmt.Errorf("%s: check the leader epoch after a conflict: %w", key, err)
			}
			if err := s.fence(epoch); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if err := backoff(ctx, attempt); err != nil {
				return fmt.Errorf("%s: retrying after a conflict: %w", key, err)
			}
		default:
			slot.cached = nil // the write may have landed
			return err
		}
	}
}

// mergeBucket returns old with in merged (see Put), and whether anything
// changed. in is sorted, unique and normalised; old is not modified.
func mergeBucket(old *bucketObject, epoch int64, in []Record) (*bucketObject, bool) {
	out := make([]Record, 0, len(old.recs)+len(in))
	changed := false
	i, j := 0, 0
	for i < len(old.recs) || j < len(in) {
		switch {
		case j == len(in) || (i < len(old.recs) && old.recs[i].Name < in[j].Name):
			out = append(out, old.recs[i])
			i++
		case i == len(old.recs) || in[j].Name < old.recs[i].Name:
			r := in[j]
			r.Epoch = epoch
			out = append(out, r)
			changed = true
			j++
		default:
			o := old.recs[i]
			m := mergeRecord(o, in[j])
			if sameRecord(m, o) {
				m = o
			} else {
				m.Epoch = epoch
				changed = true
			}
			out = append(out, m)
			i++
			j++
		}
	}
	return &bucketObject{bucket: old.bucket, buckets: old.buckets, epoch: max(old.epoch, epoch), recs: out}, changed
}

// mergeRecord is the merge rule of Put for one name.
func mergeRecord(old, in Record) Record {
	m := old
	switch {
	case in.Deleted && !old.Deleted && (sameZnode(old, in) || in.Ceiling >= old.Ceiling):
		// A tombstone of the znode the record describes wins whatever its
		// ceiling: the delete read the znode before a raise that the
		// store has since seen (the raise's ceiling is kept below). A
		// tombstone of another znode wins when it covers the record's
		// ceiling: nothing is lost, and the record may describe a znode
		// of a history a ZooKeeper restore threw away, which a sequence
		// whose ceiling cannot rise (its space is used up) never replaces.
		m = in
	case in.Ceiling > old.Ceiling || (in.Ceiling == old.Ceiling && in.Mzxid >= old.Mzxid):
		m = in
		// A tombstone sticks to the znode it was written for: a primary
		// still raising that znode (it races the delete) must not undo
		// it. Only a re-created znode (another creation zxid) clears it.
		if old.Deleted && (sameZnode(old, in) || in.Ceiling == old.Ceiling && in.Mzxid == old.Mzxid) {
			m.Deleted = true
		}
	}
	m.Ceiling = max(old.Ceiling, in.Ceiling)
	return m
}

// sameZnode reports whether two records describe one incarnation of a
// sequence znode. A creation zxid of 0 is unknown (a znode restored from
// the store and not yet seen by the primary) and matches any.
func sameZnode(a, b Record) bool {
	return a.Czxid == b.Czxid || a.Czxid == 0 || b.Czxid == 0
}

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

// sameRecord compares everything a write would change, except Epoch.
func sameRecord(a, b Record) bool {
	return a.Name == b.Name && a.Ceiling == b.Ceiling && a.Czxid == b.Czxid && a.Mzxid == b.Mzxid &&
		a.Version == b.Version && a.Legacy == b.Legacy && a.Deleted == b.Deleted && a.Updated.Equal(b.Updated) &&
		a.Start == b.Start && a.End == b.End && a.Windows == b.Windows
}
