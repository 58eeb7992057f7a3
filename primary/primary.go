// Package primary is the reservation loop that runs on the one replica that
// leads: it initialises new sequences, keeps a reserved ceiling ahead of
// every counter, writes each ceiling to the durable store before ZooKeeper
// may hold it, and restores sequences that ZooKeeper lost.
//
// The invariants it serves (DESIGN.md): every ID handed out is at most the
// ceiling in the store (the store is written first, ZooKeeper second); a
// stored ceiling never decreases (persist merges by max, fenced by the
// leader epoch); and after any ZooKeeper data loss, every sequence restarts
// above its stored ceiling.
//
// Rollback detection rests on ZooKeeper epochs: every leader election of
// the ensemble, including the one after a restore from an older copy,
// starts a new epoch (the high 32 bits of every zxid). The primary stamps
// each sequence with the epoch it validated it in (sequence.State.ZKEpoch)
// and clients take only from writes in that epoch. When the epoch changes,
// the primary fast-forwards every sequence to its stored ceiling + 1. The
// cost: at most one reserve of IDs per sequence per ZooKeeper leader
// election. ZooKeeper must run in quorum mode (standaloneEnabled=false, even
// with one server): a standalone server never changes its epoch.
//
// What is not guaranteed: legacy 8-byte counters have no ceiling, so their
// reserve-ahead marks are persisted only after the primary sees the counter
// move; a burst faster than the primary reacts is not covered (Status
// reports how close each came). If ZooKeeper and the store both lose data,
// IDs can repeat.
package primary

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/watcher"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ErrFenced is returned by Run when the store holds a newer leader epoch:
// another primary has taken over, and this one must stop at once.
var ErrFenced = persist.ErrFenced

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

// Primary runs the reservation loop while its replica leads.
type Primary struct {
	cfg Config
	zk  *zkclient.Client
	seq *sequence.Client
	log zerolog.Logger

	// Owned by Run's goroutine.
	epoch   int64 // the store's leader epoch of this term
	zkEpoch int64
	audited time.Time // when the store was last read whole (takeStore, audit)
	records map[string]persist.Record
	// broken is the error of the store buckets that could not be read at
	// start (corrupt, or written by a newer format): their sequences are
	// left alone, reported unhealthy, until a new term reads them again.
	broken error
	seqs   map[string]*tracked
	names  []string // the keys of seqs in order, kept by sortedNames
	watch  *watcher.Watcher

	mu     sync.Mutex
	status Status
	stats  Stats
}

// tracked is what the primary knows of one sequence.
type tracked struct {
	state    sequence.State
	czxid    int64
	mzxid    int64
	version  int32
	corrupt  error
	storeErr error // the last store write for this sequence failed

	rate     float64 // IDs per second, smoothed
	lastNext int64
	lastAt   time.Time

	legacyMargin int64 // smallest stored mark - counter seen; negative = overrun
}

// New returns a Primary; call Run when the replica becomes leader.
func New(cfg Config) (*Primary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Primary{cfg: cfg, zk: cfg.Sequences.ZK(), seq: cfg.Sequences, log: cfg.Logger}, nil
}

// Stats count the primary's work across terms.
type Stats struct {
	Raises        int64 // ceilings raised in ZooKeeper
	StorePuts     int64 // successful store writes
	StoreErrors   int64 // failed store writes (nothing raised)
	Initialised   int64 // registrations initialised
	Revalidated   int64 // sequences fast-forwarded (new epoch, re-created znode)
	Restored      int64 // znodes re-created from the store
	Rotated       int64 // sequences moved onto a fresh znode (version limit)
	StoreLost     int64 // ceilings found missing or lower in the store by an audit
	LegacyOverrun int64 // legacy counters seen above their stored mark
}

// SequenceStatus describes one sequence as the primary sees it.
type SequenceStatus struct {
	Name          string  `json:"name"`
	Legacy        bool    `json:"legacy,omitempty"`
	Next          int64   `json:"next"`
	Ceiling       int64   `json:"ceiling"`
	StoredCeiling int64   `json:"stored_ceiling"`
	Rate          float64 `json:"rate_per_second"`
	// RunwaySeconds is how long the outstanding reserve lasts at the
	// current rate (capped at a day for idle sequences).
	RunwaySeconds float64 `json:"runway_seconds"`
	Healthy       bool    `json:"healthy"`
	Problem       string  `json:"problem,omitempty"`
	// LegacyMargin is, for a legacy counter, the smallest gap seen between
	// the stored mark and the counter; negative means the counter once ran
	// past the mark (IDs not covered by the store for a while).
	LegacyMargin int64 `json:"legacy_margin,omitempty"`
}

// Status is a snapshot of the primary's view.
type Status struct {
	Leading   bool             `json:"leading"`
	Epoch     int64            `json:"epoch"`
	ZKEpoch   int64            `json:"zookeeper_epoch"`
	LastSweep time.Time        `json:"last_sweep"`
	Sequences []SequenceStatus `json:"sequences"`
}

// Status returns the latest snapshot (updated after every batch of work).
func (p *Primary) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Stats returns the counters.
func (p *Primary) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Primary) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// Run does the primary's work until ctx is cancelled (leadership lost) and
// returns nil then. It returns ErrFenced (wrapped) as soon as the store
// shows a newer leader epoch, and other errors when it cannot start; the
// caller should then give up leadership.
func (p *Primary) Run(ctx context.Context) error {
	recs, err := p.takeStore(ctx)
	p.audited = time.Now()
	if err != nil {
		return err
	}
	p.log = p.cfg.Logger.With().Int64("epoch", p.epoch).Str("session", fmt.Sprintf("0x%x", p.zk.SessionID())).Logger()
	p.log.Info().Msg("primary: leading")
	defer func() {
		p.mu.Lock()
		p.status.Leading = false
		p.mu.Unlock()
		p.log.Info().Msg("primary: stopped leading")
	}()

	if err := p.start(ctx, recs); err != nil {
		return err
	}
	w, err := watcher.New(p.zk, p.seq.Root(), watcher.Options{Logger: &p.log})
	if err != nil {
		return err
	}
	p.watch = w
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan struct{})
	go func() { defer close(wdone); _ = w.Run(wctx) }()
	defer func() {
		cancel()
		for range w.Events() {
		}
		<-wdone
	}()

	sweep := time.NewTicker(p.cfg.SweepInterval)
	defer sweep.Stop()
	fence := time.NewTicker(p.cfg.FenceCheckInterval)
	defer fence.Stop()
	for {
		var batch []watcher.Event
		select {
		case <-ctx.Done():
			return nil
		case <-fence.C:
			err = p.checkFence(ctx)
		case <-sweep.C:
			w.Resync()
			err = p.sweep(ctx)
		case ev, ok := <-w.Events():
			if !ok {
				return nil
			}
			batch = append(batch, ev)
			// Take whatever else is ready, so the store sees one write for
			// many raises.
		drain:
			for len(batch) < 1000 {
				select {
				case ev, ok := <-w.Events():
					if !ok {
						break drain
					}
					batch = append(batch, ev)
				default:
					break drain
				}
			}
			err = p.handle(ctx, batch)
		}
		p.publish()
		if errors.Is(err, persist.ErrFenced) {
			p.log.Error().Err(err).Msg("primary: fenced by a newer leader; stopping")
			return fmt.Errorf("primary: %w", err)
		}
		if err != nil && ctx.Err() == nil {
			p.log.Warn().Err(err).Msg("primary: work failed; will retry on the next event or sweep")
		}
	}
}

// takeStore takes a new leader epoch in the store and seals every bucket
// with it (persist.Store.Seal): from then on no earlier primary can write,
// and the records returned hold everything earlier primaries wrote. If the
// buckets carry an epoch above the epoch object's (the object was lost), it
// advances again past them at once instead of losing a term to each.
func (p *Primary) takeStore(ctx context.Context) ([]persist.Record, error) {
	for attempt := 0; ; attempt++ {
		epoch, err := p.cfg.Store.AdvanceEpoch(ctx, p.cfg.Holder)
		if err != nil {
			return nil, fmt.Errorf("primary: advance the leader epoch in %s: %w", p.cfg.Store, err)
		}
		p.epoch = epoch
		recs, err := p.cfg.Store.Seal(ctx, epoch)
		if errors.Is(err, persist.ErrFenced) && attempt < 3 {
			if cur, holder, eerr := p.cfg.Store.Epoch(ctx); eerr == nil && cur == epoch && holder == p.cfg.Holder {
				p.cfg.Logger.Warn().Int64("epoch", epoch).Err(err).
					Msg("primary: store buckets carry a newer epoch than the epoch object (was it lost?); advancing past them")
				continue
			}
		}
		if errors.Is(err, persist.ErrFenced) {
			return nil, fmt.Errorf("primary: %w", err)
		}
		if err != nil && !persist.Partial(err) {
			return nil, fmt.Errorf("primary: seal %s at leader epoch %d: %w", p.cfg.Store, epoch, err)
		}
		// Carry on with what could be read: only the sequences of the
		// buckets that failed (corrupt, or a read that kept failing) are
		// left alone, and the buckets are read again at every sweep.
		p.broken = err
		if err != nil {
			p.cfg.Logger.Error().Err(err).Msg("primary: some store objects are unreadable; their sequences are left alone (unhealthy) until they can be read")
		}
		return recs, nil
	}
}

// audit reads the whole store again (sealing any bucket object that was
// lost and comes back empty) and takes what it holds as the truth: a record
// the store lost, or holds lower than this primary wrote, is forgotten, so
// that the next decision persists the sequence's ceiling anew. It also
// reads again the objects that were unreadable, so that a transient failure
// or an object repaired by an operator does not leave their sequences alone
// for the rest of the term.
func (p *Primary) audit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*p.cfg.StoreTimeout)
	defer cancel()
	recs, err := p.cfg.Store.Seal(ctx, p.epoch)
	if errors.Is(err, persist.ErrFenced) {
		return err
	}
	if ctx.Err() != nil {
		return nil // try again at the next sweep
	}
	p.audited = time.Now()
	held := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		held[r.Name] = r
	}
	lost := 0
	for name, old := range p.records {
		if err != nil && persist.Affects(err, name) {
			continue // unreadable: keep what we know
		}
		r, ok := held[name]
		if !ok || r.Ceiling < old.Ceiling {
			lost++
		}
		if !ok {
			delete(p.records, name)
		}
	}
	for name, r := range held {
		p.records[name] = r
	}
	if lost > 0 {
		p.count(func(s *Stats) { s.StoreLost += int64(lost) })
		p.log.Warn().Int("sequences", lost).Msg("primary: the store lost ceilings it had accepted (an object deleted or rolled back); persisting them again")
	}
	if p.broken != nil && err == nil {
		p.log.Info().Msg("primary: the store objects that were unreadable are readable again")
	}
	p.broken = err
	return nil
}

// checkFence reads the store's leader epoch and returns ErrFenced (wrapped)
// if a newer primary has taken it. Read errors are left to the store
// writes, which fence too.
func (p *Primary) checkFence(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	epoch, holder, err := p.cfg.Store.Epoch(ctx)
	if err != nil || epoch <= p.epoch {
		return nil
	}
	return fmt.Errorf("%w: leader epoch %d, held by %q, has replaced this primary's epoch %d", persist.ErrFenced, epoch, holder, p.epoch)
}

// start makes sure the root and marker exist, and restores whatever
// ZooKeeper lost, from the records takeStore read.
func (p *Primary) start(ctx context.Context, recs []persist.Record) error {
	var err error
	p.records = make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		p.records[r.Name] = r
	}
	p.seqs = make(map[string]*tracked)
	conn := p.zk.Conn()
	acl := p.acl()
	if err := zkclient.EnsurePath(conn, p.seq.Root(), acl); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	if p.zkEpoch, err = p.seq.CurrentEpoch(ctx); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	p.log = p.log.With().Int64("zk_epoch", p.zkEpoch).Logger()
	exists, _, err := conn.Exists(p.cfg.MarkerPath)
	if err != nil {
		return fmt.Errorf("primary: check the cluster marker %s: %w", p.cfg.MarkerPath, err)
	}
	if !exists && len(p.records) > 0 {
		p.log.Warn().Int("stored_sequences", len(p.records)).Str("marker", p.cfg.MarkerPath).
			Msg("primary: cluster marker missing while the store holds sequences: ZooKeeper was wiped or replaced; restoring")
	}
	if err := p.restore(ctx); err != nil {
		return err
	}
	if !exists {
		if err := zkclient.EnsurePath(conn, p.cfg.MarkerPath, acl); err != nil {
			return fmt.Errorf("primary: create the cluster marker: %w", err)
		}
	}
	return nil
}

// reserve sizes a sequence's reserve from its consumption rate, and at
// least twice what was taken since the current rate sample began (under a
// second ago), so a burst is covered before the rate catches up.
func (p *Primary) reserve(t *tracked) int64 {
	want := t.rate * p.cfg.Runway.Seconds()
	if !t.state.Legacy && !t.state.Registered && t.state.Next > t.lastNext {
		want = max(want, 2*float64(t.state.Next-t.lastNext))
	}
	if want > float64(p.cfg.MaxReserve) {
		return p.cfg.MaxReserve
	}
	return max(p.cfg.MinReserve, int64(math.Ceil(want)))
}

// opTimeout bounds one planned ZooKeeper operation (a raise, a
// revalidation, windows).
const opTimeout = 30 * time.Second

// rateWindow is the shortest interval over which a consumption rate is
// measured.
const rateWindow = time.Second

// observe updates what the primary knows of a sequence from an event.
func (p *Primary) observe(ev watcher.Event) *tracked {
	t := p.seqs[ev.Name]
	if t == nil {
		t = &tracked{legacyMargin: math.MaxInt64}
		p.seqs[ev.Name] = t
	}
	t.czxid, t.mzxid, t.version = ev.Czxid, ev.Mzxid, ev.Version
	st, err := sequence.ParseState(ev.Name, ev.Data)
	t.corrupt = err
	if err != nil {
		p.log.Error().Err(err).Str("sequence", ev.Name).Msg("primary: corrupt sequence state; leaving it alone until repaired")
		return t
	}
	now := time.Now()
	switch {
	case st.Registered || t.lastAt.IsZero():
		t.lastNext, t.lastAt = st.Next, now
	case st.Next < t.lastNext:
		// Older than what we know: an event read before our own write
		// (a resync races it) or a rollback about to be revalidated. The
		// baseline never moves back, or our own fast-forward would later
		// count as consumption.
	default:
		// Sample over at least a second: a client's batch arrives in one
		// write, and over a few milliseconds it would look like a huge
		// rate (and a reserve that every ZooKeeper election then skips).
		if dt := now.Sub(t.lastAt).Seconds(); dt >= rateWindow.Seconds() {
			inst := float64(st.Next-t.lastNext) / dt
			// Rise fast, decay slowly: a burst must be covered at once.
			if inst > t.rate {
				t.rate = inst
			} else {
				t.rate = 0.8*t.rate + 0.2*inst
			}
			t.lastNext, t.lastAt = st.Next, now
		}
	}
	t.state = st
	return t
}

// plan is one sequence's decided change: the store first, then ZooKeeper.
type plan struct {
	name    string
	kind    planKind
	floor   int64 // for revalidations: next moves at least here
	ceiling int64 // the new ceiling (or legacy mark) to persist first
	rec     persist.Record
}

type planKind int

const (
	planRaise planKind = iota + 1
	planInit
	planRevalidate
	planFastForward
	planLegacyMark
	planLegacyForward
	planRotate
)

// decide returns what a sequence needs, if anything.
func (p *Primary) decide(name string, t *tracked) (plan, bool) {
	if t.corrupt != nil || (p.broken != nil && persist.Affects(p.broken, name)) {
		return plan{}, false
	}
	st := t.state
	rec, stored := p.records[name]
	reserve := p.reserve(t)
	base := persist.Record{Name: name, Czxid: t.czxid, Mzxid: t.mzxid, Version: t.version,
		Start: st.Start, End: st.End, Windows: st.Windows}
	switch {
	case st.Legacy:
		base.Legacy = true
		if stored && st.Next < rec.Ceiling && epochOf(t.mzxid) < p.zkEpoch {
			// Last written before ZooKeeper's latest leader election: a
			// restore from an older copy may have taken the counter back
			// below what workers took. Move it up to the stored mark (IDs
			// taken past the mark before the primary saw them stay
			// uncovered: docs/guarantees.md).
			to := min(rec.Ceiling, sequence.MaxLegacyCounter-reserve)
			return plan{name: name, kind: planLegacyForward, floor: to, ceiling: to + reserve, rec: base}, true
		}
		if stored && st.Next < rec.Ceiling-reserve/2 {
			return plan{}, false
		}
		return plan{name: name, kind: planLegacyMark, ceiling: st.Next + reserve, rec: base}, true
	case st.Registered:
		// A new sequence, or one created again after a delete: start
		// above anything a previous sequence of this name handed out.
		floor := st.Start
		if stored {
			floor = max(floor, sequence.AddSat(rec.Ceiling, 1))
		}
		return plan{name: name, kind: planInit, floor: floor, ceiling: ceil(floor, 2*reserve, st.End), rec: base}, true
	}
	// The floor: above everything the store covers, and above the ceiling
	// ZooKeeper shows (a store that lost the record must not lower it).
	floor := sequence.AddSat(st.Ceiling, 1)
	if stored {
		floor = max(floor, sequence.AddSat(rec.Ceiling, 1))
	}
	switch {
	case stored && rec.Czxid != 0 && rec.Czxid != t.czxid:
		p.log.Warn().Str("sequence", name).Int64("czxid", t.czxid).Int64("stored_czxid", rec.Czxid).
			Msg("primary: sequence znode was re-created; fast-forwarding past the stored ceiling")
		return plan{name: name, kind: planFastForward, floor: floor, ceiling: ceil(floor, 2*reserve, st.End), rec: base}, true
	case !st.Validated() || st.ZKEpoch != p.zkEpoch || st.ZKEpoch != epochOf(t.mzxid):
		// Not stamped in this epoch (or stamped by a release without
		// markers, which clients no longer take from).
		return plan{name: name, kind: planRevalidate, floor: floor, ceiling: ceil(floor, 2*reserve, st.End), rec: base}, true
	case t.version >= p.cfg.RotateVersion:
		return plan{name: name, kind: planRotate, floor: floor, ceiling: st.Ceiling, rec: base}, true
	case st.Ceiling < st.End && st.Ceiling-st.Next+1 < reserve:
		return plan{name: name, kind: planRaise, floor: floor, ceiling: ceil(st.Next, 2*reserve, st.End), rec: base}, true
	case !stored || rec.Ceiling < st.Ceiling:
		// The store must cover the ZooKeeper ceiling; persist it again.
		return plan{name: name, kind: planRaise, floor: floor, ceiling: st.Ceiling, rec: base}, true
	}
	return plan{}, false
}

// ceil returns from+n-1 capped at end, without overflow.
func ceil(from, n, end int64) int64 {
	if from > end || n > end-from {
		return end
	}
	return from + n - 1
}

func epochOf(zxid int64) int64 { return zxid >> 32 }

// handle processes a batch of watcher events.
func (p *Primary) handle(ctx context.Context, batch []watcher.Event) error {
	var changed []string // in order, once each
	seen := make(map[string]bool)
	missing, everything := false, false
	for _, ev := range batch {
		switch ev.Kind {
		case watcher.Added, watcher.Changed:
			t := p.observe(ev)
			if t.corrupt == nil && !t.state.Legacy && !t.state.Registered && epochOf(t.mzxid) != p.zkEpoch {
				// A write in an epoch we have not seen: ZooKeeper may
				// have elected a leader. Probe; if so, revalidate all.
				newEpoch, err := p.newEpoch(ctx)
				if err != nil {
					return err
				}
				everything = everything || newEpoch
			}
			if !seen[ev.Name] {
				seen[ev.Name] = true
				changed = append(changed, ev.Name)
			}
		case watcher.Removed:
			delete(p.seqs, ev.Name)
			missing = true
		case watcher.Synced:
			missing = true
		}
	}
	if everything {
		return p.sweep(ctx)
	}
	// One decision per sequence, from its latest state: a busy sequence
	// has many events in a batch, and one plan each would run several
	// operations on it at once.
	var plans []plan
	for _, name := range changed {
		if t := p.seqs[name]; t != nil {
			if pl, ok := p.decide(name, t); ok {
				plans = append(plans, pl)
			}
		}
	}
	if err := p.apply(ctx, plans); err != nil {
		return err
	}
	if missing {
		return p.restore(ctx)
	}
	return nil
}

// newEpoch probes ZooKeeper's epoch and reports whether it changed; the
// caller then revalidates every sequence (decide sees the stale stamps).
func (p *Primary) newEpoch(ctx context.Context) (bool, error) {
	e, err := p.seq.CurrentEpoch(ctx)
	if err != nil {
		return false, err
	}
	if e == p.zkEpoch {
		return false, nil
	}
	p.log.Warn().Int64("zk_epoch", e).Int64("previous_zk_epoch", p.zkEpoch).
		Msg("primary: ZooKeeper elected a new leader; revalidating every sequence (each skips at most its reserve)")
	p.zkEpoch = e
	p.log = p.log.With().Int64("zk_epoch", e).Logger()
	return true, nil
}

// sweep re-checks every sequence: the epoch, the reserves (rates change
// with time even without events), windows, and anything missing.
func (p *Primary) sweep(ctx context.Context) error {
	if _, err := p.newEpoch(ctx); err != nil {
		return err
	}
	if p.broken != nil || time.Since(p.audited) >= p.cfg.AuditInterval {
		if err := p.audit(ctx); err != nil {
			return err
		}
	}
	var plans []plan
	for name, t := range p.seqs {
		if pl, ok := p.decide(name, t); ok {
			plans = append(plans, pl)
		}
	}
	if err := p.apply(ctx, plans); err != nil {
		return err
	}
	p.mu.Lock()
	p.status.LastSweep = time.Now()
	p.mu.Unlock()
	return p.restore(ctx)
}

// apply persists the plans' ceilings in one store write, then carries them
// out in ZooKeeper. Nothing is raised in ZooKeeper if the store write
// failed: invariant 2.
func (p *Primary) apply(ctx context.Context, plans []plan) error {
	if len(plans) == 0 {
		return nil
	}
	recs := make([]persist.Record, 0, len(plans))
	for _, pl := range plans {
		r := pl.rec
		r.Ceiling = pl.ceiling
		recs = append(recs, r)
	}
	putErr := p.put(ctx, recs)
	if errors.Is(putErr, persist.ErrFenced) {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return putErr
	}
	if putErr != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		p.log.Warn().Err(putErr).Int("ceilings", len(recs)).Msg("primary: store write failed; those ceilings stay where they are")
	} else {
		p.count(func(s *Stats) { s.StorePuts++ })
	}
	// Only what the store accepted may reach ZooKeeper: buckets are
	// written independently, so a failed bucket holds back only its own
	// sequences.
	written := plans[:0:0]
	for i, pl := range plans {
		t := p.seqs[pl.name]
		if putErr != nil && persist.Affects(putErr, pl.name) {
			if t != nil {
				t.storeErr = putErr
			}
			continue
		}
		if t != nil {
			t.storeErr = nil
		}
		r := recs[i]
		r.Ceiling = max(r.Ceiling, p.records[r.Name].Ceiling)
		p.records[r.Name] = r
		written = append(written, pl)
	}
	plans = written
	var mu sync.Mutex
	var errs []error
	type result struct {
		st    sequence.State
		moved int64
		czxid int64 // of a rotated sequence's new znode
	}
	done := make(map[string]result, len(plans))
	sem := make(chan struct{}, p.cfg.Parallelism)
	var wg sync.WaitGroup
	for _, pl := range plans {
		if pl.kind == planLegacyMark {
			continue // the mark lives only in the store
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var before sequence.State
			if t := p.seqs[pl.name]; t != nil {
				before = t.state
			}
			// Every operation is safe to abandon (the store already holds
			// its ceiling) and is retried at the next event or sweep, so a
			// compare-and-set loop that cannot win must not stall the
			// primary's other work.
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			st, moved, czxid, err := p.carryOut(octx, pl, before)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if st.Name != "" {
				done[pl.name] = result{st, moved, czxid}
			}
		}()
	}
	wg.Wait()
	// What we wrote is the state now: deciding again from the events of
	// our own writes, or from a sweep before they arrive, must not redo it.
	for name, r := range done {
		if t := p.seqs[name]; t != nil {
			t.state = r.st
			// Our own move of next is not consumption: shift the rate's
			// baseline by it, or every fast-forward would look like a
			// burst, size a bigger reserve, and the next fast-forward skip
			// more (the reserve would grow exponentially).
			t.lastNext += r.moved
			if r.st.Legacy {
				// Written by us in this epoch: no further forward until
				// the next election, even before our write's event.
				t.mzxid = max(t.mzxid, p.zkEpoch<<32)
			}
			if r.czxid != 0 {
				// Rotated: recognise the new znode as ours, not as one
				// re-created by someone else. The next store write of the
				// sequence records it; a successor primary that reads the
				// old one fast-forwards the sequence (one reserve).
				t.czxid, t.version = r.czxid, 0
				if rec, ok := p.records[name]; ok {
					rec.Czxid = r.czxid
					p.records[name] = rec
				}
			}
		}
	}
	if putErr != nil {
		errs = append(errs, fmt.Errorf("persist ceilings: %w", putErr))
	}
	return errors.Join(errs...)
}

// refresh re-reads recs from the store into p.records: one by one for a
// few, a full load for many.
func (p *Primary) refresh(ctx context.Context, recs []persist.Record) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	if len(recs) > 64 {
		all, err := p.cfg.Store.Load(ctx)
		if err != nil {
			return err
		}
		for _, r := range all {
			p.records[r.Name] = r
		}
		return nil
	}
	for _, r := range recs {
		got, err := p.cfg.Store.Get(ctx, r.Name)
		if err != nil {
			return err
		}
		p.records[r.Name] = got
	}
	return nil
}

// put writes records to the store within StoreTimeout.
func (p *Primary) put(ctx context.Context, recs []persist.Record) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	return p.cfg.Store.Put(ctx, p.epoch, recs...)
}

// carryOut makes one plan's ZooKeeper change, after the store holds its
// ceiling.
// It also returns how far the primary itself moved next (a fast-forward,
// windows carved): that is not consumption, and the rate must not count it.
func (p *Primary) carryOut(ctx context.Context, pl plan, before sequence.State) (sequence.State, int64, int64, error) {
	var (
		st    sequence.State
		czxid int64
		err   error
	)
	switch pl.kind {
	case planRaise:
		st, err = p.seq.Raise(ctx, pl.name, pl.ceiling)
		p.count(func(s *Stats) { s.Raises++ })
		if errors.Is(err, sequence.ErrMarkerGone) {
			// The znode's state names a marker it does not have: written
			// in another history, or re-created with old data. Stamp it
			// again above everything stored.
			p.log.Warn().Str("sequence", pl.name).Msg("primary: sequence state names a missing marker; fast-forwarding past the stored ceiling")
			// Only up to the ceiling the store just accepted: the next
			// raise follows from the next decision.
			st, err = p.seq.FastForward(ctx, pl.name, pl.floor, pl.ceiling)
			p.count(func(s *Stats) { s.Revalidated++ })
		}
	case planLegacyForward:
		st, err = p.seq.ForwardLegacy(ctx, pl.name, pl.floor)
		p.count(func(s *Stats) { s.Revalidated++ })
	case planRotate:
		st, czxid, err = p.seq.Rotate(ctx, pl.name)
		p.count(func(s *Stats) { s.Rotated++ })
		if err == nil {
			p.log.Info().Str("sequence", pl.name).Msg("primary: rotated the sequence onto a fresh znode (its data version neared the limit)")
		}
	case planInit:
		st, err = p.seq.Revalidate(ctx, pl.name, pl.floor, pl.ceiling)
		p.count(func(s *Stats) { s.Initialised++ })
	case planRevalidate:
		st, err = p.seq.Revalidate(ctx, pl.name, pl.floor, pl.ceiling)
		p.count(func(s *Stats) { s.Revalidated++ })
	case planFastForward:
		st, err = p.seq.FastForward(ctx, pl.name, pl.floor, pl.ceiling)
		p.count(func(s *Stats) { s.Revalidated++ })
	}
	if errors.Is(err, sequence.ErrUnknownSequence) {
		return sequence.State{}, 0, 0, nil // deleted meanwhile; the watcher reports it
	}
	if err != nil {
		return sequence.State{}, 0, 0, err
	}
	p.log.Debug().Str("sequence", pl.name).Int64("next", st.Next).Int64("ceiling", st.Ceiling).
		Int64("zk_epoch", st.ZKEpoch).Msg("primary: ceiling set")
	var moved int64
	if pl.kind != planRaise && st.Next > before.Next {
		moved = st.Next - before.Next
	}
	if st.Windows > 0 {
		carved, err := p.topUpWindows(ctx, pl.name, st)
		return st, moved + carved, czxid, err
	}
	return st, moved, czxid, nil
}

// topUpWindows keeps a windowed sequence's open windows at the configured
// count. Windows are carved below the ceiling, so they need no store write
// of their own.
func (p *Primary) topUpWindows(ctx context.Context, name string, st sequence.State) (int64, error) {
	open, err := p.seq.PruneWindows(ctx, name, p.cfg.RotateVersion)
	if err != nil {
		return 0, err
	}
	if st.Next > st.Ceiling {
		return 0, nil // nothing fresh to carve: the next raise tops them up
	}
	size := max(1, (st.Ceiling-st.Next+1)/int64(2*st.Windows))
	var carved int64
	for ; open < st.Windows; open++ {
		if _, err := p.seq.OpenWindow(ctx, name, size); err != nil {
			return carved, err
		}
		carved += size
	}
	return carved, nil
}

// restore re-creates every live sequence the store knows and ZooKeeper
// lacks, above its stored ceiling. Sequences are deleted only by 'seqkeeper
// delete', which writes a tombstone first; a sequence znode that disappears
// any other way comes back.
func (p *Primary) restore(ctx context.Context) error {
	candidates := 0
	for name, r := range p.records {
		if !r.Deleted && p.seqs[name] == nil {
			candidates++
		}
	}
	if candidates == 0 {
		return nil
	}
	// The watcher may simply not have reported them yet: list once.
	conn := p.zk.Conn()
	children, _, err := conn.Children(p.seq.Root())
	if errors.Is(err, zk.ErrNoNode) {
		p.log.Warn().Str("root", p.seq.Root()).Msg("primary: the sequences root is gone: ZooKeeper lost its data; restoring")
		acl := p.acl()
		if err := zkclient.EnsurePath(conn, p.seq.Root(), acl); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if err := zkclient.EnsurePath(conn, p.cfg.MarkerPath, acl); err != nil {
			return fmt.Errorf("restore: cluster marker: %w", err)
		}
		children = nil
	} else if err != nil {
		return fmt.Errorf("restore: list %s: %w", p.seq.Root(), err)
	}
	present := make(map[string]bool, len(children))
	for _, c := range children {
		present[c] = true
	}
	lost := func() []persist.Record {
		var out []persist.Record
		for name, r := range p.records {
			if !r.Deleted && !present[name] {
				out = append(out, r)
			}
		}
		return out
	}
	really := lost()
	if len(really) == 0 {
		return nil
	}
	// Read those records again: an operator's tombstone ('seqkeeper
	// delete' writes it, then deletes the znode) is newer than our copy.
	if err := p.refresh(ctx, really); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if really = lost(); len(really) == 0 {
		return nil
	}
	sort.Slice(really, func(i, j int) bool { return really[i].Name < really[j].Name })
	states := make([]sequence.State, 0, len(really))
	recs := make([]persist.Record, 0, len(really))
	reserve := 2 * p.cfg.MinReserve // no traffic seen yet
	for _, r := range really {
		st, r := Recreate(r, reserve)
		states = append(states, st)
		recs = append(recs, r)
	}
	if err := p.put(ctx, recs); err != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return fmt.Errorf("restore: persist %d ceilings: %w", len(recs), err)
	}
	for _, r := range recs {
		p.records[r.Name] = r
	}
	created, stale, err := p.seq.Restore(ctx, states, p.zkEpoch)
	p.count(func(s *Stats) { s.Restored += int64(created) })
	p.log.Warn().Int("restored", created).Int("stale_epoch", len(stale)).
		Msg("primary: restored sequences missing from ZooKeeper at their stored ceiling + 1")
	return err
}

// Recreate returns the state that re-creates in ZooKeeper the sequence of
// record r, lost there, above everything r covers and with reserve IDs
// usable at once, and r with its ceiling moved to cover them. The record
// must reach the store before the state reaches ZooKeeper. A legacy
// counter comes back at its mark, and the mark moves up by reserve.
func Recreate(r persist.Record, reserve int64) (sequence.State, persist.Record) {
	st := sequence.State{Name: r.Name, Start: max(1, r.Start), End: r.End, Windows: r.Windows}
	if st.End == 0 {
		st.End = sequence.MaxID
	}
	if r.Legacy {
		st = sequence.State{Name: r.Name, Legacy: true, Next: r.Ceiling}
		r.Ceiling = min(r.Ceiling, sequence.MaxLegacyCounter-reserve) + reserve
	} else {
		// Above everything r covers. With every ID of the space covered,
		// the sequence comes back exhausted (next one past the last ID
		// it may issue), never at its last ID again.
		last := min(st.End, math.MaxInt64-1) // see sequence.MaxID
		st.Next = max(sequence.AddSat(r.Ceiling, 1), st.Start)
		if st.Next > last {
			st.Next, st.Ceiling = last+1, last
		} else {
			st.Ceiling = ceil(st.Next, reserve, st.End)
		}
		r.Ceiling = max(r.Ceiling, st.Ceiling)
	}
	r.Czxid, r.Mzxid, r.Version = 0, 0, 0 // new znodes: recorded when seen
	return st, r
}

// sortedNames returns the names in p.seqs in order. Performance: publish
// runs after every batch of events, and sorting every sequence's status
// there each time (sort.Slice over 100,000 structs, a quarter of the
// primary's CPU while it took over 100,000 sequences) is replaced by names
// kept sorted across calls and sorted again only when the set changed.
func (p *Primary) sortedNames() []string {
	same := len(p.names) == len(p.seqs)
	for i := 0; same && i < len(p.names); i++ {
		_, same = p.seqs[p.names[i]]
	}
	if !same {
		p.names = slices.Sorted(maps.Keys(p.seqs))
	}
	return p.names
}

// publish refreshes the status snapshot.
func (p *Primary) publish() {
	out := make([]SequenceStatus, 0, len(p.seqs))
	for _, name := range p.sortedNames() {
		t := p.seqs[name]
		st := t.state
		s := SequenceStatus{Name: name, Legacy: st.Legacy, Next: st.Next, Ceiling: st.Ceiling,
			StoredCeiling: p.records[name].Ceiling, Rate: t.rate, Healthy: true}
		left := st.Ceiling - st.Next + 1
		if st.Legacy {
			left = s.StoredCeiling - st.Next
			m := min(t.legacyMargin, left)
			if m < 0 && t.legacyMargin >= 0 {
				p.count(func(s *Stats) { s.LegacyOverrun++ })
			}
			t.legacyMargin = m
			s.LegacyMargin = m
		}
		s.RunwaySeconds = 86400
		if t.rate > 0 {
			s.RunwaySeconds = min(86400, float64(left)/t.rate)
		}
		switch {
		case t.corrupt != nil:
			s.Healthy, s.Problem = false, t.corrupt.Error()
		case p.broken != nil && persist.Affects(p.broken, name):
			s.Healthy, s.Problem = false, "its store object is unreadable: "+p.broken.Error()
		case t.storeErr != nil:
			s.Healthy, s.Problem = false, "the last store write failed: "+t.storeErr.Error()
		case st.Registered:
			s.Healthy, s.Problem = false, "registered, not initialised yet"
		case !st.Legacy && (st.ZKEpoch != p.zkEpoch || !st.Validated()):
			s.Healthy, s.Problem = false, "not validated in the current ZooKeeper epoch yet"
		case !st.Legacy && s.StoredCeiling < st.Ceiling:
			s.Healthy, s.Problem = false, "ZooKeeper ceiling above the stored ceiling"
		case st.Legacy && s.LegacyMargin < 0:
			s.Healthy, s.Problem = false, "legacy counter ran past its stored mark"
		}
		out = append(out, s)
	}
	p.mu.Lock()
	p.status.Leading, p.status.Epoch, p.status.ZKEpoch, p.status.Sequences = true, p.epoch, p.zkEpoch, out
	p.mu.Unlock()
}
