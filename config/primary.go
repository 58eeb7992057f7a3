package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults of the primary's tunables that are not settings: no flag,
// environment variable or file key sets them. Tests and benchmarks change
// them on the struct.
const (
	DefaultFenceCheckInterval       = 2 * time.Second
	DefaultStoreTimeout             = 10 * time.Second
	DefaultParallelism              = 16
	DefaultRotateVersion      int32 = 1 << 30
	DefaultCompactInterval          = 5 * time.Minute
	DefaultCompactSegments          = 1024
	DefaultStoreBatchDelay          = time.Second
	DefaultStoreWriteRate           = 20
	DefaultStoreWriteBurst          = 5
)

// Primary is what the primary's reservation loop (internal/primary) is
// tuned by. It is part of Config (embedded, so its settings read as
// c.Runway), and is what 'seqkeeper serve' passes to the primary as it is.
// Create it with DefaultPrimary or DefaultConfig; the zero value is not
// valid.
//
// Invariants checked by Validate:
//   - 1 <= MinReserve <= MaxReserve <= MaxReserveLimit, which keeps the
//     primary's reserve arithmetic (twice a reserve, added to an ID) far
//     from overflow.
//   - every interval and timeout is positive, Parallelism is at least 1,
//     and RotateVersion lies below state.VersionLimit, where clients
//     stop writing.
//
// Config.Validate also requires SweepInterval <= Runway and AuditInterval
// >= SweepInterval of an operator's settings; tests of the primary step
// outside those on purpose (a tiny runway, a slow sweep).
type Primary struct {
	// MarkerPath is the cluster marker znode the primary creates when it
	// first initialises an ensemble; finding it missing while the store
	// holds sequences means ZooKeeper was wiped or replaced.
	MarkerPath string
	// Runway is how long each sequence's reserve should last at its
	// demand: the primary raises the ceiling to a runway of the
	// sequence's smoothed rate of consumption above next (or to twice its
	// largest recent burst, or twice MinReserve, whichever is largest), and
	// raises it again when half of that is left, so clients keep taking
	// IDs for at least half a runway with no primary at all. The rate is
	// smoothed over the runway, so a burst is covered by headroom sized to
	// it, not by a runway of its peak rate.
	Runway time.Duration
	// MinReserve is the smallest reserve (IDs above next) the primary keeps
	// for any sequence, whatever its rate. It is also what an idle sequence
	// loses at a ZooKeeper data loss.
	MinReserve int64
	// MaxReserve caps any sequence's reserve, and so the IDs a busy
	// sequence can lose at a ZooKeeper data loss.
	MaxReserve int64
	// SweepInterval is how often the primary re-reads and re-checks every
	// sequence, backing up the one-shot watches that can be missed, and
	// probes the ZooKeeper epoch.
	SweepInterval time.Duration
	// AuditInterval is how often the primary reads the whole store again
	// and persists anew every ceiling the store lost (a deleted or
	// rolled-back object), so that a later ZooKeeper data loss cannot hit
	// both. Unreadable store objects are read again at every sweep.
	AuditInterval time.Duration

	// FenceCheckInterval is how often the primary reads the store's leader
	// epoch, so that a primary deposed while idle (nothing to write, so no
	// write to be refused) stops within this long.
	FenceCheckInterval time.Duration
	// StoreTimeout bounds one store write, so an unreachable store stalls
	// nothing else; the ceilings it held back are retried at the next
	// event or sweep.
	StoreTimeout time.Duration
	// Parallelism bounds the primary's concurrent ZooKeeper operations.
	Parallelism int
	// RotateVersion is the znode data version at which the primary moves a
	// sequence onto a fresh znode, far below ZooKeeper's int32 wrap and
	// state.VersionLimit. At 10,000 writes a second the default takes
	// about 30 hours.
	RotateVersion int32
	// CompactInterval is how often the primary folds the store's log into
	// its bucket objects (persist.Store.Compact) when there is anything to
	// fold; CompactSegments log segments start a compaction sooner, and
	// each term starts with one when the log holds segments. A
	// compaction rewrites every bucket object its segments touch (all of
	// them, with many busy sequences), so rarer compactions cost fewer
	// billed writes, for a longer log to read at a failover (1,024
	// segments read in parallel: well under a second).
	CompactInterval time.Duration
	CompactSegments int
	// StoreBatchDelay is how long the primary may hold back a routine
	// raise (a top-up of a reserve that still holds half of what it
	// should) so that it shares a store write with others: fewer, larger
	// store writes, each a billed object. Zero sends every raise at once.
	StoreBatchDelay time.Duration
	// StoreWriteRate and StoreWriteBurst pace the store writes that raises
	// and initialisations make: at most StoreWriteBurst at once, then
	// StoreWriteRate a second. What waits meanwhile shares the next
	// write, so under heavy load each write carries more raises (and S3
	// bills fewer requests) rather than more writes going out; a raise
	// waits at most 1/StoreWriteRate longer. Sweeps, restores and audits
	// are not paced.
	StoreWriteRate  float64
	StoreWriteBurst int
}

// DefaultPrimary returns the primary's tunables with every default set.
func DefaultPrimary() Primary {
	return Primary{
		MarkerPath:         DefaultMarkerPath,
		Runway:             DefaultRunway,
		MinReserve:         DefaultMinReserve,
		MaxReserve:         DefaultMaxReserve,
		SweepInterval:      DefaultSweepInterval,
		AuditInterval:      DefaultAuditInterval,
		FenceCheckInterval: DefaultFenceCheckInterval,
		StoreTimeout:       DefaultStoreTimeout,
		Parallelism:        DefaultParallelism,
		RotateVersion:      DefaultRotateVersion,
		CompactInterval:    DefaultCompactInterval,
		CompactSegments:    DefaultCompactSegments,
		StoreBatchDelay:    DefaultStoreBatchDelay,
		StoreWriteRate:     DefaultStoreWriteRate,
		StoreWriteBurst:    DefaultStoreWriteBurst,
	}
}

// Validate checks the primary's tunables and returns every problem at
// once (joined). Every error wraps ErrInvalid.
func (p *Primary) Validate() error { return errors.Join(p.problems()...) }

// problems checks every field. Errors about settings name the setting and
// how to set it; the others name the field.
func (p *Primary) problems() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, settingError(key, fmt.Sprintf(format, args...)))
	}
	field := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, name, fmt.Sprintf(format, args...)))
	}
	positive := func(key string, d, limit time.Duration) {
		if d <= 0 || d > limit {
			bad(key, "%s must be positive and at most %s", d, limit)
		}
	}

	if err := zkclient.ValidateRoot(p.MarkerPath); err != nil {
		bad("marker_path", "%v", err)
	}
	positive("runway", p.Runway, 30*24*time.Hour)
	positive("sweep_interval", p.SweepInterval, time.Hour)
	positive("audit_interval", p.AuditInterval, 24*time.Hour)
	if p.MinReserve < 1 || p.MinReserve > MaxReserveLimit {
		bad("min_reserve", "%d must be at least 1 and at most %d (2^50)", p.MinReserve, int64(MaxReserveLimit))
	}
	if p.MaxReserve < max(p.MinReserve, 1) || p.MaxReserve > MaxReserveLimit {
		bad("max_reserve", "%d must be at least min_reserve (%d) and at most %d (2^50)", p.MaxReserve, p.MinReserve, int64(MaxReserveLimit))
	}

	if p.FenceCheckInterval <= 0 {
		field("FenceCheckInterval", "%s must be positive", p.FenceCheckInterval)
	}
	if p.StoreTimeout <= 0 {
		field("StoreTimeout", "%s must be positive", p.StoreTimeout)
	}
	if p.Parallelism < 1 {
		field("Parallelism", "%d must be positive", p.Parallelism)
	}
	if p.CompactInterval <= 0 {
		field("CompactInterval", "%s must be positive", p.CompactInterval)
	}
	if p.StoreBatchDelay < 0 || p.StoreBatchDelay > time.Minute {
		field("StoreBatchDelay", "%s must lie in 0..1m", p.StoreBatchDelay)
	}
	if p.StoreWriteRate <= 0 || p.StoreWriteRate > 10_000 {
		field("StoreWriteRate", "%g must lie in (0, 10000] writes a second", p.StoreWriteRate)
	}
	if p.StoreWriteBurst < 1 {
		field("StoreWriteBurst", "%d must be positive", p.StoreWriteBurst)
	}
	if p.CompactSegments < 1 {
		field("CompactSegments", "%d must be positive", p.CompactSegments)
	}
	if p.RotateVersion < 1 || p.RotateVersion >= state.VersionLimit {
		field("RotateVersion", "%d must lie in 1..%d", p.RotateVersion, state.VersionLimit-1)
	}
	return errs
}
