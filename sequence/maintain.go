package sequence

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"
)

// WindowPrefix starts the name of every window znode under a sequence
// znode; ZooKeeper appends a 10-digit sequence number.
const WindowPrefix = "w-"

// Registration is what an operator asks for when creating a sequence. The
// zero value asks for the defaults.
type Registration struct {
	Start   int64 // first ID; 0 means DefaultStart
	End     int64 // last ID; 0 means MaxID
	Windows int   // open windows the primary keeps; 0 for none
}

// Register creates the znode of sequence name holding a registration; the
// primary initialises it. The root must exist. It fails if the sequence
// exists.
func (c *Client) Register(ctx context.Context, name string, r Registration) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st := State{Name: name, Registered: true, Start: r.Start, End: r.End, Windows: r.Windows}
	if st.Start == 0 {
		st.Start = DefaultStart
	}
	if st.End == 0 {
		st.End = MaxID
	}
	if err := st.Validate(); err != nil {
		return err
	}
	_, err := c.zk.Conn().Create(c.Path(name), st.Encode(), 0, c.opts.ACL)
	c.stats.requests.Add(1)
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("sequence %q already exists", name)
	}
	if err != nil {
		return c.zkError(name, err)
	}
	return nil
}

// Raise moves the reserved ceiling of sequence name up to ceiling (capped at
// the end of the space; it never lowers it) and returns the new state. It
// keeps the state's ZooKeeper epoch stamp; a registration must first be
// initialised with Revalidate. Legacy counters have no ceiling and are
// refused.
//
// Raise is the primary's operation: it must be called only after the
// durable store has accepted ceiling, or invariant 2 (durable before usable)
// breaks. Tests use it to stand in for the primary. It retries conflicts
// with clients until ctx is done.
func (c *Client) Raise(ctx context.Context, name string, ceiling int64) (State, error) {
	return c.update(ctx, name, func(st *State) (bool, error) {
		if st.Legacy {
			return false, fmt.Errorf("sequence %q is a legacy 8-byte counter: it has no ceiling to raise", name)
		}
		if st.Registered {
			return false, fmt.Errorf("sequence %q is not initialised yet: the primary initialises it with Revalidate", name)
		}
		ceiling = min(ceiling, st.End)
		if ceiling <= st.Ceiling {
			return false, nil
		}
		st.Ceiling = ceiling
		return true, nil
	})
}

// ForwardLegacy moves the legacy 8-byte counter of sequence name up to at
// least to (it never lowers it) and returns the new state. The primary
// calls it after a ZooKeeper leader election, with the mark the store
// holds, in case the election followed a restore from an older copy. It
// retries conflicts with workers until ctx is done.
func (c *Client) ForwardLegacy(ctx context.Context, name string, to int64) (State, error) {
	return c.update(ctx, name, func(st *State) (bool, error) {
		if !st.Legacy {
			return false, fmt.Errorf("sequence %q is not a legacy 8-byte counter", name)
		}
		if to <= st.Next {
			return false, nil
		}
		st.Next = min(to, MaxLegacyCounter)
		return true, nil
	})
}

// reload reads nd afresh for the primary's read-modify-write loops. It
// reports retry after a connection error (having backed off), and an error
// when the loop must stop (ctx done, the znode missing or corrupt).
func (c *Client) reload(ctx context.Context, name string, nd *node, attempt int) (retry bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if _, err := c.load(name, nd, false); err != nil {
		if !retryable(err) {
			return false, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// Revalidate makes sequence name usable in the current ZooKeeper epoch and
// raises its ceiling; it is how the primary initialises, fast-forwards and
// restores sequences. See State.ZKEpoch for why.
//
// If the state is a registration, or is stamped with another epoch than the
// current one, ZooKeeper may have lost writes since it was validated, so:
// next moves up to at least floor (the primary passes the stored ceiling +
// 1, above every ID ever issued); the recycled list and every window are
// dropped, since their IDs may have been issued again since; and the
// current epoch is stamped. The IDs skipped are the price of the rule: at
// most one reserve per sequence per ZooKeeper leader election. A state
// already stamped with the current epoch keeps its next and recycled IDs.
// In both cases the ceiling then rises to ceiling (capped at the end of the
// space).
//
// Like Raise, it must be called only after the durable store holds
// ceiling. It retries until the stamp matches the epoch its write landed
// in, or ctx is done.
func (c *Client) Revalidate(ctx context.Context, name string, floor, ceiling int64) (State, error) {
	return c.revalidate(ctx, name, floor, ceiling, false)
}

// FastForward is Revalidate that always moves next up to floor and drops
// recycled IDs and windows, even when the state carries the current epoch.
// The primary uses it for a znode whose creation zxid differs from the one
// the store recorded: deleted and re-created, possibly with old data.
func (c *Client) FastForward(ctx context.Context, name string, floor, ceiling int64) (State, error) {
	return c.revalidate(ctx, name, floor, ceiling, true)
}

func (c *Client) revalidate(ctx context.Context, name string, floor, ceiling int64, force bool) (State, error) {
	if err := ValidateName(name); err != nil {
		return State{}, err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if retry, err := c.reload(ctx, name, nd, attempt); retry {
			continue
		} else if err != nil {
			return State{}, err
		}
		st := nd.state
		if st.Legacy {
			return State{}, fmt.Errorf("sequence %q is a legacy 8-byte counter: it has no state to validate", name)
		}
		epoch := c.Epoch()
		if epoch == 0 {
			epoch = c.probeEpoch()
		}
		stamp := force || st.Registered || !st.Validated() || st.ZKEpoch != epoch
		if stamp {
			next := st.Next
			if st.Registered {
				next = st.Start
				st = State{Name: st.Name, Start: st.Start, End: st.End, Windows: st.Windows}
			}
			st.Next = clampNext(max(next, floor), st.End)
			st.Ceiling = max(st.Ceiling, st.Next-1)
			st.Recycled = nil
			st.ZKEpoch = epoch
			st.Marker = newMarker()
			st.PushFloor = st.Next
		}
		st.Ceiling = max(st.Ceiling, min(ceiling, st.End))
		if st.Equal(nd.state) {
			return st, nil // already valid in this epoch and high enough
		}
		if err := st.Validate(); err != nil {
			return State{}, err
		}
		var err error
		var stat *zk.Stat
		if stamp {
			// One transaction: the new state, its new marker, and the
			// removal of every window and older marker (their IDs and
			// writes may belong to a lost history). The children come
			// from the load just made, which lists them afresh after any
			// reconnect or child event. No marker check: next moves to at
			// least floor, above everything the store covers, whatever
			// history this lands in.
			ops := []any{
				&zk.SetDataRequest{Path: nd.path, Data: st.Encode(), Version: nd.version},
				&zk.CreateRequest{Path: nd.path + "/" + st.Marker, Acl: c.opts.ACL},
			}
			for _, ch := range slices.Concat(nd.windows, nd.markers) {
				ops = append(ops, &zk.DeleteRequest{Path: nd.path + "/" + ch, Version: -1})
			}
			var res []zk.MultiResponse
			res, _, err = multiAt(c.zk.Conn(), ops...)
			c.stats.requests.Add(1)
			if err == nil {
				stat = res[0].Stat
			}
		} else {
			stat, err = c.cas(nd, st)
		}
		switch {
		case err == nil:
			landed := c.observe(stat)
			nd.state, nd.version = st, stat.Version
			if stamp {
				nd.valid = false // the child watch fired
			}
			if landed == st.ZKEpoch {
				return st, nil
			}
			force = false // next is already past floor
			// ZooKeeper changed epochs under us (or our guess was from
			// before a restore): validate again in the epoch we now know.
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists),
			errors.Is(err, zk.ErrNotEmpty), errors.Is(err, errMarkerGone):
			// Lost to a client's take, or the children changed meanwhile:
			// read again, listing the children afresh. Back off once it
			// keeps happening, so that a transaction that cannot succeed
			// never spins hot.
			c.stats.conflicts.Add(1)
			nd.valid, nd.deleted = false, nil
			if errors.Is(err, errMarkerGone) {
				force = true // the state is not of this history: stamp it
			}
			if attempt >= 3 {
				if err := backoff(ctx, attempt-3); err != nil {
					return State{}, err
				}
			}
		case errors.As(err, new(*unvalidatedError)):
			return State{}, fmt.Errorf("sequence %q: %w", name, err)
		case retryable(err):
			nd.valid = false
			if err := backoff(ctx, attempt); err != nil {
				return State{}, err
			}
		default:
			return State{}, c.zkError(name, err)
		}
	}
}

// newMarker returns a fresh marker name (see State.Marker).
func newMarker() string {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic("sequence: crypto/rand failed: " + err.Error())
	}
	return MarkerPrefix + hex.EncodeToString(b[:])
}

// multi runs a transaction and reports the first failed operation's error
// even when the transaction's own error is nil.
func multi(conn *zk.Conn, ops ...any) ([]zk.MultiResponse, error) {
	res, _, err := multiAt(conn, ops...)
	return res, err
}

// multiAt is multi that also returns the index of the operation that failed
// the transaction (-1 when the failure is not an operation's).
func multiAt(conn *zk.Conn, ops ...any) ([]zk.MultiResponse, int, error) {
	res, err := conn.Multi(ops...)
	// ZooKeeper answers a failed transaction with a result per operation:
	// none for those before the failed one, the failed one's error, then
	// "runtime inconsistency" for the rest.
	for i, r := range res {
		if r.Error != nil {
			return nil, i, r.Error
		}
	}
	if err != nil {
		return nil, -1, err
	}
	if len(res) != len(ops) {
		return nil, -1, fmt.Errorf("zookeeper multi: %d results for %d operations", len(res), len(ops))
	}
	return res, -1, nil
}

// clampNext keeps next within the space: at most end+1, or MaxID when end
// is MaxID (the space is then used up).
func clampNext(next, end int64) int64 {
	if end == MaxID {
		return min(next, MaxID)
	}
	return min(next, end+1)
}

// probeEpoch learns the current ZooKeeper epoch with a write (the empty data
// of the root znode, which nothing else uses), or returns 0.
func (c *Client) probeEpoch() int64 {
	stat, err := c.zk.Conn().Set(c.opts.Root, nil, -1)
	c.stats.requests.Add(1)
	if err != nil {
		return 0
	}
	return c.observe(stat)
}

// CurrentEpoch returns the current ZooKeeper epoch, learned by writing the
// (unused, empty) data of the root znode: only a write reveals the zxid of
// now. The primary calls it periodically to notice leader elections.
func (c *Client) CurrentEpoch(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	stat, err := c.zk.Conn().Set(c.opts.Root, nil, -1)
	c.stats.requests.Add(1)
	if err != nil {
		return 0, fmt.Errorf("probe zookeeper epoch at %s: %w", c.opts.Root, err)
	}
	return c.observe(stat), nil
}

// update applies change to a freshly read state of sequence name and writes
// it back by compare-and-set, retrying conflicts. change reports whether it
// changed anything.
func (c *Client) update(ctx context.Context, name string, change func(*State) (bool, error)) (State, error) {
	if err := ValidateName(name); err != nil {
		return State{}, err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if retry, err := c.reload(ctx, name, nd, attempt); retry {
			continue
		} else if err != nil {
			return State{}, err
		}
		st := nd.state
		changed, err := change(&st)
		if err != nil || !changed {
			return nd.state, err
		}
		if err := st.Validate(); err != nil {
			return State{}, err
		}
		stat, err := c.cas(nd, st)
		switch {
		case err == nil:
			nd.state, nd.version = st, stat.Version
			return st, nil
		case errors.Is(err, errMarkerGone):
			return State{}, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		case errors.As(err, new(*unvalidatedError)):
			return State{}, fmt.Errorf("sequence %q: %w", name, err)
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
		case retryable(err):
			// A raise is idempotent: re-reading shows whether it landed.
			if err := backoff(ctx, attempt); err != nil {
				return State{}, err
			}
		default:
			return State{}, c.zkError(name, err)
		}
	}
}

// Rotate moves sequence name onto a fresh znode, so that its data version
// restarts at 0, far from the int32 wrap (see VersionLimit). In one
// transaction it deletes the znode at the version read (with its windows
// and marker) and creates it again with the same state under a new marker.
// Recycled IDs are kept; the IDs that open windows had not handed out are
// lost (at most one window's worth each), since window names restart with
// the new znode. Writes prepared against the old znode fail on its marker.
// It returns the new state and the new znode's creation zxid.
//
// Rotate is the primary's operation; the state must be validated.
func (c *Client) Rotate(ctx context.Context, name string) (State, int64, error) {
	if err := ValidateName(name); err != nil {
		return State{}, 0, err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if retry, err := c.reload(ctx, name, nd, attempt); retry {
			continue
		} else if err != nil {
			return State{}, 0, err
		}
		st := nd.state
		if st.Legacy || !st.Validated() {
			return State{}, 0, fmt.Errorf("sequence %q: only a validated sequence can be rotated", name)
		}
		old := st.Marker
		st.Marker = newMarker()
		var ops []any
		for _, w := range nd.windows {
			// Unconditional on purpose: whatever a window holds goes.
			ops = append(ops, &zk.DeleteRequest{Path: nd.path + "/" + w, Version: -1})
		}
		for _, m := range nd.markers {
			ops = append(ops, &zk.DeleteRequest{Path: nd.path + "/" + m, Version: 0})
		}
		if !slices.Contains(nd.markers, old) {
			return State{}, 0, fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		}
		ops = append(ops, &zk.DeleteRequest{Path: nd.path, Version: nd.version})
		ops = append(ops, c.createOps(st)...)
		_, err := multi(c.zk.Conn(), ops...)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			nd.valid, nd.deleted = false, nil
			ok, stat, err := c.zk.Conn().Exists(nd.path)
			c.stats.requests.Add(1)
			if err != nil || !ok {
				return st, 0, nil // the caller learns the czxid from its next read
			}
			c.observe(stat)
			return st, stat.Czxid, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNotEmpty):
			c.stats.conflicts.Add(1)
			nd.valid, nd.deleted = false, nil
			if err := backoff(ctx, attempt); err != nil {
				return State{}, 0, err
			}
		case retryable(err):
			nd.valid = false
			if err := backoff(ctx, attempt); err != nil {
				return State{}, 0, err
			}
		default:
			return State{}, 0, c.zkError(name, err)
		}
	}
}

// OpenWindow carves the next size fresh IDs of sequence name (fewer if the
// ceiling is nearer) into a new window znode, atomically with advancing the
// sequence's next, and returns the window's name. Windows only ever hold IDs
// below the durable ceiling, so a window's own ceiling is its end. It
// returns errAtCeiling wrapped with the name when nothing is left to carve.
func (c *Client) OpenWindow(ctx context.Context, name string, size int64) (string, error) {
	if size < 1 {
		return "", fmt.Errorf("sequence %q: window size %d must be at least 1", name, size)
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if _, err := c.load(name, nd, false); err != nil {
			return "", err
		}
		st := nd.state
		if st.Legacy || !st.Validated() {
			return "", fmt.Errorf("sequence %q: windows need an initialised, validated, non-legacy sequence", name)
		}
		if nd.version < 0 || nd.version >= VersionLimit {
			return "", fmt.Errorf("sequence %q: znode version %d is at the limit; rotate it first", name, nd.version)
		}
		k := min(size, st.fresh())
		if k < 1 {
			return "", fmt.Errorf("sequence %q: %w %d: no fresh IDs to open a window with", name, errAtCeiling, st.Ceiling)
		}
		w := State{Name: name, Start: st.Next, Next: st.Next, Ceiling: st.Next + k - 1, End: st.Next + k - 1,
			ZKEpoch: st.ZKEpoch, Marker: st.Marker}
		st.Next += k
		// The marker check keeps a carve prepared from a state of a lost
		// history (or an earlier incarnation) from landing.
		res, err := multi(c.zk.Conn(),
			&zk.CheckVersionRequest{Path: nd.path + "/" + st.Marker, Version: 0},
			&zk.CreateRequest{Path: nd.path + "/" + WindowPrefix, Data: w.Encode(), Acl: c.opts.ACL, Flags: zk.FlagSequence},
			&zk.SetDataRequest{Path: nd.path, Data: st.Encode(), Version: nd.version},
		)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			c.observe(res[2].Stat)
			nd.valid = false // the child watch fired; re-read next time
			return strings.TrimPrefix(res[1].String, nd.path+"/"), nil
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
		case errors.Is(err, zk.ErrNoNode):
			return "", fmt.Errorf("sequence %q: %w: revalidate it", name, ErrMarkerGone)
		default:
			// A lost reply may leave a window created: harmless, its IDs
			// are below the ceiling and taken from the sequence's next.
			return "", c.zkError(name, err)
		}
	}
}

// PruneWindows deletes the windows of sequence name that have handed out
// every ID, or whose data version reached maxVersion (a busy window nearing
// ZooKeeper's int32 version wrap: the IDs it still holds are lost, at most
// one window's worth), and returns how many windows remain open.
func (c *Client) PruneWindows(ctx context.Context, name string, maxVersion int32) (int, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	conn := c.zk.Conn()
	children, _, err := conn.Children(c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return 0, c.zkError(name, err)
	}
	open := 0
	for _, w := range childrenWith(children, WindowPrefix) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		p := c.Path(name) + "/" + w
		data, stat, err := conn.Get(p)
		c.stats.requests.Add(1)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, c.zkError(name, err)
		}
		st, err := ParseState(name+"/"+w, data)
		if err != nil {
			return 0, err
		}
		if st.Available() > 0 && stat.Version < maxVersion {
			open++
			continue
		}
		err = conn.Delete(p, stat.Version)
		c.stats.requests.Add(1)
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return 0, c.zkError(name, err)
		}
	}
	return open, nil
}

// Limits of one restore transaction: ZooKeeper refuses requests above
// jute.maxbuffer (1 MB by default), so batches stay well below it.
const (
	restoreBatchBytes = 512 << 10
	restoreBatchOps   = 1000
	// restoreParallelism bounds the restore transactions in flight.
	restoreParallelism = 4
)

// Restore creates the znodes of states that do not exist, in batched
// multi() transactions (all or nothing per batch, each under 512 KB), and
// returns how many it created. It is the primary's operation after
// ZooKeeper lost data: every state must already be covered by the durable
// store. States are stamped with epoch and a fresh marker, created in the
// same transaction; each transaction also writes the root so the epoch it
// landed in is known, and Restore returns the names whose stamp turned out
// wrong (ZooKeeper changed leaders meanwhile), for the caller to
// Revalidate. Existing znodes are left alone. An invalid state is left out
// and reported in err; it does not hold back the others.
func (c *Client) Restore(ctx context.Context, states []State, epoch int64) (created int, stale []string, err error) {
	// Validate everything and cut it into transactions first.
	var batches [][]State
	var batch []State
	var invalid []error
	size := 0
	for _, st := range states {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		if err := ValidateName(st.Name); err != nil {
			invalid = append(invalid, err)
			continue
		}
		if !st.Legacy {
			st.ZKEpoch, st.Marker, st.PushFloor = epoch, newMarker(), st.Next
		}
		if err := st.Validate(); err != nil {
			invalid = append(invalid, fmt.Errorf("restore: %w", err))
			continue
		}
		n := len(st.Encode()) + 2*len(c.Path(st.Name)) + 128
		if len(batch) > 0 && (size+n > restoreBatchBytes || len(batch) >= restoreBatchOps) {
			batches = append(batches, batch)
			batch, size = nil, 0
		}
		batch = append(batch, st)
		size += n
	}
	if len(batch) > 0 {
		batches = append(batches, batch)
	}

	// Performance: the transactions are independent, so up to
	// restoreParallelism of them are in flight at once. go-zookeeper
	// pipelines them on the one connection and the server commits them
	// with shared fsyncs, instead of one round trip (and one fsync) after
	// another. The first failure stops new transactions from starting.
	var (
		mu     sync.Mutex
		errs   []error
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, restoreParallelism)
	for _, b := range batches {
		if failed.Load() || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, st, err := c.restoreBatch(ctx, b, epoch)
			mu.Lock()
			defer mu.Unlock()
			created += n
			stale = append(stale, st...)
			if err != nil {
				failed.Store(true)
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) == 0 && ctx.Err() != nil {
		return created, stale, ctx.Err()
	}
	return created, stale, errors.Join(append(invalid, errs...)...)
}

// createOps returns the operations that create the znode of st and, for a
// validated state, its marker.
func (c *Client) createOps(st State) []any {
	ops := []any{&zk.CreateRequest{Path: c.Path(st.Name), Data: st.Encode(), Acl: c.opts.ACL}}
	if st.Marker != "" {
		ops = append(ops, &zk.CreateRequest{Path: c.Path(st.Name) + "/" + st.Marker, Acl: c.opts.ACL})
	}
	return ops
}

// restoreBatch creates the znodes of one batch of Restore in one multi()
// transaction, or one by one when some exist already.
func (c *Client) restoreBatch(ctx context.Context, batch []State, epoch int64) (created int, stale []string, err error) {
	conn := c.zk.Conn
	ops := make([]any, 0, 2*len(batch)+1)
	for _, st := range batch {
		ops = append(ops, c.createOps(st)...)
	}
	ops = append(ops, &zk.SetDataRequest{Path: c.opts.Root, Version: -1})
	res, err := multi(conn(), ops...)
	c.stats.requests.Add(1)
	switch {
	case err == nil:
		if c.observe(res[len(res)-1].Stat) != epoch {
			for _, st := range batch {
				stale = append(stale, st.Name)
			}
		}
		return len(batch), stale, nil
	case errors.Is(err, zk.ErrNodeExists):
		// Some exist already: create the rest one by one.
		for _, st := range batch {
			if err := ctx.Err(); err != nil {
				return created, stale, err
			}
			_, err := multi(conn(), c.createOps(st)...)
			c.stats.requests.Add(1)
			switch {
			case err == nil:
				created++
				stale = append(stale, st.Name) // epoch not verified
			case errors.Is(err, zk.ErrNodeExists):
			default:
				return created, stale, c.zkError(st.Name, err)
			}
		}
		return created, stale, nil
	default:
		return 0, nil, fmt.Errorf("restore %d sequences under %s: %w", len(batch), c.opts.Root, err)
	}
}
