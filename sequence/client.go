package sequence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults for Options.
const (
	DefaultRoot        = "/all-sequences"
	DefaultCeilingWait = 30 * time.Second
)

var (
	// ErrUnknownSequence reports a sequence whose znode does not exist.
	ErrUnknownSequence = errors.New("unknown sequence")

	// ErrInvalidName reports a sequence name that cannot be a znode name.
	ErrInvalidName = errors.New("invalid sequence name")

	// ErrCeilingReached reports that a Take found no IDs below the reserved
	// ceiling and no primary raised it within Options.CeilingWait.
	ErrCeilingReached = errors.New("reserved ceiling reached")

	// ErrRecreated reports that a write landed on a sequence znode that had
	// been deleted and created again since it was read. The client fenced
	// the znode off (no fresh IDs until the primary fast-forwards it) and
	// handed out nothing.
	ErrRecreated = errors.New("sequence znode was re-created under a write")

	// ErrUnvalidated reports that a sequence was not validated in the
	// current ZooKeeper epoch within Options.CeilingWait: ZooKeeper elected
	// a new leader (restarted, failed over, or was restored from an older
	// copy) and no primary has yet fast-forwarded the sequence past its
	// stored ceiling. See State.ZKEpoch.
	ErrUnvalidated = errors.New("sequence not validated in the current ZooKeeper epoch")

	// ErrMarkerGone reports that a sequence's state names a marker znode
	// (State.Marker) that does not exist: the state was written in another
	// ZooKeeper history or incarnation. Nothing may be taken from it until
	// the primary validates it again (FastForward).
	ErrMarkerGone = errors.New("validation marker missing")

	// ErrUncertain reports a push whose write may or may not have been
	// applied (the connection was lost before the reply). After Push,
	// pushing the same IDs again could hand them out twice, so they must be
	// treated as lost. After PushOnce, pushing again with the same key is
	// safe and tells whether the first was applied.
	ErrUncertain = errors.New("outcome unknown after connection loss")
)

// namePattern is the sequence name grammar: what is safe as a znode name,
// an S3 key part, a URL path segment and a shell word.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// ValidateName reports whether name can name a sequence: 1 to 200 of
// A-Z a-z 0-9 . _ -, starting with a letter or digit.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		why := "use 1 to 200 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
		switch {
		case name == "":
			why = "the name is empty; " + why
		case strings.Contains(name, "/"):
			why = "'/' would make it a path, not a name; " + why
		}
		return fmt.Errorf("%w %q: %s", ErrInvalidName, name, why)
	}
	return nil
}

// Options configure a Client. The zero value is usable.
type Options struct {
	// Root is the znode under which sequences live. Default DefaultRoot.
	Root string
	// CeilingWait bounds how long Take waits at the ceiling for the
	// primary to raise it before failing with ErrCeilingReached. The
	// caller's context bounds it too. Default DefaultCeilingWait.
	CeilingWait time.Duration
	// ACL is set on znodes the client creates (windows). Default
	// zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
}

// Client takes IDs from and pushes IDs back to sequences in ZooKeeper by
// compare-and-set. It caches each sequence's state and znode version, so an
// uncontended Take costs one ZooKeeper round trip. It is safe for
// concurrent use; calls on the same sequence are serialised within a Client
// (separate Clients, or separate processes, contend through ZooKeeper).
//
// The cache cannot be fooled by a deleted and re-created znode (whose
// version restarts at 0, so an old cached version could match it): a cached
// state is used only while the session that read it is still the session,
// and a child watch set on the znode when it was read has not fired. The
// child watch fires when the znode is deleted but not when its data changes,
// so the client's own writes do not invalidate the cache; others' writes
// show up as a failed compare-and-set. Every write also checks that the
// znode it changed has the creation zxid that was read.
type Client struct {
	zk   *zkclient.Client
	opts Options

	mu    sync.Mutex
	nodes map[string]*node

	// epoch is the ZooKeeper epoch of the zxid of this client's latest
	// write: the best guess of the current epoch.
	epoch atomic.Int64

	stats struct {
		requests, conflicts, retries, unvalidated atomic.Int64
	}
}

// node is the cached view of one znode (a sequence or one of its windows).
type node struct {
	mu   sync.Mutex
	path string
	// seq is the path of the sequence znode: path itself, or a window's
	// parent. Markers (State.Marker) are its children.
	seq     string
	valid   bool
	state   State
	version int32
	czxid   int64
	// conn is the zkclient connection (zkclient.Client.Connection) the
	// cache was read on: any reconnect voids it.
	conn int64
	// deleted is the child watch set when the znode was read; any event on
	// it (deletion, a change of windows or markers, a lost session) voids
	// the cache.
	deleted <-chan zk.Event
	windows []string
	markers []string
	// preferred is, on a sequence node, 1 + the index in windows of the
	// window this client last took from without a conflict (0: none yet).
	// See takeOnce.
	preferred atomic.Int64
	// seen is set once the znode was read: if it vanishes later, Take
	// waits for the primary to restore it instead of failing at once.
	seen bool
}

// NewClient returns a Client for the sequences under opts.Root.
func NewClient(c *zkclient.Client, opts Options) (*Client, error) {
	if c == nil {
		return nil, errors.New("sequence: NewClient needs a zookeeper client")
	}
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	if err := zkclient.ValidateRoot(opts.Root); err != nil {
		return nil, fmt.Errorf("sequence root: %w", err)
	}
	if opts.CeilingWait == 0 {
		opts.CeilingWait = DefaultCeilingWait
	}
	if opts.CeilingWait < 0 {
		return nil, fmt.Errorf("sequence: CeilingWait %s is negative", opts.CeilingWait)
	}
	if opts.ACL == nil {
		opts.ACL = zk.WorldACL(zk.PermAll)
	}
	return &Client{zk: c, opts: opts, nodes: make(map[string]*node)}, nil
}

// Stats are counters of a Client's ZooKeeper traffic, for benchmarks and
// metrics.
type Stats struct {
	// Requests is the number of ZooKeeper requests sent (reads, writes,
	// watches): the round trips the client paid.
	Requests int64
	// Conflicts is the number of compare-and-set writes that lost to
	// another writer (BadVersion).
	Conflicts int64
	// Retries is the number of operations retried after a connection
	// error.
	Retries int64
	// Unvalidated is the number of takes whose write landed in a ZooKeeper
	// epoch the sequence was not validated in; their IDs were discarded.
	Unvalidated int64
}

// Stats returns the client's counters so far.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:  c.stats.requests.Load(),
		Conflicts: c.stats.conflicts.Load(),
		Retries:   c.stats.retries.Load(),

		Unvalidated: c.stats.unvalidated.Load(),
	}
}

// ZK returns the ZooKeeper session the client uses.
func (c *Client) ZK() *zkclient.Client { return c.zk }

// Path returns the znode path of sequence name.
func (c *Client) Path(name string) string { return c.opts.Root + "/" + name }

// Root returns the znode under which the sequences live.
func (c *Client) Root() string { return c.opts.Root }

func (c *Client) node(path string) *node { return c.nodeIn(path, path) }

// window returns the node of window w of sequence name.
func (c *Client) window(name, w string) *node {
	return c.nodeIn(c.Path(name)+"/"+w, c.Path(name))
}

func (c *Client) nodeIn(path, seq string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[path]
	if n == nil {
		n = &node{path: path, seq: seq}
		c.nodes[path] = n
	}
	return n
}

// usable reports whether the cached state may be used: read on the current
// connection, and its child watch not fired. It consumes a fired watch, so
// the next load re-arms it.
func (n *node) usable(conn int64) bool {
	if !n.valid || n.deleted == nil || n.conn != conn {
		return false
	}
	select {
	case <-n.deleted:
		n.deleted, n.valid = nil, false
		return false
	default:
		return true
	}
}

// load reads the znode into the cache. With dataWatch it also returns a
// watch that fires on the next change of the data (used to wait for a
// raise). The caller holds n.mu.
func (c *Client) load(name string, n *node, dataWatch bool) (<-chan zk.Event, error) {
	for attempt := 0; ; attempt++ {
		gen := c.zk.Connection()
		conn := c.zk.Conn()
		if n.deleted != nil {
			select {
			case <-n.deleted: // fired: one-shot, so it must be set again
				n.deleted = nil
			default:
			}
		}
		if n.deleted == nil || n.conn != gen {
			// The deletion watch comes first: set before the read, it
			// covers whatever incarnation the read then sees (checked by
			// comparing creation zxids below).
			children, stat, ch, err := conn.ChildrenW(n.path)
			c.stats.requests.Add(1)
			if err != nil {
				return nil, c.zkError(name, err)
			}
			sort.Strings(children)
			n.deleted, n.czxid, n.conn = ch, stat.Czxid, gen
			n.windows = childrenWith(children, WindowPrefix)
			n.markers = childrenWith(children, MarkerPrefix)
		}
		var (
			data  []byte
			stat  *zk.Stat
			watch <-chan zk.Event
			err   error
		)
		if dataWatch {
			data, stat, watch, err = conn.GetW(n.path)
		} else {
			data, stat, err = conn.Get(n.path)
		}
		c.stats.requests.Add(1)
		if err != nil {
			n.valid = false
			return nil, c.zkError(name, err)
		}
		if stat.Czxid != n.czxid || c.zk.Connection() != gen {
			// Re-created (or reconnected) between the two requests: the
			// watch may belong to another incarnation or history.
			n.deleted, n.valid = nil, false
			if attempt > 10 {
				return nil, fmt.Errorf("sequence %q: znode keeps being re-created; is something deleting it?", name)
			}
			continue
		}
		st, err := ParseState(name, data)
		if err != nil {
			n.valid = false
			return nil, err
		}
		n.state, n.version, n.valid, n.seen = st, stat.Version, true, true
		return watch, nil
	}
}

// zkError turns a ZooKeeper error into the package's errors.
func (c *Client) zkError(name string, err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("sequence %q: %w: %s does not exist; create it with 'seqkeeper create %s'", name, ErrUnknownSequence, c.Path(name), name)
	}
	return fmt.Errorf("sequence %q: %w", name, err)
}

// retryable reports whether err is a connection-level ZooKeeper error after
// which the operation may be tried again from a fresh read.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

// backoff sleeps for a jittered, growing delay, or returns ctx's error.
func backoff(ctx context.Context, attempt int) error {
	d := min(time.Duration(1<<min(attempt, 10))*time.Millisecond, 500*time.Millisecond)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errAtCeiling is returned by takeNode when the node has no IDs below its
// ceiling; the caller decides whether to wait or try elsewhere.
var errAtCeiling = errors.New("at ceiling")

// unvalidatedError is returned by takeNode when the state may not be used
// until the primary acts on it: it is not validated, its marker is gone (it
// belongs to another history or incarnation), its write landed in a
// ZooKeeper epoch other than its stamp (the write happened, so its IDs are
// lost), or its znode version is at the limit and must be rotated. No IDs
// are handed out. marker is the state's marker, so that a waiter can tell
// when the primary has stamped a new one.
type unvalidatedError struct {
	marker string
	reason string
}

func (e *unvalidatedError) Error() string { return e.reason }

// errMarkerGone reports a write refused because the marker of the state it
// was prepared from no longer exists: nothing was written.
var errMarkerGone = errors.New("marker znode gone")

// VersionLimit is the highest znode data version a client writes at.
// ZooKeeper keeps the version in an int32 that wraps, and an expected
// version of -1 makes a write unconditional (ZOOKEEPER-4743), so a client
// never writes at a version at or above this limit, or below 0: it waits
// for the primary to rotate the sequence onto a fresh znode (see
// primary.Config.RotateVersion, far below this limit).
const VersionLimit int32 = math.MaxInt32 - 1<<20

// cas writes st to nd at the cached version. A validated state is written
// in a transaction that first checks that its marker exists (markers are
// created at version 0 and never written), so the write cannot land in
// another ZooKeeper history or on another incarnation of the znode; it
// then fails with errMarkerGone and writes nothing.
func (c *Client) cas(nd *node, st State) (*zk.Stat, error) {
	if nd.version < 0 || nd.version >= VersionLimit {
		return nil, &unvalidatedError{marker: st.Marker,
			reason: fmt.Sprintf("znode %s is at data version %d, at the limit %d: the primary rotates it onto a fresh znode", nd.path, nd.version, VersionLimit)}
	}
	conn := c.zk.Conn()
	c.stats.requests.Add(1)
	if st.Legacy || !st.Validated() {
		return conn.Set(nd.path, st.Encode(), nd.version)
	}
	res, failed, err := multiAt(conn,
		&zk.CheckVersionRequest{Path: nd.seq + "/" + st.Marker, Version: 0},
		&zk.SetDataRequest{Path: nd.path, Data: st.Encode(), Version: nd.version})
	switch {
	case failed == 0 && errors.Is(err, zk.ErrNoNode):
		return nil, errMarkerGone
	case err != nil:
		return nil, err
	}
	return res[1].Stat, nil
}

// unvalidatedOf says why st cannot be taken from yet, or returns nil.
func unvalidatedOf(st State) error {
	if st.Legacy || st.Registered || st.Validated() {
		return nil
	}
	return &unvalidatedError{reason: "state not validated by a primary in this ZooKeeper history"}
}

// epochOf is the ZooKeeper epoch of a zxid: its high 32 bits, incremented
// by every leader election.
func epochOf(zxid int64) int64 { return zxid >> 32 }

// observe records the epoch of a write this client made.
func (c *Client) observe(stat *zk.Stat) int64 {
	e := epochOf(stat.Mzxid)
	c.epoch.Store(e)
	return e
}

// Epoch returns the ZooKeeper epoch of this client's latest write, 0 before
// the first.
func (c *Client) Epoch() int64 { return c.epoch.Load() }

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
func (c *Client) Take(ctx context.Context, name string, n int64) (Ranges, error) {
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
			if err := c.waitRaise(ctx, name, waitSince, unvalidated); err != nil {
				return nil, err
			}
		case errors.Is(err, ErrUnknownSequence) && c.wasSeen(name):
			// It existed: ZooKeeper lost it, and the primary restores it.
			if waitSince.IsZero() {
				waitSince = time.Now()
			}
			if err := c.waitRestore(ctx, name, waitSince); err != nil {
				return nil, err
			}
		case retryable(err):
			c.stats.retries.Add(1)
			if berr := backoff(ctx, attempt); berr != nil {
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

// takeOnce makes one pass: from a window when the sequence has open windows
// and nothing recycled, else from the sequence znode itself.
func (c *Client) takeOnce(ctx context.Context, name string, n int64) (Ranges, error) {
	seq := c.node(c.Path(name))
	seq.mu.Lock()
	if !seq.usable(c.zk.Connection()) {
		if _, err := c.load(name, seq, false); err != nil {
			seq.mu.Unlock()
			return nil, err
		}
	}
	windows := seq.windows
	useWindows := len(windows) > 0 && len(seq.state.Recycled) == 0 && !seq.state.Legacy
	seq.mu.Unlock()

	if useWindows {
		// Performance: start at the window this client last took from
		// without contention, and move to a random one after contention.
		// Clients then settle on distinct windows (one compare-and-set per
		// take) instead of colliding at random on every take (with 8
		// clients on 8 windows, random starts cost 3.5 requests per take).
		// A window busy with another goroutine of this client is skipped
		// the same way, so one client still uses several windows at once.
		off := rand.N(len(windows))
		preferred := int(seq.preferred.Load()) - 1
		if preferred >= 0 && preferred < len(windows) {
			wn := c.window(name, windows[preferred])
			if wn.mu.TryLock() {
				wn.mu.Unlock()
				off = preferred
			}
		}
		for i := range windows {
			k := (off + i) % len(windows)
			w := windows[k]
			got, conflicts, err := c.takeNode(ctx, name, c.window(name, w), n)
			switch {
			case err == nil:
				// The first write to a window this client has just moved
				// to fails on its stale cached version whether or not
				// anyone else uses it: only conflicts beyond that one are
				// contention.
				if conflicts == 0 || conflicts == 1 && k != preferred {
					seq.preferred.Store(int64(k) + 1)
				} else {
					seq.preferred.Store(0)
				}
				return got, nil
			case errors.Is(err, ErrExhausted), errors.Is(err, errAtCeiling), errors.Is(err, ErrUnknownSequence):
				continue // this window is used up or gone; try the next
			case errors.As(err, new(*unvalidatedError)):
				continue // the primary will revalidate, rotate or drop it
			default:
				return nil, err
			}
		}
	}
	got, _, err := c.takeNode(ctx, name, seq, n)
	return got, err
}

// takeNode takes up to n IDs from one znode (a sequence or a window) by
// compare-and-set, re-reading only after a conflict. It also returns how
// many compare-and-sets lost to another writer.
func (c *Client) takeNode(ctx context.Context, name string, nd *node, n int64) (_ Ranges, conflicts int, _ error) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, conflicts, err
		}
		if !nd.usable(c.zk.Connection()) {
			if _, err := c.load(name, nd, false); err != nil {
				return nil, conflicts, err
			}
		}
		st := nd.state
		if err := unvalidatedOf(st); err != nil {
			c.stats.unvalidated.Add(1)
			return nil, conflicts, err
		}
		got, err := st.Take(n)
		if err != nil {
			return nil, conflicts, err
		}
		if len(got) == 0 {
			return nil, conflicts, errAtCeiling
		}
		stat, err := c.cas(nd, st)
		switch {
		case err == nil:
			epoch := c.observe(stat)
			if stat.Czxid != nd.czxid {
				return nil, conflicts, c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			if !st.Legacy && st.ZKEpoch != epoch {
				// ZooKeeper elected a leader since the primary validated
				// this state and may have lost writes: these IDs may have
				// been issued. The write landed, so they are lost.
				c.stats.unvalidated.Add(1)
				return nil, conflicts, &unvalidatedError{marker: st.Marker,
					reason: fmt.Sprintf("state validated in zookeeper epoch %d, written in epoch %d", st.ZKEpoch, epoch)}
			}
			return got, conflicts, nil
		case errors.Is(err, errMarkerGone):
			// Prepared from a state of another history or incarnation:
			// nothing was written. Read again; if ZooKeeper still shows
			// that marker, wait for the primary.
			nd.valid, nd.deleted = false, nil
			c.stats.unvalidated.Add(1)
			return nil, conflicts, &unvalidatedError{marker: st.Marker,
				reason: "the state's marker znode is gone: it belongs to another ZooKeeper history or an earlier incarnation of the znode"}
		case errors.As(err, new(*unvalidatedError)):
			return nil, conflicts, err
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
			conflicts++
			nd.valid = false
		case errors.Is(err, zk.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		default:
			// The write may have been applied: its IDs are lost, never
			// reused, because the retry starts from a fresh read.
			nd.valid = false
			return nil, conflicts, c.zkError(name, err)
		}
	}
}

// recreated handles a write that landed on a znode created after the one
// that was read. A validated state cannot get here (its write checks a
// marker that dies with the old incarnation), so this is a legacy counter
// or an unvalidated state: nothing is handed out, and for a full state the
// primary, seeing a creation zxid it did not record, fast-forwards the
// sequence past everything the store covers. A legacy counter has no such
// protection (docs/guarantees.md).
func (c *Client) recreated(name string, nd *node, stat *zk.Stat) error {
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
	seq.mu.Lock()
	watch, err := c.load(name, seq, true)
	st := seq.state
	seq.mu.Unlock()
	if err != nil {
		if retryable(err) {
			return backoff(ctx, 3)
		}
		return err
	}
	switch {
	case unvalidated != nil && st.Marker != unvalidated.marker:
		// Validated again or rotated while we were not looking, or only
		// our cache was stale.
		return nil
	case unvalidated == nil && st.Available() > 0:
		return nil // raised while we were not looking
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

// waitRestore waits for a sequence znode that disappeared to come back,
// up to CeilingWait since the wait began.
func (c *Client) waitRestore(ctx context.Context, name string, since time.Time) error {
	exists, _, watch, err := c.zk.Conn().ExistsW(c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		if retryable(err) {
			return backoff(ctx, 3)
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

func (n *node) deletedSignal() <-chan zk.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.deleted
}

func (c *Client) waitError(name string, st State, unvalidated *unvalidatedError) error {
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

// Push returns IDs of sequence name for reuse; later takes hand them out
// again before fresh ones. It refuses, with an error wrapping ErrBadPush and
// without changing anything, ranges holding IDs the sequence never issued,
// lying outside its space, or already recycled: accepting them could hand an
// ID out twice. Push only IDs you took and will not use.
//
// Push retries compare-and-set conflicts until ctx is done. If the
// connection is lost before the reply it does not retry, since the first
// write may have been applied and a second would recycle the IDs twice: it
// returns an error wrapping ErrUncertain, and the IDs must be treated as
// lost. PushOnce, given an idempotency key, can retry safely.
func (c *Client) Push(ctx context.Context, name string, ids Ranges) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	norm, err := NormalizeRanges(ids)
	if err != nil {
		return fmt.Errorf("sequence %q: %w: %v", name, ErrBadPush, err)
	}
	if len(norm) == 0 {
		return nil
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	gone := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !nd.usable(c.zk.Connection()) {
			if _, err := c.load(name, nd, false); err != nil {
				if retryable(err) {
					// Nothing was written yet: safe to retry.
					c.stats.retries.Add(1)
					if err := backoff(ctx, attempt); err != nil {
						return err
					}
					continue
				}
				return err
			}
		}
		st := nd.state
		if err := st.Push(norm); err != nil {
			return err
		}
		if err := c.checkWindows(name, nd, norm); err != nil {
			if retryable(err) {
				c.stats.retries.Add(1)
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
				continue
			}
			return err
		}
		stat, err := c.cas(nd, st)
		switch {
		case err == nil:
			c.observe(stat)
			if stat.Czxid != nd.czxid {
				return c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			return nil
		case errors.Is(err, errMarkerGone):
			// Nothing was written: the cached state was of another
			// history or incarnation. Read again.
			nd.valid, nd.deleted = false, nil
			if gone++; gone > 3 {
				return fmt.Errorf("sequence %q: push %s: the state's marker %s keeps being missing; the primary must revalidate the sequence first (nothing was pushed)", name, norm, st.Marker)
			}
		case errors.As(err, new(*unvalidatedError)):
			return fmt.Errorf("sequence %q: push %s: %w (nothing was pushed; try again once the primary has rotated it)", name, norm, err)
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
			nd.valid = false
		case errors.Is(err, zk.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		default:
			nd.valid = false
			return fmt.Errorf("sequence %q: push %s: %w: %v; treat these IDs as lost and do not push them again",
				name, norm, ErrUncertain, err)
		}
	}
}

// PushOnce is Push made idempotent by key, an idempotency key naming one
// logical push (see ValidatePushKey; a random UUID per logical push, the
// same on every retry). The key is recorded in the sequence's state in the
// same compare-and-set as the push (State.Pushed), so:
//
//   - if the state already records key, the push was applied before:
//     PushOnce changes nothing and returns already = true, even if the IDs
//     have been taken again since (pushing them again would hand them out
//     twice);
//   - otherwise it pushes ids as Push does (the same refusals, wrapping
//     ErrBadPush) and returns already = false.
//
// Unlike Push, PushOnce retries after losing a write's reply (connection
// loss, session expiry), until ctx is done: the retry reads the state, and
// finds the key if the lost write was applied. A key names one push: reusing
// it for other IDs makes that push a no-op (its IDs are lost, never handed
// out twice).
//
// The answer is definite while ZooKeeper keeps the key: while fewer than
// MaxPushKeys other keyed pushes to the sequence came in between, and while
// ZooKeeper keeps its data (a rollback or restore can lose the write that
// recorded the key). Within one call, PushOnce refuses to push again, and
// returns an error wrapping ErrUncertain, when the state's marker changed
// after a lost write (the primary revalidated, rotated or restored the
// sequence in between, so a missing key no longer proves the write did not
// land). It also returns ErrUncertain when ctx ends while the outcome of a
// write is unknown; a later PushOnce with the same key settles it.
func (c *Client) PushOnce(ctx context.Context, name, key string, ids Ranges) (already bool, err error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	if err := ValidatePushKey(key); err != nil {
		return false, fmt.Errorf("sequence %q: %w", name, err)
	}
	norm, err := NormalizeRanges(ids)
	if err != nil {
		return false, fmt.Errorf("sequence %q: %w: %v", name, ErrBadPush, err)
	}
	if len(norm) == 0 {
		return false, nil
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var (
		// lost is the error of a write whose reply was lost (it may have
		// been applied); nil while no write of this call may have landed.
		lost error
		// marker is the marker of the state that write was prepared from.
		marker string
	)
	// fail returns err, or, once a write may have landed, an error wrapping
	// ErrUncertain that says why this call cannot tell.
	fail := func(err error) (bool, error) {
		if lost == nil {
			return false, err
		}
		if err == lost {
			return false, fmt.Errorf("sequence %q: push %s with key %s: %w: %v; push again with the same key to learn whether it was applied",
				name, norm, key, ErrUncertain, err)
		}
		return false, fmt.Errorf("sequence %q: push %s with key %s: %w: %v, after a write whose reply was lost (%v); push again with the same key to learn whether it was applied",
			name, norm, key, ErrUncertain, err, lost)
	}
	gone := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if !nd.usable(c.zk.Connection()) {
			if _, err := c.load(name, nd, false); err != nil {
				if !retryable(err) {
					return fail(err)
				}
				// Nothing was written by this read: safe to retry.
				c.stats.retries.Add(1)
				if err := backoff(ctx, attempt); err != nil {
					return fail(err)
				}
				continue
			}
		}
		st := nd.state
		if st.HasPushKey(key) {
			// Recorded before this call (already), or by this call's
			// write whose reply was lost.
			return lost == nil, nil
		}
		if lost != nil && st.Marker != marker {
			// Rotate and Revalidate keep the keys, but a ZooKeeper
			// rollback, and the revalidation after it, would lose a key
			// the lost write recorded, while the IDs it pushed may have
			// been taken in the lost history: pushing again could hand
			// them out twice.
			return fail(fmt.Errorf("the state's marker changed from %q to %q since that write, so a missing key does not prove it was not applied", marker, st.Marker))
		}
		already, err := st.PushOnce(norm, key)
		if already {
			return true, nil
		}
		if err != nil {
			return fail(err)
		}
		if err := c.checkWindows(name, nd, norm); err != nil {
			if !retryable(err) {
				return fail(err)
			}
			c.stats.retries.Add(1)
			if err := backoff(ctx, attempt); err != nil {
				return fail(err)
			}
			continue
		}
		stat, err := c.cas(nd, st)
		switch {
		case err == nil:
			c.observe(stat)
			if stat.Czxid != nd.czxid {
				return false, c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			return false, nil
		case errors.Is(err, errMarkerGone):
			// Nothing was written: the cached state was of another
			// history or incarnation. Read again.
			nd.valid, nd.deleted = false, nil
			if gone++; gone > 3 {
				return fail(fmt.Errorf("sequence %q: push %s: the state's marker %s keeps being missing; the primary must revalidate the sequence first (nothing was pushed by this attempt)", name, norm, st.Marker))
			}
		case errors.As(err, new(*unvalidatedError)):
			return fail(fmt.Errorf("sequence %q: push %s: %w (nothing was pushed by this attempt; try again once the primary has rotated it)", name, norm, err))
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
			nd.valid = false
		case errors.Is(err, zk.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		case retryable(err):
			// The write may have landed. With the key that is safe to
			// find out: the next read shows the key if it did.
			nd.valid = false
			if lost == nil {
				lost, marker = err, st.Marker
			}
			c.stats.retries.Add(1)
			if berr := backoff(ctx, attempt); berr != nil {
				return fail(berr)
			}
		default:
			nd.valid = false
			if lost == nil {
				lost = err
			}
			return fail(err)
		}
	}
}

// checkWindows refuses a push of IDs that an open window of the sequence
// holds and has not handed out: they lie below the sequence's next (they
// were carved from it), yet were never issued. The caller holds nd.mu and
// has just read nd; the windows are listed after that read, so every
// window carved before it is seen (a window carved later changes the
// sequence's version and fails the push's compare-and-set), and a window's
// next only grows, so what passes here stays true.
func (c *Client) checkWindows(name string, nd *node, rs Ranges) error {
	if nd.state.Windows == 0 && len(nd.windows) == 0 {
		return nil
	}
	conn := c.zk.Conn()
	children, _, err := conn.Children(nd.path)
	c.stats.requests.Add(1)
	if err != nil {
		return c.zkError(name, err)
	}
	for _, w := range childrenWith(children, WindowPrefix) {
		data, _, err := conn.Get(nd.path + "/" + w)
		c.stats.requests.Add(1)
		if errors.Is(err, zk.ErrNoNode) {
			continue // pruned: every ID handed out
		}
		if err != nil {
			return c.zkError(name, err)
		}
		ws, err := ParseState(name+"/"+w, data)
		if err != nil {
			return err
		}
		if ws.Next > ws.End {
			continue
		}
		held := Range{ws.Next, ws.End}
		for _, r := range rs {
			if r.Start <= held.End && held.Start <= r.End {
				return fmt.Errorf("sequence %q: %w: range %s: IDs %s are held by window %s and were never handed out; push back only IDs this sequence handed out",
					name, ErrBadPush, r, Range{max(r.Start, held.Start), min(r.End, held.End)}, w)
			}
		}
	}
	return nil
}

// Describe reads the current state of sequence name from ZooKeeper,
// bypassing the cache, and the names of its open windows. It sets no
// watches, so polling it costs nothing beyond the two reads.
func (c *Client) Describe(ctx context.Context, name string) (State, []string, error) {
	if err := ValidateName(name); err != nil {
		return State{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return State{}, nil, err
	}
	conn := c.zk.Conn()
	data, _, err := conn.Get(c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return State{}, nil, c.zkError(name, err)
	}
	st, err := ParseState(name, data)
	if err != nil {
		return State{}, nil, err
	}
	children, _, err := conn.Children(c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return State{}, nil, c.zkError(name, err)
	}
	sort.Strings(children)
	return st, childrenWith(children, WindowPrefix), nil
}

// childrenWith filters a sequence znode's children down to those whose
// names start with prefix: WindowPrefix or MarkerPrefix.
func childrenWith(children []string, prefix string) []string {
	var out []string
	for _, ch := range children {
		if strings.HasPrefix(ch, prefix) {
			out = append(out, ch)
		}
	}
	return out
}
