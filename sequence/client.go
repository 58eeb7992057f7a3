package sequence

import (
	"context"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults for Options.
const (
	DefaultRoot        = seqzk.DefaultRoot
	DefaultCeilingWait = seqzk.DefaultCeilingWait
)

// The state format's types, as workers see them (package state defines
// them and documents the format).
type (
	// State is the decoded data of a sequence znode.
	State = state.State
	// Range is an inclusive range of IDs.
	Range = state.Range
	// Ranges are ascending, non-overlapping, non-adjacent ranges of IDs.
	Ranges = state.Ranges
)

// The errors of taking and pushing, for errors.Is.
var (
	// ErrUnknownSequence reports a sequence whose znode does not exist.
	ErrUnknownSequence = seqzk.ErrUnknownSequence
	// ErrInvalidName reports a sequence name that cannot be a znode name.
	ErrInvalidName = seqzk.ErrInvalidName
	// ErrCeilingReached reports that a Take found no IDs below the
	// reserved ceiling and no primary raised it within Options.CeilingWait.
	ErrCeilingReached = seqzk.ErrCeilingReached
	// ErrRecreated reports that a write landed on a sequence znode that
	// had been deleted and created again since it was read; nothing was
	// handed out.
	ErrRecreated = seqzk.ErrRecreated
	// ErrUnvalidated reports that a sequence was not validated in the
	// current ZooKeeper epoch within Options.CeilingWait (see
	// State.ZKEpoch): no primary has fast-forwarded it since ZooKeeper
	// elected a new leader, or stamped it since it was created (the
	// primary does once its store holds the new sequence).
	ErrUnvalidated = seqzk.ErrUnvalidated
	// ErrMarkerGone reports that a sequence's state names a marker znode
	// that does not exist (see State.Marker).
	ErrMarkerGone = seqzk.ErrMarkerGone
	// ErrUncertain reports a push whose write may or may not have been
	// applied (see Client.Push and Client.PushOnce).
	ErrUncertain = seqzk.ErrUncertain
	// ErrExhausted reports that a sequence has handed out every ID of its
	// space.
	ErrExhausted = state.ErrExhausted
	// ErrBadPush reports a push refused because accepting it could hand an
	// ID out twice.
	ErrBadPush = state.ErrBadPush
	// ErrCorrupt reports znode data that is not a valid state.
	ErrCorrupt = state.ErrCorrupt
	// ErrInvalidPushKey reports an idempotency key PushOnce cannot record.
	ErrInvalidPushKey = state.ErrInvalidPushKey
	// ErrExists reports a Create of a name that exists with other
	// settings.
	ErrExists = seqzk.ErrExists
	// ErrInvalidSettings reports settings no sequence can have (a
	// negative start, a max below the start, too many windows).
	ErrInvalidSettings = seqzk.ErrInvalidSettings
	// ErrDeleteContended reports a Delete that gave up because the
	// sequence kept changing under it: nothing was deleted. Run it again.
	ErrDeleteContended = seqzk.ErrContended
)

// ValidateName reports whether name can name a sequence: 1 to 200 of
// A-Z a-z 0-9 . _ -, starting with a letter or digit.
func ValidateName(name string) error { return seqzk.ValidateName(name) }

// ValidatePushKey reports whether key can be a PushOnce idempotency key.
func ValidatePushKey(key string) error { return state.ValidatePushKey(key) }

// NormalizeRanges sorts and coalesces ranges, refusing invalid ones.
func NormalizeRanges(in []Range) (Ranges, error) { return state.NormalizeRanges(in) }

// Options configure a Client. The zero value is usable.
type Options struct {
	// Root is the znode under which sequences live. Default DefaultRoot.
	Root string
	// CeilingWait bounds how long Take waits at the ceiling for the
	// primary to raise it before failing with ErrCeilingReached. The
	// caller's context bounds it too. Default DefaultCeilingWait.
	CeilingWait time.Duration
}

// Client takes IDs from and pushes IDs back to sequences in ZooKeeper by
// compare-and-set. It caches each sequence's state and znode version, so an
// uncontended Take costs one ZooKeeper round trip. It is safe for
// concurrent use; calls on the same sequence are serialised within a Client
// (separate Clients, or separate processes, contend through ZooKeeper).
//
// A Client can take, push and read, and create and delete sequences:
// raising ceilings, validating, rotating and restoring sequences are the
// primary's (seqkeeper serve), so that no worker can break the promise
// that no ID is handed out twice.
type Client struct {
	c *seqzk.Client
}

// NewClient returns a Client for the sequences under opts.Root, using the
// ZooKeeper client zk (which it does not close).
func NewClient(zk *zkclient.Client, opts Options) (*Client, error) {
	c, err := seqzk.NewClient(zk, seqzk.Options{Root: opts.Root, CeilingWait: opts.CeilingWait})
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

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
	return c.c.Take(ctx, name, n)
}

// Next hands out a single ID of sequence name. It is Take(ctx, name, 1); a
// program that needs many IDs should use an Allocator.
func (c *Client) Next(ctx context.Context, name string) (int64, error) {
	return c.c.Next(ctx, name)
}

// Push returns IDs of sequence name for reuse; later takes hand them out
// again before fresh ones. It refuses, with an error wrapping ErrBadPush and
// without changing anything, ranges holding IDs the sequence never issued,
// lying outside its space, already recycled, or held by an open window:
// accepting them could hand an ID out twice.
//
// Push only IDs that this process took and will not use. The sequence
// cannot tell them from IDs another process took: an ID counts as issued
// as soon as any process took it into a batch (an Allocator's, a sidecar's),
// long before that process hands it out, and a push of it from elsewhere
// is accepted and then handed out twice. The HTTP API enforces this rule
// for its callers (a replica takes back only IDs it handed out); the
// library cannot, and leaves it to its caller.
//
// Push retries compare-and-set conflicts until ctx is done. If the
// connection is lost before the reply it does not retry, since the first
// write may have been applied and a second would recycle the IDs twice: it
// returns an error wrapping ErrUncertain, and the IDs must be treated as
// lost. PushOnce, given an idempotency key, can retry safely.
func (c *Client) Push(ctx context.Context, name string, ids Ranges) error {
	return c.c.Push(ctx, name, ids)
}

// PushOnce is Push made idempotent by key, an idempotency key naming one
// logical push (see ValidatePushKey; a random UUID per logical push, the
// same on every retry). The key is recorded in the sequence's state in the
// same compare-and-set as the push, so if the state already records key,
// PushOnce changes nothing and returns already = true; otherwise it pushes
// as Push does. Unlike Push it retries after losing a write's reply; it
// returns ErrUncertain only when it cannot tell (see
// internal documentation in docs/guarantees.md), and a later PushOnce with
// the same key settles it.
func (c *Client) PushOnce(ctx context.Context, name, key string, ids Ranges) (already bool, err error) {
	return c.c.PushOnce(ctx, name, key, ids)
}

// Describe reads the current state of sequence name from ZooKeeper,
// bypassing the cache, and the names of its open windows.
func (c *Client) Describe(ctx context.Context, name string) (State, []string, error) {
	return c.c.Describe(ctx, name)
}

// CreateOptions are the settings of a sequence Create registers. The zero
// value asks for the defaults: IDs from 1 to 2^63-1, no windows.
type CreateOptions struct {
	// Start is the first ID (default 1) and Max the last (default
	// 2^63-1).
	Start, Max int64
	// Windows is how many lock-free windows takers may open, about one per
	// concurrent client of a very busy sequence (default 0).
	Windows int
}

// Create registers sequence name with opts; the primary initialises it,
// and a Take may wait a moment for that (up to Options.CeilingWait). It
// creates the root when it is missing. A sequence that exists with the
// same settings is not an error (created is false), so Create can run at
// every start of a program; one that exists with other settings fails
// with an error wrapping ErrExists that says how they differ. Settings
// no sequence can have fail with ErrInvalidSettings. A name deleted before
// starts above every ID its earlier incarnations handed out.
func (c *Client) Create(ctx context.Context, name string, opts CreateOptions) (created bool, err error) {
	r := seqzk.Registration{Start: opts.Start, End: opts.Max, Windows: opts.Windows}
	if err := r.Check(func(f string) string { return strings.ToUpper(f[:1]) + f[1:] }); err != nil {
		return false, err
	}
	return c.c.Operator().Create(ctx, name, r)
}

// A Tombstoner durably records deleted sequences, for Delete: the store
// the primary writes its ceilings to. A *persist.Store is one: open it
// with the primary's store URL and root, persist.Open(ctx, url,
// persist.OpenOptions{}) and persist.NewStore(backend,
// persist.StoreOptions{Root: root}).
type Tombstoner = seqzk.Store

// Delete deletes sequence name for good and returns the tombstone's
// ceiling, the highest ID the sequence may have handed out. The sequence
// leaves ZooKeeper in one transaction that also records the deletion there
// (read again when a take or a raise lands first), and then the store
// records the tombstone, so that a sequence created later under the name
// starts above the ceiling and no restore brings it back. IDs taken from
// the sequence and not used are lost; takers get ErrUnknownSequence once
// it is gone.
//
// It needs the store because ZooKeeper alone cannot promise that: a
// program without the store's credentials deletes through a replica's HTTP
// API (client.Client.Delete) or the CLI (seqkeeper delete). It fails with
// ErrDeleteContended, nothing deleted, if the sequence keeps changing
// under it; run it again. A delete whose store write failed is completed
// by running it again.
func (c *Client) Delete(ctx context.Context, name string, store Tombstoner) (tombstoneCeiling int64, err error) {
	return c.c.Operator().Delete(ctx, name, store)
}

// Window is one open window of a sequence (see Inspect).
type Window = seqzk.Window

// Inspect reads sequence name and each of its open windows from ZooKeeper,
// bypassing the cache and setting no watches. A window deleted between the
// listing and its read is left out.
func (c *Client) Inspect(ctx context.Context, name string) (State, []Window, error) {
	return c.c.Inspect(ctx, name)
}

// Names lists the children of the root, sorted: the sequences' names, and
// any other znode there (check each with ValidateName). A missing root is
// an error wrapping ErrUnknownSequence.
func (c *Client) Names(ctx context.Context) ([]string, error) { return c.c.Names(ctx) }

// Stats are counters of a Client's ZooKeeper traffic, for benchmarks and
// metrics.
type Stats = seqzk.Stats

// Stats returns the client's counters so far.
func (c *Client) Stats() Stats { return c.c.Stats() }

// Epoch returns the ZooKeeper epoch of this client's latest write, 0 before
// the first.
func (c *Client) Epoch() int64 { return c.c.Epoch() }

// Path returns the znode path of sequence name.
func (c *Client) Path(name string) string { return c.c.Path(name) }

// Root returns the znode under which the sequences live.
func (c *Client) Root() string { return c.c.Root() }
