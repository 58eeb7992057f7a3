package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
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

// Record is what the store keeps for one sequence name: enough to restore
// it after ZooKeeper loses its data, to start a new incarnation of the name
// above every ID an earlier one handed out, and to tell a deleted
// incarnation from a live one.
//
// A Record is a value of a lattice: Merge joins two of them, and every
// field is joined by a maximum on a total order (see Merge), so the store's
// meaning does not depend on the order in which its pieces are written,
// read, folded, repeated or lost. Three groups of fields are joined each
// as one tuple, in lexicographic order, so that a group always comes from
// one write: the observation (Ceiling, Mzxid, Czxid, Version), the
// incarnation (Live, Start, End, Windows, Legacy), and the rest field by
// field.
type Record struct {
	// Name is the sequence name (the znode's name under the sequences
	// root). Any non-empty string.
	Name string
	// Ceiling is the highest ID that may have been handed out under the
	// name, by any incarnation: the reserved ceiling, written here before
	// ZooKeeper may hold it. Restoring, or starting a new incarnation, at
	// Ceiling+1 never reissues an ID. It never decreases, and it is at
	// least Dead.
	Ceiling int64
	// Czxid, Mzxid and Version are the znode's creation zxid, modification
	// zxid and data version as the primary saw them when it wrote Ceiling.
	Czxid   int64
	Mzxid   int64
	Version int32
	// Live is the incarnation the record describes: the first ID the
	// incarnation could hand out (its floor when the primary initialised
	// it), which is above every ID of every earlier incarnation. 0 when
	// the writer does not know it (a raise asserts no incarnation).
	Live int64
	// Legacy marks a bare 8-byte counter. Its ceiling is a reserve-ahead
	// mark the primary persists reactively, after workers have moved the
	// counter, rather than a limit enforced before IDs are handed out.
	Legacy bool
	// Start, End and Windows are incarnation Live's configuration (first
	// ID, last ID, open windows), kept so a sequence ZooKeeper lost can be
	// re-created as it was. Zero means unknown: the defaults.
	Start, End int64
	Windows    int
	// Dead records deletions: every incarnation whose Live is at most Dead
	// was deleted on purpose ('seqkeeper delete'). 0: none. See Deleted.
	Dead int64
	// Seen is the ZooKeeper era (see package seqzk) in which the primary
	// last saw the sequence's znode present: a znode missing from
	// ZooKeeper in the same era was deleted, not lost.
	Seen int64
	// Epoch is the highest leader epoch of the writers of the record. Put
	// sets it; the value passed in is ignored.
	Epoch int64
	// Updated is when the record was last written, kept to the
	// millisecond. Put stamps the current time when it is zero.
	Updated time.Time
}

// Deleted reports whether the record is a tombstone: the incarnation it
// knows of was deleted, so a restore must not bring the name back, and a
// sequence created again under the name starts above Ceiling.
func (r Record) Deleted() bool { return r.Dead > 0 && r.Live <= r.Dead }

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
	// Root is the sequences root the store belongs to. It is recorded in
	// the meta object and in every bucket object and log segment written,
	// and an object recorded for another root is refused with
	// ErrOtherRoot: two roots sharing one store would mix their records.
	// Empty: no check, nothing recorded (tools that read any store).
	Root string
	// Release is the seqkeeper release of this build ("v0.2.0"; the
	// binary's version). It is recorded in the store's release object
	// when this build writes its formats over older ones (or creates the
	// store), and named in the refusals of a newer format (see
	// NewerFormatError): "run v0.4.0 or later". Empty: nothing recorded,
	// and a refusal says "this build".
	Release string
	// Logger receives store events (epoch changes, conflicts, fencing,
	// repairs), never data or secrets. Default: disabled.
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
	// segmentBudget bounds the records' text of one log segment
	// (defaultSegmentBudget; tests make it small).
	segmentBudget int

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

	// repairs counts store objects found lost or rolled back and rebuilt
	// (the epoch and meta objects).
	repairs atomic.Int64
	// releaseRecorded: the release object names formats as new as this
	// build's, or was left as it was (recordRelease).
	releaseRecorded atomic.Bool
}

// layout is the store's shape once the meta object is known.
type layout struct {
	n     int
	root  string // the root objects are written with (StoreOptions.Root)
	slots []bucketSlot
}

// bucketSlot serialises this Store's writes to one bucket and holds its
// cache. A channel rather than a mutex, so waiting honours ctx.
type bucketSlot struct {
	sem    chan struct{}
	cached *cachedBucket // guarded by sem; nil when unknown
}

// bucketState is a bucket object as last read or written, with the ETag
// that a conditional write must match ("" when the object does not exist)
// and its encoded bytes (nil then).
type bucketState struct {
	etag string
	data []byte
	obj  *bucketObject
}

// cachedBucket is a bucket kept between writes: its encoded bytes and
// ETag, decoded again when a write uses it. Encoded, a record takes about
// 20 bytes (the object is compressed) instead of some 170 decoded, and a
// primary's store reads every bucket at start: a decoded cache would hold
// every record of the root only to spare each compaction a GET.
type cachedBucket struct {
	etag string
	data []byte
}

// cacheOf is what the cache keeps of st.
func cacheOf(st *bucketState) *cachedBucket { return &cachedBucket{etag: st.etag, data: st.data} }

// state decodes c back into the bucket state it was made of (bucket b of
// l). Bytes that were read and checked, or encoded here, decode again: an
// error means memory went bad, and the caller reads the object instead.
func (c *cachedBucket) state(l *layout, b int) (*bucketState, error) {
	if c.data == nil {
		return &bucketState{etag: c.etag, obj: &bucketObject{bucket: b, buckets: l.n, root: l.root}}, nil
	}
	obj, err := decodeBucket(c.data)
	if err != nil {
		return nil, err
	}
	return &bucketState{etag: c.etag, data: c.data, obj: obj}, nil
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
		b:       &counted{Backend: b},
		opts:    opts,
		log:     zerolog.Nop(),
		born:    time.Now(),
		initSem: make(chan struct{}, 1),
		// Performance (and safety): see defaultSegmentBudget.
		segmentBudget: defaultSegmentBudget,
		epochSem:      make(chan struct{}, 1),

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
	l := &layout{n: n, root: s.opts.Root, slots: make([]bucketSlot, n)}
	for i := range l.slots {
		l.slots[i].sem = make(chan struct{}, 1)
	}
	s.lay.Store(l)
	return l, nil
}

// readMeta reads the meta object, checks it against the options, and
// writes it when it is missing (a new store, or one that lost it: its
// bucket count is then read from a bucket object's header, since the
// count cannot change) or lacks the root (a store of format v1).
func (s *Store) readMeta(ctx context.Context) (int, error) {
	for {
		data, etag, err := s.b.Get(ctx, metaKey)
		var m metaState
		switch {
		case err == nil:
			if m, err = decodeMeta(data); err != nil {
				return 0, fmt.Errorf("meta object %q: %w", metaKey, s.explain(ctx, err))
			}
		case errors.Is(err, ErrNotFound):
			if m, err = s.rebuildMeta(ctx); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("read meta object: %w", err)
		}
		if err := checkRoot(m.root, s.opts.Root); err != nil {
			return 0, fmt.Errorf("meta object %q: %w", metaKey, err)
		}
		if s.opts.Buckets != 0 && s.opts.Buckets != m.buckets {
			return 0, fmt.Errorf("%w: the store was created with %d buckets, the options ask for %d; the count cannot change (leave Buckets at 0 to adopt the store's)",
				ErrBucketMismatch, m.buckets, s.opts.Buckets)
		}
		if etag != "" && (m.root != "" || s.opts.Root == "") && m.version == metaVersion {
			return m.buckets, nil
		}
		m.root = cmp.Or(m.root, s.opts.Root)
		if err := s.recordRelease(ctx); err != nil {
			return 0, err
		}
		_, err = s.b.Put(ctx, metaKey, encodeMeta(m), etag)
		if errors.Is(err, ErrConflict) {
			continue // another store wrote it first: read theirs
		}
		if err != nil {
			return 0, fmt.Errorf("write meta object: %w", err)
		}
		if etag != "" {
			s.log.Info().Str("root", m.root).Msg("store: the meta object now records the sequences root (format v2); seqkeeper builds before it can no longer use the store")
		}
		return m.buckets, nil
	}
}

// rebuildMeta returns the meta state of a store whose meta object is
// missing: a new store's (the options' bucket count, or the default), or
// the one a bucket object records, loudly, when the store has any.
func (s *Store) rebuildMeta(ctx context.Context) (metaState, error) {
	m := metaState{buckets: cmp.Or(s.opts.Buckets, DefaultBuckets), root: s.opts.Root, version: metaVersion}
	keys, err := s.b.List(ctx, bucketPrefix)
	if err != nil {
		return metaState{}, fmt.Errorf("the meta object is missing, and the bucket objects cannot be listed to tell a new store from one that lost it: %w", err)
	}
	if len(keys) == 0 {
		if logs, err := s.b.List(ctx, logPrefix); err != nil || len(logs) > 0 {
			if err == nil {
				s.log.Warn().Int("buckets", m.buckets).Msg("store: the meta object is missing and no bucket object exists; taking the configured bucket count")
				s.repairs.Add(1)
			}
			return m, err
		}
		s.log.Info().Int("buckets", m.buckets).Msg("store: initialised a new store")
		return m, nil
	}
	data, _, err := s.b.Get(ctx, keys[0])
	if err != nil {
		return metaState{}, fmt.Errorf("the meta object is missing; reading %s for the bucket count: %w", keys[0], err)
	}
	o, err := decodeBucket(data)
	if err != nil {
		return metaState{}, fmt.Errorf("the meta object is missing, and %s, which would give the bucket count, is unreadable: %w", keys[0], s.explain(ctx, err))
	}
	m.buckets, m.root = o.buckets, cmp.Or(o.root, s.opts.Root)
	s.repairs.Add(1)
	s.log.Warn().Int("buckets", m.buckets).Str("from", keys[0]).Msg("store: the meta object was lost; rebuilt from a bucket object")
	return m, nil
}

// Repairs returns how many store objects this Store found lost or rolled
// back and rebuilt (the meta and epoch objects). Anything above zero is an
// event an operator should know of: docs/fault-model.md.
func (s *Store) Repairs() int64 { return s.repairs.Load() }

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
