package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The lifecycle protocol (docs/design.md, "One lifecycle protocol"):
// every birth, death and re-stamp of a name reads ZooKeeper and then the
// store (Hold), decides, stores a ceiling first (Step.Before), makes one
// ZooKeeper transaction guarded by its reading (Commit), and only then
// tells the store of the birth or the death (Step.After). Lifecycle is the
// loop; the primary's births and an import's creates are its steps in bulk.

// Change is one lifecycle change of a name in ZooKeeper.
type Change struct {
	// State is what the name's znode is to hold: a birth (no znode held,
	// a registration or a legacy counter replaced) or a re-stamp. A
	// state with a marker other than the held one is stamped: its marker
	// is created, and every window and older marker deleted. Nil: the
	// name dies.
	State *state.State
	// Dead is, for a death, what the deletion record is to hold: every
	// incarnation of the name handed out no ID above it.
	Dead int64
	// Keep checks the held state's marker too, when it was held: the new
	// state keeps IDs of the held one (a widen, an advance of a trusted
	// state). A state whose marker is gone stays unusable with it until
	// the primary stamps it again.
	Keep bool
}

// None reports whether the change changes nothing in ZooKeeper.
func (ch Change) None() bool { return ch.State == nil && ch.Dead == 0 }

// changeOps returns the transaction of ch, guarded by h.
func (c *Client) changeOps(ctx context.Context, h Holding, ch Change) []zkclient.Op {
	p := c.Path(h.Name)
	var ops []zkclient.Op
	if _, held := slices.BinarySearch(h.Children, h.State.Marker); ch.Keep && held {
		ops = append(ops, zkclient.CheckOp(p+"/"+h.State.Marker, 0))
	}
	switch {
	case ch.State != nil && h.Exists:
		ops = append(ops, zkclient.SetOp(p, ch.State.Encode(), h.Version))
		if m := ch.State.Marker; m != "" && m != h.State.Marker {
			ops = append(ops, c.createOp(ctx, KindSequenceChild, p+"/"+m, nil, 0))
			for _, child := range h.Children {
				// Unconditional: whatever a window or an older marker
				// holds, it belongs to what the stamp replaces.
				ops = append(ops, zkclient.DeleteOp(p+"/"+child, zkclient.AnyVersion))
			}
		}
	case ch.State != nil:
		ops = append(ops, c.createOp(ctx, KindSequence, p, ch.State.Encode(), 0))
		if ch.State.Marker != "" {
			ops = append(ops, c.createOp(ctx, KindSequenceChild, p+"/"+ch.State.Marker, nil, 0))
		}
	case h.Exists:
		for _, child := range h.Children {
			ops = append(ops, zkclient.DeleteOp(p+"/"+child, zkclient.AnyVersion))
		}
		ops = append(ops, zkclient.DeleteOp(p, h.Version))
	default:
		// Absent, and still absent: created and deleted in one go.
		ops = append(ops, zkclient.CreateOp(p, nil, 0), zkclient.DeleteOp(p, 0))
	}
	switch {
	case ch.State == nil:
		ops = append(ops, c.deletionOps(ctx, h.Name, ch.Dead, h.Deletion)...)
	case h.guarded:
		ops = append(ops, c.guardOps(h.Name, h.Deletion)...)
	}
	if ch.State != nil && !h.Exists {
		// A create has no stat: the root's tells the epoch it landed in.
		ops = append(ops, zkclient.SetOp(c.opts.Root, nil, zkclient.AnyVersion))
	}
	return ops
}

// Commit makes change ch of the name h holds in one transaction guarded by
// h (see changeOps; the root's own znode must exist: EnsureMeta) and
// returns the stat of the name's znode after it (nil after a death). A
// guard that failed is ErrChangedMeanwhile, nothing written: read again.
// A connection error is returned as it is: the change may have landed.
func (k Keeper) Commit(ctx context.Context, h Holding, ch Change) (*zkclient.Stat, error) {
	c := k.c
	if ch.State != nil {
		if err := ch.State.Validate(); err != nil {
			return nil, err
		}
	}
	nd := c.node(c.Path(h.Name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	res, err := c.write(ctx, c.changeOps(ctx, h, ch)...)
	nd.valid, nd.deleted = false, nil // this client reads the name afresh
	switch {
	case err == nil:
		if ch.State == nil {
			return nil, nil
		}
		i := slices.IndexFunc(res, func(r zkclient.OpResult) bool { return r.Stat != nil })
		if i < 0 {
			return nil, nil
		}
		return res[i].Stat, nil
	case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode), errors.Is(err, zkclient.ErrNodeExists),
		errors.Is(err, zkclient.ErrNotEmpty):
		return nil, fmt.Errorf("sequence %q: %w", h.Name, ErrChangedMeanwhile)
	case zkclient.IsTransient(err):
		return nil, err
	}
	return nil, c.zkError(h.Name, err)
}

// preflight asks ZooKeeper, before the store is written for change ch of
// the name h holds, whether this client's identity may make it: the
// root's own znode ensured (as the commit would), then the commit's
// transaction with a check appended that cannot hold, so that ZooKeeper
// applies none of it and names the first operation it refuses. Only a
// refusal of the identity (ErrNoAuth) is an error; anything else is the
// commit's to meet.
func (l *change) preflight(ctx context.Context, h Holding, ch Change) error {
	if !l.meta {
		if err := l.c.Meta().EnsureMeta(ctx); err != nil {
			return err
		}
		l.meta = true
	}
	_, err := l.c.write(ctx, append(l.c.changeOps(ctx, h, ch), l.c.neverOp())...)
	switch {
	case err == nil:
		return fmt.Errorf("sequence %q: %w: the preflight's transaction landed (%s exists); its ceiling was not stored first, so the primary's audit must store it: delete that znode", h.Name, ErrChangedMeanwhile, l.c.neverPath())
	case errors.Is(err, zkclient.ErrNoAuth):
		return fmt.Errorf("sequence %q: %w; nothing was written", h.Name, err)
	}
	return nil
}

// neverPath is a znode that does not exist: a deletion record's name no
// sequence can have (names start with a letter or digit).
func (c *Client) neverPath() string { return c.metaPath() + "/.preflight" }

// neverOp is a check that fails for want of its znode (neverPath), not of
// a version that enough writes could reach: a transaction ending with it
// never lands.
func (c *Client) neverOp() zkclient.Op { return zkclient.CheckOp(c.neverPath(), zkclient.AnyVersion) }

// Store is the durable store as the lifecycle protocol writes it; a
// *persist.Store is one.
type Store interface {
	Get(ctx context.Context, name string) (persist.Record, error)
	Epoch(ctx context.Context) (int64, string, error)
	Put(ctx context.Context, epoch int64, recs ...persist.Record) error
}

// Step is what a lifecycle change decided from one reading.
type Step struct {
	Change
	// Before is what the store must hold before ZooKeeper changes: a
	// ceiling (with the configuration it is for), never a birth or a
	// death. Nil: nothing.
	Before *persist.Record
	// After is what the store learns once ZooKeeper holds the change: the
	// birth (Live) or the death (Dead). Nil: nothing.
	After *persist.Record
}

// Decide decides a lifecycle step from what ZooKeeper holds and the
// store's record (zero Name when it has none), as read (the store is read
// again when a reading may come from another history, see Lifecycle, and
// so may include this change's own Before writes). A step with no change and no After ends
// the change with nothing done; an error ends it too.
type Decide func(h Holding, rec persist.Record) (Step, error)

// Done is what a lifecycle change did.
type Done struct {
	// Replaced is what ZooKeeper held before the first transaction of the
	// change that landed, and Landed whether that transaction landed in
	// the epoch its state was stamped with.
	Replaced Holding
	Landed   bool
	// Step is the last step decided, and Committed whether its change
	// was made.
	Step      Step
	Committed bool
}

// lifecycleAttempts bounds the readings of a lifecycle change that others
// keep overtaking (takers, the primary, other operators).
const lifecycleAttempts = 1000

// ErrContended reports a lifecycle change that gave up because others kept
// changing the name under it: nothing of it reached ZooKeeper. (Its store
// writes are ceilings, which a primary would also write.)
var ErrContended = errors.New("the sequence keeps changing under the change")

// Lifecycle carries out one lifecycle change of name: read, decide, the
// store's Before, the guarded transaction, the store's After. A guard that
// fails, or a lost reply, starts it again from a fresh reading. The store
// is read again after a reading of ZooKeeper that may come from another
// history than the last (a rollback of ZooKeeper between two attempts
// leaves the same incarnation with an older state, which must move above
// what the store holds now, not above what it held at the first reading),
// and a Before already stored is not written again. store is nil for a
// change the store holds already (a repair from it).
func (k Keeper) Lifecycle(ctx context.Context, store Store, name string, decide Decide) (Done, error) {
	c := k.c
	l := &change{c: c, store: store, name: name}
	for attempt := 0; attempt < lifecycleAttempts; attempt++ {
		// A taker's write costs a step only its transaction: read again
		// at once, as takers do, and back off only once it keeps losing
		// (other operators), so that a change that cannot succeed never
		// spins hot.
		if attempt >= lifecycleAttempts/10 {
			if err := retryDelay.Wait(ctx, attempt-lifecycleAttempts/10); err != nil {
				return l.done, err
			}
		}
		h, err := c.hold(ctx, name, attempt > 0)
		if errors.Is(err, ErrChangedMeanwhile) || zkclient.IsTransient(err) {
			continue
		}
		if err != nil {
			return l.done, err
		}
		if l.pending != nil && landed(l.from, h, l.pending.Change) {
			switch good, known := l.judge(ctx, &h); {
			case !known:
				continue // ask again
			case good:
				return l.finish(ctx, *l.pending, h)
			}
		}
		l.pending = nil
		if err := l.read(ctx, h); err != nil {
			return l.done, err
		}
		step, err := decide(h, l.rec)
		if err != nil || step.None() && step.After == nil {
			if !l.done.Committed {
				l.done.Replaced, l.done.Step = h, step
			}
			return l.done, err
		}
		if b := step.Before; b != nil && !covers(l.held, *b) {
			if err := l.preflight(ctx, h, step.Change); err != nil {
				return l.done, err
			}
			if err := PutAtCurrentEpoch(ctx, store, *b); err != nil {
				return l.done, fmt.Errorf("sequence %q: write ceiling %d to the store: %w; nothing was changed in ZooKeeper", name, b.Ceiling, err)
			}
			l.held = persist.Merge(l.held, *b)
			l.held.Name = name
			// Read again before the transaction: writes that landed
			// while the store was written would fail it anyway.
			continue
		}
		if step.None() {
			return l.finish(ctx, step, h)
		}
		if again, err := l.commit(ctx, h, step); err != nil || !again {
			return l.done, err
		}
	}
	return l.done, fmt.Errorf("sequence %q: %w (%d attempts); stop its clients and try again", name, ErrContended, lifecycleAttempts)
}

// change is one Lifecycle call's memory between its attempts.
type change struct {
	c        *Client
	store    Store
	name     string
	done     Done
	rec      persist.Record // the store's record, as last read
	held     persist.Record // what this change's Before writes hold
	pending  *Step          // committed, its reply lost: did it land?
	from     Holding        // what pending was decided from
	own      *Step          // landed in another epoch than it was stamped for
	readOnce bool           // rec was read
	lastH    Holding        // the previous reading: another compares with it
	meta     bool           // the root's own znode is known to exist
}

// judge settles pending, which h shows landed: it replaced what it was
// decided from. With its reply went the epoch it landed in: a stamp is
// good only if the epoch of now (a write tells it, known reports whether
// it could) still trusts it. One that a leader election ended, before or
// after it landed, is decided again (from h, now of that epoch) from the
// store read afresh: takers may have used it before a rollback.
func (l *change) judge(ctx context.Context, h *Holding) (good, known bool) {
	good = true
	if stamped(l.from, l.pending.Change) {
		if h.Epoch = l.c.probeEpoch(ctx); h.Epoch == 0 {
			return false, false
		}
		good = h.Trusted()
	}
	if !l.done.Committed {
		l.done.Replaced, l.done.Committed, l.done.Landed = l.from, true, good
	}
	return good, true
}

// read reads the store's record after ZooKeeper's reading h: again
// whenever h may come from another history than the last reading
// (another), so that a state rolled back meanwhile moves above what the
// store holds now. Not for every lost transaction: a store read per
// attempt widens the window in which busy takers overtake the change,
// which then never lands. And not when ZooKeeper still holds this change's
// own stamp, which landed in another epoch: the record read for it still
// bounds every ID handed out (ZooKeeper held nothing else since), and a
// fresh one would hold the change's own Before as if another incarnation
// had used it.
func (l *change) read(ctx context.Context, h Holding) error {
	mine := l.own != nil && h.Exists && h.State.Marker == l.own.State.Marker
	l.own = nil
	defer func() { l.lastH = h }()
	if l.store == nil || mine || l.readOnce && !another(l.lastH, h) {
		return nil
	}
	rec, err := l.store.Get(ctx, l.name)
	if errors.Is(err, persist.ErrNotFound) {
		rec, err = persist.Record{}, nil
	}
	if err != nil {
		return fmt.Errorf("sequence %q: read its record in the store: %w; nothing was changed", l.name, err)
	}
	l.rec, l.readOnce = rec, true
	return nil
}

// commit makes step's transaction, decided from h, and writes its After
// once it holds. again reports a change to decide afresh: a guard that
// failed, a reply lost (pending), or a stamp that landed in another epoch
// than it was made for (own).
func (l *change) commit(ctx context.Context, h Holding, step Step) (again bool, err error) {
	if !l.meta {
		if err := l.c.Meta().EnsureMeta(ctx); err != nil {
			return false, err
		}
		l.meta = true
	}
	stat, err := l.c.Keeper().Commit(ctx, h, step.Change)
	switch {
	case errors.Is(err, ErrChangedMeanwhile):
		return true, nil
	case zkclient.IsTransient(err):
		l.pending, l.from = &step, h
		return true, nil
	case err != nil:
		return false, err
	}
	// A stamp is good only in the epoch it landed in.
	stale := stamped(h, step.Change) && stat != nil && epochOf(stat.Mzxid) != step.State.ZKEpoch
	if !l.done.Committed {
		l.done.Replaced, l.done.Committed, l.done.Landed = h, true, !stale
	}
	l.done.Step = step
	if stale {
		l.own = &step
		return true, nil // decide again in the epoch now known
	}
	_, err = l.finish(ctx, step, h)
	return false, err
}

// finish writes step's After, once ZooKeeper holds its change, and
// returns what the change did.
func (l *change) finish(ctx context.Context, step Step, h Holding) (Done, error) {
	if !l.done.Committed { // nothing to commit
		l.done.Replaced, l.done.Landed = h, true
	}
	l.done.Step = step
	if a := step.After; a != nil && l.store != nil {
		if err := PutAtCurrentEpoch(ctx, l.store, *a); err != nil {
			return l.done, fmt.Errorf("sequence %q: ZooKeeper holds the change, the store does not know it yet (the primary's audit copies it): %w", a.Name, err)
		}
	}
	return l.done, nil
}

// stamped reports whether ch stamps a state anew (a new marker).
func stamped(h Holding, ch Change) bool {
	return ch.State != nil && ch.State.Marker != "" && ch.State.Marker != h.State.Marker
}

// another reports whether the reading h may come from another history of
// the name than last: another incarnation or deletion record, another
// epoch, marker, stamp or trust, or a version that went back (a rollback).
func another(last, h Holding) bool {
	return h.Czxid != last.Czxid || h.Deletion != last.Deletion || h.Epoch != last.Epoch ||
		h.State.Marker != last.State.Marker || h.State.ZKEpoch != last.State.ZKEpoch ||
		h.Trusted() != last.Trusted() || h.Version < last.Version
}

// landed reports whether h shows change ch, decided from the holding
// from, made: its new marker, its state, or the death it recorded (a
// deletion record written since from, at ch's ceiling or above, and no
// znode of the name but one born after it: a registration that came after
// the death is not to die again).
func landed(from, h Holding, ch Change) bool {
	switch {
	case ch.State == nil:
		d := h.Deletion
		written := d.Exists && (!from.Deletion.Exists || d.Mzxid != from.Deletion.Mzxid)
		return written && d.Ceiling >= ch.Dead && (!h.Exists || d.BornAfter(h.Czxid))
	case stamped(from, ch):
		// The new marker is this change's own.
		return h.Exists && h.State.Marker == ch.State.Marker
	}
	// Kept (a widen, an advance of a trusted state) or unstamped: the
	// marker was there before, so only the state itself tells. A take
	// since makes it read as not landed, and the change is decided again
	// from what ZooKeeper holds, which then needs nothing or less.
	return h.Exists && h.State.Equal(*ch.State)
}

// covers reports whether a store record already holds everything of b.
func covers(a, b persist.Record) bool {
	m := persist.Merge(a, b)
	m.Updated, m.Epoch = a.Updated, a.Epoch
	return a.Name != "" && persist.Equal(m, a)
}

// putAttempts bounds how often an operator's store write is repeated when
// a primary taking over fences it (each time at the new leader epoch).
const putAttempts = 5

// PutAtCurrentEpoch writes recs to the store at its current leader epoch,
// as an operator's command does beside a running primary: the merge by
// maximum keeps whatever the primary writes, and a primary that takes over
// meanwhile fences the write, which is then made again at its epoch.
func PutAtCurrentEpoch(ctx context.Context, store Store, recs ...persist.Record) error {
	var err error
	for range putAttempts {
		var epoch int64
		if epoch, _, err = store.Epoch(ctx); err != nil {
			return err
		}
		if err = store.Put(ctx, epoch, recs...); !errors.Is(err, persist.ErrFenced) {
			return err
		}
	}
	return err
}
