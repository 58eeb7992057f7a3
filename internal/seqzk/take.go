package seqzk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Take hands out up to n IDs of sequence name, as ascending inclusive
// ranges: recycled IDs first (oldest holes first), then fresh ones below the
// reserved ceiling. It returns fewer than n when fewer remain below the
// ceiling, and an error wrapping ErrExhausted once the ID space is used up.
//
// Take blocks while it retries compare-and-set conflicts and connection
// errors (with jittered backoff), and while the sequence is at its ceiling
// it waits for the primary to raise it, up to Options.CeilingWait; then it
// fails with ErrCeilingReached. Cancelling ctx makes it return ctx's error at
// once. An error means no IDs were handed out; IDs of a write whose reply was
// lost are never reused (they are lost, not duplicated).
func (c *Client) Take(ctx context.Context, name string, n int64) (state.Ranges, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("sequence %q: take %d: the count must be at least 1", name, n)
	}
	var waitSince time.Time
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		got, err := c.takeOnce(ctx, name, n)
		var unvalidated *unvalidatedError
		switch {
		case err == nil:
			return got, nil
		case errors.Is(err, errAtCeiling), errors.As(err, &unvalidated):
			if waitSince.IsZero() {
				waitSince = time.Now()
			}
			c.stats.waits.Add(1)
			if err := c.waitRaise(ctx, name, waitSince, unvalidated); err != nil {
				return nil, err
			}
		case errors.Is(err, ErrUnknownSequence) && c.wasSeen(name):
			// It existed: it was deleted, or ZooKeeper lost it and the
			// primary restores it.
			if c.deletedSinceSeen(ctx, name) {
				return nil, &UnknownSequenceError{Name: name, Root: c.opts.Root, Deleted: true}
			}
			if waitSince.IsZero() {
				waitSince = time.Now()
			}
			c.stats.waits.Add(1)
			if err := c.waitRestore(ctx, name, waitSince); err != nil {
				return nil, err
			}
		case zkclient.IsTransient(err):
			c.stats.retries.Add(1)
			if berr := retryDelay.Wait(ctx, attempt); berr != nil {
				return nil, fmt.Errorf("sequence %q: take %d: %w (while retrying: %v)", name, n, berr, err)
			}
		default:
			return nil, err
		}
	}
}

// Next hands out a single ID of sequence name. It is Take(ctx, name, 1); a
// program that needs many IDs should use an Allocator.
func (c *Client) Next(ctx context.Context, name string) (int64, error) {
	got, err := c.Take(ctx, name, 1)
	if err != nil {
		return 0, err
	}
	return got[0].Start, nil
}

// takeOnce makes one pass: from a window when the sequence has windows (or
// is configured for them) and nothing recycled, else from the sequence
// znode itself.
func (c *Client) takeOnce(ctx context.Context, name string, n int64) (state.Ranges, error) {
	seq := c.node(c.Path(name))
	for pass := 0; ; pass++ {
		seq.mu.Lock()
		// Performance: a client with a slot of its own first tries it
		// with the list of windows it has, even when another client's
		// refill has changed the list since. The list only guides which
		// window to try (every write is checked by ZooKeeper), and the
		// slot's own refill reads it again; re-reading it at every change
		// would cost every client two round trips per refill of any slot.
		stale := !seq.usable(c.zk.Connection())
		if stale && (pass > 0 || seq.preferred.Load() == 0 || len(seq.windows) == 0) {
			if _, err := c.load(ctx, name, seq, false); err != nil {
				seq.mu.Unlock()
				return nil, err
			}
			stale = false
		}
		windows, slots := seq.windows, seq.state.Windows
		useWindows := (len(windows) > 0 || slots > 0) && len(seq.state.Recycled) == 0 && !seq.state.Legacy
		seq.mu.Unlock()

		if useWindows {
			got, out, err := c.takeWindow(ctx, name, seq, slots, windows, n)
			switch {
			case err != nil || out == windowTaken:
				return got, err
			case stale, (out == windowRefilled || out == windowStale) && pass < 8:
				continue // read the list again; take from the slot's new window
			}
		}
		got, _, err := c.takeNode(ctx, name, seq, n, 0)
		return got, err
	}
}

// took is what a take from one znode saw besides the IDs.
type took struct {
	// conflicts is how many compare-and-sets lost to another writer.
	conflicts int
	// after is the znode's state after the take, and stat its stat.
	after state.State
	stat  *zkclient.Stat
}

// takeNode takes up to n IDs from one znode (a sequence or a window) by
// compare-and-set, re-reading only after a conflict. With maxConflicts > 0
// it gives up with errContended once that many compare-and-sets lost.
func (c *Client) takeNode(ctx context.Context, name string, nd *node, n int64, maxConflicts int) (_ state.Ranges, t took, _ error) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	synced := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, t, err
		}
		if !nd.usable(c.zk.Connection()) {
			if _, err := c.load(ctx, name, nd, false); err != nil {
				return nil, t, err
			}
		}
		st := nd.state
		if err := unvalidatedOf(st); err != nil {
			c.stats.unvalidated.Add(1)
			return nil, t, err
		}
		got, err := st.Take(n)
		if errors.Is(err, state.ErrExhausted) && !synced && nd.path == nd.seq && time.Since(nd.confirmed) > exhaustedRecheck {
			if err := c.confirmExhausted(ctx, nd); err != nil {
				return nil, t, err
			}
			synced = true
			continue
		}
		if err != nil {
			return nil, t, err
		}
		if len(got) == 0 {
			return nil, t, errAtCeiling
		}
		stat, err := c.cas(ctx, nd, st)
		switch {
		case err == nil:
			epoch := epochOf(stat.Mzxid) // write observed it
			if stat.Czxid != nd.czxid {
				return nil, t, c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			if !st.Legacy && st.ZKEpoch != epoch {
				// ZooKeeper elected a leader since the primary validated
				// this state and may have lost writes: these IDs may have
				// been issued. The write landed, so they are lost.
				c.stats.unvalidated.Add(1)
				return nil, t, &unvalidatedError{marker: st.Marker,
					reason: fmt.Sprintf("state validated in zookeeper epoch %d, written in epoch %d", st.ZKEpoch, epoch)}
			}
			t.after, t.stat = st, stat
			return got, t, nil
		case errors.Is(err, errMarkerGone):
			// Prepared from a state of another history or incarnation:
			// nothing was written. Read again; if ZooKeeper still shows
			// that marker, wait for the primary.
			nd.valid, nd.deleted = false, nil
			c.stats.unvalidated.Add(1)
			return nil, t, &unvalidatedError{marker: st.Marker,
				reason: "the state's marker znode is gone: it belongs to another ZooKeeper history or an earlier incarnation of the znode"}
		case errors.As(err, new(*unvalidatedError)):
			return nil, t, err
		case errors.Is(err, zkclient.ErrBadVersion):
			t.conflicts++
			nd.valid = false
			if t.conflicts == maxConflicts {
				return nil, t, errContended
			}
		case errors.Is(err, zkclient.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		default:
			// The write may have been applied: its IDs are lost, never
			// reused, because the retry starts from a fresh read.
			nd.valid = false
			return nil, t, c.zkError(name, err)
		}
	}
}

// confirmExhausted makes the next read of sequence node nd come after a
// sync with the leader: a sequence's exhausted is an answer for good, to
// be said from such a read, not from a cached state that a widen (through
// any session) may have overtaken. Takes do it at most once per
// exhaustedRecheck per sequence, so that takes of a sequence that stays
// exhausted cost no round trip; a window's end is no answer (the take
// moves to the next window) and needs none.
func (c *Client) confirmExhausted(ctx context.Context, nd *node) error {
	if err := c.sync(ctx, c.zk.Session(), nd.path); err != nil {
		return err
	}
	nd.valid, nd.confirmed = false, time.Now()
	return nil
}

// exhaustedRecheck is how long a sequence's exhausted state, confirmed by
// a read after a sync, is answered from the cache: a widen is seen that
// much later at most.
const exhaustedRecheck = time.Second

// errContended is returned by takeNode when it gave up on a znode that
// other writers keep changing; nothing was handed out.
var errContended = errors.New("contended")

// recreated handles a write that landed on a znode created after the one
// that was read. A validated state cannot get here (its write checks a
// marker that dies with the old incarnation), so this is a legacy counter
// or an unvalidated state: nothing is handed out, and for a full state the
// primary, seeing a creation zxid it did not record, fast-forwards the
// sequence past everything the store covers. A legacy counter has no such
// protection (docs/guarantees.md).
func (c *Client) recreated(name string, nd *node, stat *zkclient.Stat) error {
	nd.valid, nd.deleted = false, nil
	return fmt.Errorf("sequence %q: %w (creation zxid %#x, read %#x); no IDs were handed out",
		name, ErrRecreated, stat.Czxid, nd.czxid)
}

// waitRaise waits for the sequence's data to change (the primary raising the
// ceiling, initialising the sequence, or validating it in a new ZooKeeper
// epoch), up to CeilingWait since the wait began. unvalidated is set when the
// take failed validation rather than at the ceiling.
func (c *Client) waitRaise(ctx context.Context, name string, since time.Time, unvalidated *unvalidatedError) error {
	seq := c.node(c.Path(name))
	// Performance: read first without a watch. Most often the primary has
	// raised the ceiling already (only this client's copy was empty), and
	// a watch would cost the server its registration and a notification
	// when this client's own take fires it; the watch is set only if the
	// take must really wait.
	var watch <-chan zkclient.Event
	var st state.State
	for _, watching := range []bool{false, true} {
		seq.mu.Lock()
		w, err := c.load(ctx, name, seq, watching)
		st = seq.state
		seq.mu.Unlock()
		if err != nil {
			if zkclient.IsTransient(err) {
				return retryDelay.Wait(ctx, 3)
			}
			return err
		}
		switch {
		case unvalidated != nil && st.Marker != unvalidated.marker:
			// Validated again or rotated while we were not looking, or
			// only our cache was stale.
			return nil
		case unvalidated != nil && unvalidated.birth && !Unconfirmed(st):
			return nil // the birth stamped (Confirm keeps its marker)
		case unvalidated == nil && st.Available() > 0:
			return nil // raised while we were not looking
		}
		watch = w
	}
	left := c.opts.CeilingWait - time.Since(since)
	if left <= 0 {
		return c.waitError(name, st, unvalidated)
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-watch:
		return nil
	case <-seq.deletedSignal():
		return nil
	case <-t.C:
		return c.waitError(name, st, unvalidated)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) wasSeen(name string) bool {
	n := c.node(c.Path(name))
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen
}

// deletedSinceSeen reports whether the incarnation of sequence name this
// client read was deleted: ZooKeeper's copy of a tombstone for the name was
// written after that incarnation was created (a delete writes it in the
// transaction that removes the znode). Anything else, a read that fails
// included, may be a loss the primary repairs, and Take waits for that.
func (c *Client) deletedSinceSeen(ctx context.Context, name string) bool {
	n := c.node(c.Path(name))
	n.mu.Lock()
	czxid := n.czxid
	n.mu.Unlock()
	ok, stat, err := c.zk.Session().Exists(ctx, c.deletionPath(name))
	c.stats.requests.Add(1)
	return err == nil && ok && czxid != 0 && stat.Mzxid > czxid
}

// waitRestore waits for a sequence znode that disappeared to come back,
// up to CeilingWait since the wait began.
func (c *Client) waitRestore(ctx context.Context, name string, since time.Time) error {
	exists, _, watch, err := c.zk.Session().ExistsW(ctx, c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		if zkclient.IsTransient(err) {
			return retryDelay.Wait(ctx, 3)
		}
		return c.zkError(name, err)
	}
	if exists {
		return nil
	}
	left := c.opts.CeilingWait - time.Since(since)
	if left <= 0 {
		return fmt.Errorf("sequence %q: %w: %s disappeared and was not restored within %s; is 'seqkeeper serve' running and can it reach its store?",
			name, ErrUnknownSequence, c.Path(name), c.opts.CeilingWait)
	}
	t := time.NewTimer(min(left, time.Second)) // ExistsW watches die with a replaced session
	defer t.Stop()
	select {
	case <-watch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (n *node) deletedSignal() <-chan zkclient.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.deleted
}

func (c *Client) waitError(name string, st state.State, unvalidated *unvalidatedError) error {
	if unvalidated != nil && unvalidated.birth {
		return fmt.Errorf("sequence %q: %w within %s: %v; is 'seqkeeper serve' running and can it reach its store?",
			name, ErrUnvalidated, c.opts.CeilingWait, unvalidated)
	}
	if unvalidated != nil {
		return fmt.Errorf("sequence %q: %w within %s: %v; ZooKeeper elected a new leader or was restored, and no primary has fast-forwarded the sequence since: is 'seqkeeper serve' running and can it reach its store?",
			name, ErrUnvalidated, c.opts.CeilingWait, unvalidated)
	}
	if st.Registered {
		return fmt.Errorf("sequence %q: %w: not initialised after %s: no primary has picked it up; is 'seqkeeper serve' running against the same ZooKeeper and root %s?",
			name, ErrCeilingReached, c.opts.CeilingWait, c.opts.Root)
	}
	return fmt.Errorf("sequence %q: %w: every ID up to the ceiling %d is taken and no primary raised it within %s; is 'seqkeeper serve' running, and can it reach its store?",
		name, ErrCeilingReached, st.Ceiling, c.opts.CeilingWait)
}
