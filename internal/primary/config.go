package primary

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Config configures a Primary. Start from DefaultConfig.
type Config struct {
	// Sequences is the ZooKeeper layer for the sequences root.
	Sequences *sequence.Client
	// Store is the durable store of ceilings.
	Store *persist.Store
	// Holder names this replica in the store's epoch record.
	Holder string
	// MarkerPath is the cluster marker znode, created when the primary
	// first initialises an ensemble; finding it missing while the store
	// holds sequences means ZooKeeper was wiped or replaced.
	MarkerPath string
	// Runway is how long clients can keep taking IDs with no primary:
	// each sequence's outstanding reserve (ceiling - next) is kept at least
	// Runway times its recent consumption rate, and raised to twice that.
	Runway time.Duration
	// MinReserve and MaxReserve bound every reserve. MinReserve is what an
	// idle sequence keeps; it is also the IDs lost per sequence at a
	// ZooKeeper leader election when the sequence is idle.
	MinReserve, MaxReserve int64
	// SweepInterval is how often every sequence is re-read and re-checked,
	// in case a watch notification was missed, and the ZooKeeper epoch is
	// probed.
	SweepInterval time.Duration
	// Parallelism bounds concurrent ZooKeeper operations.
	Parallelism int
	// StoreTimeout bounds one store write, so an unreachable store stalls
	// nothing else; the ceilings it held back are retried at the next
	// event or sweep.
	StoreTimeout time.Duration
	// AuditInterval is how often the primary reads the whole store again
	// (persist.Store.Seal) and persists anew every ceiling the store no
	// longer holds: a lost or rolled-back store object would otherwise stay
	// lost for idle sequences, and a later ZooKeeper data loss would then
	// hit both. Unreadable store objects are read again at every sweep.
	AuditInterval time.Duration
	// FenceCheckInterval is how often the primary reads the store's leader
	// epoch, so that a primary deposed while idle (nothing to write, so no
	// write to be refused) stops within this long.
	FenceCheckInterval time.Duration
	// RotateVersion is the znode data version at which the primary moves a
	// sequence onto a fresh znode (sequence.Client.Rotate), far below
	// ZooKeeper's int32 wrap and sequence.VersionLimit, where clients stop
	// writing. At 10,000 writes a second the default takes about 30 hours.
	RotateVersion int32
	// ACL is set on the znodes the primary creates (the root, the marker).
	// Default zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// Logger receives the primary's decisions.
	Logger zerolog.Logger
}

// DefaultConfig returns a Config with every default set; callers fill in
// Sequences, Store and Holder.
func DefaultConfig() Config {
	return Config{
		MarkerPath:    "/seqkeeper/cluster",
		Runway:        60 * time.Second,
		MinReserve:    1000,
		MaxReserve:    1 << 40,
		SweepInterval: 10 * time.Second,
		Parallelism:   16,
		StoreTimeout:  10 * time.Second,

		AuditInterval:      5 * time.Minute,
		FenceCheckInterval: 2 * time.Second,
		RotateVersion:      1 << 30,
		Logger:             zerolog.Nop(),
	}
}

// MaxReserve bounds Config.MaxReserve, so that reserve arithmetic (twice a
// reserve, added to an ID) never overflows.
const MaxReserve = 1 << 50

// Validate checks the config; New calls it.
func (c Config) Validate() error {
	switch {
	case c.Sequences == nil:
		return errors.New("primary: Config.Sequences is required")
	case c.Store == nil:
		return errors.New("primary: Config.Store is required")
	case c.Holder == "":
		return errors.New("primary: Config.Holder is required (the replica's id)")
	case c.Runway <= 0:
		return fmt.Errorf("primary: Runway %s must be positive", c.Runway)
	case c.MinReserve < 1 || c.MaxReserve < c.MinReserve || c.MaxReserve > MaxReserve:
		return fmt.Errorf("primary: need 1 <= MinReserve (%d) <= MaxReserve (%d) <= %d", c.MinReserve, c.MaxReserve, int64(MaxReserve))
	case c.AuditInterval <= 0:
		return fmt.Errorf("primary: AuditInterval %s must be positive", c.AuditInterval)
	case c.FenceCheckInterval <= 0:
		return fmt.Errorf("primary: FenceCheckInterval %s must be positive", c.FenceCheckInterval)
	case c.RotateVersion < 1 || c.RotateVersion >= sequence.VersionLimit:
		return fmt.Errorf("primary: RotateVersion %d must lie in 1..%d", c.RotateVersion, sequence.VersionLimit-1)
	case c.SweepInterval <= 0:
		return fmt.Errorf("primary: SweepInterval %s must be positive", c.SweepInterval)
	case c.Parallelism < 1:
		return fmt.Errorf("primary: Parallelism %d must be positive", c.Parallelism)
	case c.StoreTimeout <= 0:
		return fmt.Errorf("primary: StoreTimeout %s must be positive", c.StoreTimeout)
	}
	if err := zkclient.ValidateRoot(c.MarkerPath); err != nil {
		return fmt.Errorf("primary: MarkerPath: %w", err)
	}
	return nil
}

func (p *Primary) acl() []zk.ACL {
	if p.cfg.ACL != nil {
		return p.cfg.ACL
	}
	return zk.WorldACL(zk.PermAll)
}
