// Package primary is the reservation loop that runs on the one replica that
// leads: it initialises new sequences, keeps a reserved ceiling ahead of
// every counter, writes each ceiling to the durable store before ZooKeeper
// may hold it, and restores sequences that ZooKeeper lost.
//
// The invariants it serves (docs/design.md): every ID handed out is at most the
// ceiling in the store (the store is written first, ZooKeeper second); a
// stored ceiling never decreases (persist merges by max, fenced by the
// leader epoch); and after any ZooKeeper data loss, every sequence restarts
// above its stored ceiling.
//
// Rollback detection rests on ZooKeeper epochs: every leader election of
// the ensemble, including the one after a restore from an older copy,
// starts a new epoch (the high 32 bits of every zxid). The primary stamps
// each sequence with the epoch it validated it in (state.State.ZKEpoch)
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
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/watcher"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ErrFenced is returned by Run when the store holds a newer leader epoch:
// another primary has taken over, and this one must stop at once.
var ErrFenced = persist.ErrFenced

// Deps are what a Primary works with besides its tunables.
type Deps struct {
	// Sequences is the ZooKeeper layer for the sequences root. Required.
	Sequences *seqzk.Client
	// Store is the durable store of ceilings. Required.
	Store *persist.Store
	// Holder names this replica in the store's epoch record. Required.
	Holder string
	// ElectionPath is the replicas' election directory, which the primary
	// holds to the configured ACL layout with the rest (keepLayout).
	ElectionPath string
	// Logger receives the primary's decisions; the zero value logs
	// nothing.
	Logger zerolog.Logger
}

// Primary runs the reservation loop while its replica leads.
type Primary struct {
	cfg  config.Primary
	deps Deps
	zk   *zkclient.Client
	seq  *seqzk.Client
	log  zerolog.Logger
	term zerolog.Logger // log without the ZooKeeper epoch, which each election replaces

	// Owned by Run's goroutine.
	epoch   int64 // the store's leader epoch of this term
	zkEpoch int64
	// era is the root's era in ZooKeeper epoch zkEpoch (seqzk.Era): every
	// record this primary writes carries it as Seen.
	era seqzk.Era
	// wiped is set when ZooKeeper was found to have lost the root's data
	// (the root or its own znode gone), until a restore has run: every
	// sequence the store holds live and ZooKeeper lacks is then lost.
	// relayout is set with it, until keepLayout has walked every znode
	// to set the configured ACL layout: what others re-created (the
	// election) carries its creator's ACL.
	wiped, relayout bool
	// births are the initialisations prepared for the next decisions
	// (prepareBirths), and kept the names judged deleted by hand in the
	// current era (restore.go), so that they are not read again at every
	// sweep.
	births   map[string]birth
	handGone map[string]struct{}
	audited  time.Time // when the store was last read whole (takeStore, audit)
	// records holds what the store holds of the sequences the primary
	// does not follow (a followed one's is in its tracked; records.go),
	// and recordsBuilt its size when last built (compactRecords).
	records      map[string]stored
	recordsBuilt int
	// broken is the error of the store buckets that could not be read at
	// start (corrupt, or written by a newer format): their sequences are
	// left alone, reported unhealthy, until a new term reads them again.
	broken error
	seqs   map[string]*tracked
	// held are the sequences whose routine raise waits to share a store
	// write, with when it began to wait (batch.go).
	held map[string]time.Time
	// pace paces the store writes of raises (batch.go); paceUntil is when
	// the next may go, while urgent plans wait for it (urgent set).
	pace      *rate.Limiter
	paceUntil time.Time
	urgent    bool
	// flight is the batch of raises on its way to ZooKeeper, and recheck
	// the sequences whose decision waits for it to land (pipeline.go).
	flight  *flight
	recheck map[string]struct{}
	// landGate, set by tests before Run, holds every flight after its
	// raises are in ZooKeeper and before it lands, until it is closed.
	landGate <-chan struct{}
	watch    *watcher.Watcher
	// legacyMoved are the legacy counters seen to move since noteLegacy
	// last ran; legacyMargins the smallest stored mark - counter seen of
	// each that moved (negative: overrun), apart from tracked as a rare
	// field (guarded by view).
	legacyMoved   map[string]struct{}
	legacyMargins map[string]int64

	// view guards what StatusOf reads of the loop's state: epoch, zkEpoch,
	// records, broken, seqs and the tracked values in it, names and
	// namesStale. Run's goroutine changes them holding view, and reads
	// them without it (no one else changes them).
	view       sync.Mutex
	names      []string // the keys of seqs in order, kept by sortedNames
	namesStale bool     // seqs gained or lost a key since names was sorted
	// storeErrs holds, for the sequences whose last store write failed,
	// its error (rare: kept apart from tracked).
	storeErrs map[string]error

	mu     sync.Mutex
	status Status
	stats  Stats
}

// tracked is what the primary knows of one sequence.
// One per sequence, so its size counts: 240 bytes (a Go size class; a
// time.Time or a second error field would take it to 256), the store's
// record of the sequence included (records.go).
type tracked struct {
	state   state.State
	czxid   int64
	mzxid   int64
	version int32
	// fresh: state is the znode's data at version, as read (an event) or
	// as this primary's raise wrote it; not after the other writes, which
	// set state without learning the version. A raise from a fresh state
	// need not read it again (launch).
	fresh bool
	// hasRec: rec* hold the store's record of the sequence (what p.records
	// holds of a sequence the primary does not follow; records.go).
	hasRec     bool
	recDeleted bool
	// born: this primary saw the sequence registered, so its demand
	// before then is known to be nil; otherwise its past is unknown and
	// its rate is read over what this primary has watched (rateOf).
	born       bool
	recCeiling int64
	recCzxid   int64
	corrupt    error

	// rate is the demand in IDs per second, smoothed over the runway, and
	// burst the most IDs taken in one sample, decaying over the runway;
	// sampled is the seconds the rate's samples cover (observe, plan.go).
	// float32, so that tracked keeps its size class.
	rate, burst, sampled float32
	lastNext             int64
	lastAt               time.Duration // since clockBase; 0: no sample yet
}

// clockBase is where tracked.lastAt counts from (a monotonic reading).
var clockBase = time.Now()

// New returns a Primary tuned by cfg (start from config.DefaultPrimary;
// 'seqkeeper serve' passes config.Config.Primary) that works with deps.
// Call Run when the replica becomes leader.
func New(cfg config.Primary, deps Deps) (*Primary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("primary: %w", err)
	}
	switch {
	case deps.Sequences == nil:
		return nil, errors.New("primary: Deps.Sequences is required")
	case deps.Store == nil:
		return nil, errors.New("primary: Deps.Store is required")
	case deps.Holder == "":
		return nil, errors.New("primary: Deps.Holder is required (the replica's id)")
	}
	return &Primary{cfg: cfg, deps: deps, zk: deps.Sequences.ZK(), seq: deps.Sequences, log: deps.Logger,
		pace: rate.NewLimiter(rate.Limit(cfg.StoreWriteRate), cfg.StoreWriteBurst)}, nil
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
	p.term = p.deps.Logger.With().Int64("epoch", p.epoch).Str("session", fmt.Sprintf("0x%x", p.zk.SessionID())).Logger()
	p.log = p.term
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

	cctx, stopCompactor := context.WithCancel(ctx)
	comp := p.startCompactor(cctx)
	defer func() { stopCompactor(); <-comp.done }()
	defer func() { _ = p.land() }()

	p.mu.Lock()
	p.status.Leading = true
	p.mu.Unlock()
	return p.loop(ctx, w, comp)
}

// loop is the primary's work once it leads: it answers the watcher's
// events (in batches), lands writes in flight, plans what is due, releases
// held raises, checks the fence, and sweeps, one at a time, until ctx is
// done or the watcher stops (nil), or the store shows a newer leader
// (ErrFenced, wrapped). Any other failure is logged and retried on the
// next event or sweep.
func (p *Primary) loop(ctx context.Context, w *watcher.Watcher, comp *compactor) error {
	sweep := time.NewTicker(p.cfg.SweepInterval)
	defer sweep.Stop()
	fence := time.NewTicker(p.cfg.FenceCheckInterval)
	defer fence.Stop()
	batchTimer := time.NewTimer(time.Hour)
	defer batchTimer.Stop()
	for {
		if wait, ok := p.batchWait(); ok {
			batchTimer.Reset(wait)
		} else {
			batchTimer.Stop()
		}
		var recheck <-chan struct{}
		if p.hasDue() {
			recheck = ready
		}
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-p.flightDone():
			err = p.land()
		case <-recheck:
			err = p.apply(ctx, p.plan(ctx, p.due()))
		case <-batchTimer.C:
			if p.mayWrite() {
				p.urgent = false
				err = p.apply(ctx, p.releaseHeld())
			}
		case <-fence.C:
			err = p.checkFence(ctx)
		case err = <-comp.fenced:
		case <-sweep.C:
			w.Resync()
			err = p.sweep(ctx)
		case ev, ok := <-w.Events():
			if !ok {
				return nil
			}
			err = p.handle(ctx, drainEvents(w, ev))
		}
		p.nudge(comp)
		p.noteLegacy()
		if errors.Is(err, persist.ErrFenced) {
			p.log.Error().Err(err).Msg("primary: fenced by a newer leader; stopping")
			return fmt.Errorf("primary: %w", err)
		}
		if err != nil && ctx.Err() == nil {
			p.log.Warn().Err(err).Msg("primary: work failed; will retry on the next event or sweep")
		}
	}
}

// drainEvents returns first and whatever other events w has ready, up to
// 1000 in all, so that the store sees one write for many raises.
func drainEvents(w *watcher.Watcher, first watcher.Event) []watcher.Event {
	batch := []watcher.Event{first}
	for len(batch) < 1000 {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return batch
			}
			batch = append(batch, ev)
		default:
			return batch
		}
	}
	return batch
}

// start makes sure the root and marker exist, and restores whatever
// ZooKeeper lost, from the records takeStore read.
func (p *Primary) start(ctx context.Context, recs []persist.Record) error {
	var err error
	records := make(map[string]stored, len(recs))
	for _, r := range recs {
		records[r.Name] = storedOf(r)
	}
	p.view.Lock()
	// Nothing followed yet: every record is in p.records, until the
	// watcher reports its sequence (adopt).
	p.records, p.recordsBuilt, p.seqs, p.names, p.namesStale = records, len(records), make(map[string]*tracked), nil, false
	p.storeErrs = make(map[string]error)
	p.view.Unlock()
	p.legacyMoved = make(map[string]struct{})
	p.legacyMargins = make(map[string]int64)
	p.held = make(map[string]time.Time)
	p.recheck = make(map[string]struct{})
	p.births = make(map[string]birth)
	p.handGone = make(map[string]struct{})
	// Before anything is created: a root, or its own znode, that is gone
	// while the store holds sequences means ZooKeeper lost the root's
	// data.
	prev, err := p.seq.Meta().ReadEra(ctx)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	p.wiped = !prev.Exists
	p.relayout = p.relayout || p.wiped
	zkEpoch, err := p.seq.Meta().CurrentEpoch(ctx)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	p.view.Lock()
	p.zkEpoch = zkEpoch
	p.view.Unlock()
	if p.era, err = p.seq.Meta().CurrentEra(ctx, zkEpoch); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	p.log = p.term.With().Int64("zk_epoch", p.zkEpoch).Logger()
	exists, _, err := p.zk.Session().Exists(ctx, p.cfg.MarkerPath)
	if err != nil {
		return fmt.Errorf("primary: check the cluster marker %s: %w", p.cfg.MarkerPath, err)
	}
	if !exists && len(p.records) > 0 {
		p.log.Warn().Int("stored_sequences", len(p.records)).Str("marker", p.cfg.MarkerPath).
			Msg("primary: cluster marker missing while the store holds sequences: ZooKeeper was wiped or replaced; restoring")
		p.wiped, p.relayout = true, true
	}
	if err := p.restore(ctx); err != nil {
		return err
	}
	held := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		held[r.Name] = r
	}
	if err := p.mirrorDeletions(ctx, held, p.broken); err != nil {
		p.log.Warn().Err(err).Msg("primary: could not compare the store's tombstones with ZooKeeper's deletion records; trying again at the next audit")
	}
	if !exists {
		if err := p.seq.Operator().Claim(ctx, p.cfg.MarkerPath, "marker_path"); err != nil {
			return fmt.Errorf("primary: create the cluster marker: %w", err)
		}
	}
	p.keepLayout(ctx)
	return nil
}

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
			p.view.Lock()
			if t := p.seqs[ev.Name]; t != nil {
				p.release(ev.Name, t)
			}
			delete(p.seqs, ev.Name)
			delete(p.storeErrs, ev.Name)
			delete(p.legacyMargins, ev.Name)
			p.namesStale = true
			p.view.Unlock()
			missing = true
		case watcher.Synced:
			missing = true
			p.count(func(s *Stats) { s.Syncs++ })
		}
	}
	p.view.Lock()
	p.compactRecords()
	p.view.Unlock()
	if everything {
		return p.sweep(ctx)
	}
	plans := p.plan(ctx, changed)
	if err := p.apply(ctx, plans); err != nil {
		return err
	}
	if missing {
		return errors.Join(p.land(), p.restore(ctx))
	}
	return nil
}

// plan decides what the named sequences need: one decision per sequence,
// from its latest state (a busy sequence has many events in a batch, and
// one plan each would run several operations on it at once). Routine
// raises are held back to share a later store write; anything else goes
// now, and takes the held-back raises with it.
func (p *Primary) plan(ctx context.Context, names []string) []plan {
	p.prepareBirths(ctx, names)
	var plans []plan
	for _, name := range names {
		t := p.seqs[name]
		if t == nil || p.inFlight(name) {
			continue
		}
		pl, ok := p.decide(name, t)
		switch {
		case ok && p.routine(pl, t):
			p.holdBack(name)
		case ok:
			delete(p.held, name) // no longer routine: it goes now
			plans = append(plans, pl)
		}
	}
	clear(p.births) // used: read again for the next decision
	// A store write is going out anyway, or the oldest routine raise
	// has waited long enough: the held-back raises go with it, when the
	// store's pace allows a write; until then everything waits.
	if due, _ := p.heldDue(); due || len(plans) > 0 {
		if !p.mayWrite() && !p.pressing(plans) {
			p.holdUrgent(plans)
			return nil
		}
		p.urgent = false
		plans = append(plans, p.releaseHeld()...)
	}
	return plans
}
