package seqzk

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
	"github.com/seqkeeper/seqkeeper/internal/suggest"
	"github.com/seqkeeper/seqkeeper/sequence/state"
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

	// ErrExists reports a Register of a name that is already a sequence.
	ErrExists = errors.New("already exists")

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
	// stored ceiling, or the sequence is new and the primary has not yet
	// stamped it (it does once its store holds the birth). See
	// State.ZKEpoch.
	ErrUnvalidated = errors.New("sequence not validated in the current ZooKeeper epoch")

	// ErrMarkerGone reports that a sequence's state names a marker znode
	// (State.Marker) that does not exist: the state was written in another
	// ZooKeeper history or incarnation. Nothing may be taken from it until
	// the primary validates it again (Restamp).
	ErrMarkerGone = errors.New("validation marker missing")

	// ErrChangedMeanwhile reports that a sequence was deleted, or born,
	// after the primary read what it decided from: nothing was written,
	// and the primary decides again.
	ErrChangedMeanwhile = errors.New("sequence deleted or created again meanwhile")

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
	// Layout, when set, is the ACL layout of every znode the client
	// creates, the root's included, whatever the root's ACL names: a
	// replica's configured zk_acl_*, which Keeper.KeepLayout holds the
	// root to. Zero: the root's ACL decides (LayoutOf).
	Layout Layout
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
		requests, conflicts, retries, unvalidated, waits, syncs atomic.Int64
	}

	// layout is the root's ACL layout, for the znodes the client creates.
	layout layoutCache
}

// node is the cached view of one znode (a sequence or one of its windows).
type node struct {
	mu   sync.Mutex
	path string
	// seq is the path of the sequence znode: path itself, or a window's
	// parent. Markers (State.Marker) are its children.
	seq     string
	valid   bool
	state   state.State
	version int32
	czxid   int64
	mzxid   int64 // of the data as load last read it
	// conn is the zkclient connection (zkclient.Client.Connection) the
	// cache was read on: any reconnect voids it.
	conn int64
	// deleted is the child watch set when the znode was read; any event on
	// it (deletion, a change of windows or markers, a lost session) voids
	// the cache.
	deleted <-chan zkclient.Event
	windows []string
	markers []string
	// preferred is, on a sequence node, 1 + the slot this client last
	// took from without contention (0: none yet, or contended since). See
	// takeWindow.
	preferred atomic.Int64
	// seen is set once the znode was read: if it vanishes later, Take
	// waits for the primary to restore it instead of failing at once.
	seen bool
	// confirmed is when a take last read the sequence after a sync to
	// answer that it is exhausted (see exhaustedRecheck).
	confirmed time.Time
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
	return &Client{zk: c, opts: opts, nodes: make(map[string]*node)}, nil
}

// Stats are counters of a Client's ZooKeeper traffic, for benchmarks and
// metrics.
type Stats struct {
	// Requests is the number of ZooKeeper requests sent (reads, writes,
	// watches): the round trips the client paid.
	Requests int64
	// Conflicts is the number of writes that lost to another writer: a
	// guard failed (a version, or a znode that exists or does not), so
	// nothing was written.
	Conflicts int64
	// Retries is the number of operations retried after a connection
	// error.
	Retries int64
	// Unvalidated is the number of takes whose write landed in a ZooKeeper
	// epoch the sequence was not validated in; their IDs were discarded.
	Unvalidated int64
	// Waits is the number of times a take waited for the primary: at the
	// ceiling, for a sequence not yet initialised or validated, or for one
	// ZooKeeper lost to be restored.
	Waits int64
	// Syncs is the number of times the client synced its session with the
	// ZooKeeper leader: before answering that a sequence does not exist
	// (a read that found no znode reads again after it), before listing
	// the sequences (Names), and before answering that a sequence is
	// exhausted (at most once a second per sequence). Other reads that
	// find their znode never sync.
	Syncs int64
}

// Stats returns the client's counters so far.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:  c.stats.requests.Load(),
		Conflicts: c.stats.conflicts.Load(),
		Retries:   c.stats.retries.Load(),

		Unvalidated: c.stats.unvalidated.Load(),
		Waits:       c.stats.waits.Load(),
		Syncs:       c.stats.syncs.Load(),
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

// zkError turns a ZooKeeper error into the package's errors.
func (c *Client) zkError(name string, err error) error {
	if errors.Is(err, zkclient.ErrNoNode) {
		return &UnknownSequenceError{Name: name, Root: c.opts.Root}
	}
	return fmt.Errorf("sequence %q: %w", name, err)
}

// UnknownSequenceError reports a sequence whose znode does not exist under
// Root. It matches ErrUnknownSequence. Its message does not tell the caller
// to create the sequence: a mistyped name or root would then get a second
// sequence beside the real one, starting at 1 (Hint says what to do).
type UnknownSequenceError struct {
	Name, Root string
	// Deleted is set when the sequence was seen and then deleted.
	Deleted bool
}

func (e *UnknownSequenceError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("sequence %q: %v: %s/%s was deleted", e.Name, ErrUnknownSequence, e.Root, e.Name)
	}
	return fmt.Sprintf("sequence %q: %v: %s/%s does not exist", e.Name, ErrUnknownSequence, e.Root, e.Name)
}

// Is matches ErrUnknownSequence.
func (e *UnknownSequenceError) Is(target error) bool { return target == ErrUnknownSequence }

// maxHintChildren bounds the root's size for which Hint lists it to look
// for names close to a mistyped one.
const maxHintChildren = 10_000

// Hint says what to do about a sequence name that does not exist: that the
// root itself does not exist (a wrong root, or nothing created under it
// yet), or the names it holds that are close to name (a typo), or how to
// list and create sequences. It reads ZooKeeper; a read that fails gives
// the last.
func (o Operator) Hint(ctx context.Context, name string) string {
	c := o.c
	ok, stat, err := c.zk.Session().Exists(ctx, c.opts.Root)
	c.stats.requests.Add(1)
	switch {
	case err == nil && !ok:
		return fmt.Sprintf("the root %s does not exist: no sequence was created under it yet, or the root is wrong (--root, SEQKEEPER_ROOT); do not create %q before checking it", c.opts.Root, name)
	case err == nil && stat.NumChildren <= maxHintChildren:
		if names, err := c.Names(ctx); err == nil {
			if close := suggest.Closest(name, names); len(close) > 0 {
				return "did you mean " + quoteAll(close) + "? ('seqkeeper list' shows the sequences)"
			}
		}
	}
	return fmt.Sprintf("'seqkeeper list' shows the sequences under %s; 'seqkeeper create %s' makes a new one, starting at 1", c.opts.Root, name)
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, " or ")
}

// sent is the context of a write. Once the client has decided to write, it
// waits for the outcome even after ctx ends: what was handed out or pushed
// depends on it, and a write abandoned on the wire would turn a definite
// answer into a lost or uncertain one. The wait is bounded: go-zookeeper
// fails every request when its connection drops. Reads stop when ctx ends.
func sent(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// retryDelay spaces the retries of conflicts and connection errors.
var retryDelay = backoff.Policy{Initial: time.Millisecond, Max: 500 * time.Millisecond}

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
	birth  bool // Unconfirmed: waiting for the store, not for a fast-forward
}

func (e *unvalidatedError) Error() string { return e.reason }

// cas writes st to nd at the cached version. A validated state is written
// in a transaction that first checks that its marker exists (markers are
// created at version 0 and never written), so the write cannot land in
// another ZooKeeper history or on another incarnation of the znode; it
// then fails with errMarkerGone and writes nothing.
func (c *Client) cas(ctx context.Context, nd *node, st state.State) (*zkclient.Stat, error) {
	if nd.version < 0 || nd.version >= state.VersionLimit {
		return nil, &unvalidatedError{marker: st.Marker,
			reason: fmt.Sprintf("znode %s is at data version %d, at the limit %d: the primary rotates it onto a fresh znode", nd.path, nd.version, state.VersionLimit)}
	}
	ops := []zkclient.Op{zkclient.SetOp(nd.path, st.Encode(), nd.version)}
	if !st.Legacy && st.Validated() {
		ops = slices.Insert(ops, 0, zkclient.CheckOp(nd.seq+"/"+st.Marker, 0))
	}
	res, err := c.write(ctx, ops...)
	if err != nil {
		return nil, err
	}
	return res[len(res)-1].Stat, nil
}

// unvalidatedOf says why st cannot be taken from yet, or returns nil.
func unvalidatedOf(st state.State) error {
	switch {
	case st.Legacy || st.Registered || st.Validated():
		return nil
	case Unconfirmed(st):
		return &unvalidatedError{marker: st.Marker, birth: true,
			reason: "a new incarnation the primary has initialised and not yet stamped: it stamps it once its store has recorded the birth"}
	}
	return &unvalidatedError{reason: "state not validated by a primary in this ZooKeeper history"}
}

// epochOf is the ZooKeeper epoch of a zxid: its high 32 bits, incremented
// by every leader election.
func epochOf(zxid int64) int64 { return zxid >> 32 }

// observe records the epoch of a write this client made.
func (c *Client) observe(stat *zkclient.Stat) int64 {
	e := epochOf(stat.Mzxid)
	c.epoch.Store(e)
	return e
}

// Epoch returns the ZooKeeper epoch of this client's latest write, 0 before
// the first.
func (c *Client) Epoch() int64 { return c.epoch.Load() }
