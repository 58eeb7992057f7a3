// Package watcher follows the sequences under a root in ZooKeeper and
// reports them as typed events: a sequence appeared, its data changed, it
// went away, and "this is the complete set" after every full
// resynchronisation.
//
// Each sequence has a persistent watch (ZooKeeper 3.6's addWatch), set
// before the sequence is first read on a connection. Notifications carry no
// data, so the watcher never trusts events alone: every notification is
// answered by reading the current data (many sequences per multiRead
// request), children are diffed against what it knew, and after a
// reconnect (the server forgets persistent watches with the connection), a
// new session, or a call to Resync it sets the watches again, reads
// everything and reports what differs. Consumers that must not miss a change (the
// primary) still sweep periodically; see package primary.
//
// The watcher receives notifications through zkclient's event queue rather
// than one goroutine per watch channel, so it can follow a hundred thousand
// sequences, and it never blocks ZooKeeper's event loop.
package watcher

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Kind says what happened to a sequence.
type Kind int

// The kinds of Event.
const (
	// Added: a sequence the watcher did not know (also reported for every
	// sequence on the first sync).
	Added Kind = iota + 1
	// Changed: the sequence znode's data or identity changed (a new version,
	// or a different creation zxid when it was deleted and re-created
	// between two looks).
	Changed
	// Removed: the sequence znode is gone.
	Removed
	// Synced: a full resynchronisation finished; Names holds every sequence
	// that exists. Root is false when the root znode itself is missing (an
	// empty or wiped ensemble).
	Synced
)

func (k Kind) String() string {
	switch k {
	case Added:
		return "added"
	case Changed:
		return "changed"
	case Removed:
		return "removed"
	case Synced:
		return "synced"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Event reports one change. Data, Version, Czxid and Mzxid describe the
// znode as read just now (for Added and Changed).
type Event struct {
	Kind    Kind
	Name    string
	Data    []byte
	Version int32
	Czxid   int64
	Mzxid   int64

	// For Synced.
	Names []string
	Root  bool
}

// Options configure a Watcher.
type Options struct {
	// Parallelism bounds the reads in flight during a full sync; go-zookeeper
	// pipelines them on the one connection. Default 64.
	Parallelism int
	// Logger receives resyncs and errors. Default: disabled.
	Logger *zerolog.Logger
}

// Watcher follows the sequences under one root.
type Watcher struct {
	zk   *zkclient.Client
	root string
	opts Options
	log  zerolog.Logger

	out    chan Event
	resync chan struct{}

	known map[string]meta // the last state reported per sequence

	// wrote holds, per sequence, what its last Wrote reported, until every
	// notification stamped at or below its stamp has been handled.
	wroteMu sync.Mutex
	wrote   map[string]written
}

// written is what Wrote reported of a sequence: the stamp of the write's
// reply, and the state it left.
type written struct {
	stamp uint64
	meta  meta
}

// meta identifies what was last reported of a sequence. The version and
// creation zxid alone do not: after ZooKeeper is restored from an older
// copy, the znode can reach the same version with other data, so the
// modification zxid and a hash of the data take part too.
type meta struct {
	version int32
	// armed: the sequence's data watch is set and has not fired on the
	// current session. A resync reads it without setting the watch again
	// (a watch stays set until it fires; go-zookeeper once kept a channel
	// for every watching read, which grew without bound at every sweep).
	// Kept here rather than in a map of its own: a map entry per sequence
	// cost about 40 bytes at 100,000. Not part of what was reported
	// (same).
	armed bool
	czxid int64
	mzxid int64
	data  uint64
}

// same reports whether m and o describe the same state.
func (m meta) same(o meta) bool {
	m.armed = o.armed
	return m == o
}

// disarm records that name's data watch is not set (it fired, or a read
// failed).
func (w *Watcher) disarm(name string) {
	if m, ok := w.known[name]; ok && m.armed {
		m.armed = false
		w.known[name] = m
	}
}

// dataSeed keys the hashes of meta.data; any seed works.
var dataSeed = maphash.MakeSeed()

// New returns a Watcher for the sequences under root. Call Run to start it.
func New(c *zkclient.Client, root string, opts Options) (*Watcher, error) {
	if c == nil {
		return nil, errors.New("watcher: New needs a zookeeper client")
	}
	if err := zkclient.ValidateRoot(root); err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	if opts.Parallelism == 0 {
		opts.Parallelism = 64
	}
	if opts.Parallelism < 1 {
		return nil, fmt.Errorf("watcher: Parallelism %d must be positive", opts.Parallelism)
	}
	w := &Watcher{zk: c, root: root, opts: opts, log: zerolog.Nop(),
		out: make(chan Event, 256), resync: make(chan struct{}, 1), known: map[string]meta{}, wrote: map[string]written{}}
	if opts.Logger != nil {
		w.log = *opts.Logger
	}
	return w, nil
}

// Events is the stream of events. Run closes it when it returns. Events
// for one sequence arrive in the order they were observed.
func (w *Watcher) Events() <-chan Event { return w.out }

// Resync asks the watcher to read everything again and report differences,
// followed by a Synced event. It does not block.
func (w *Watcher) Resync() {
	select {
	case w.resync <- struct{}{}:
	default:
	}
}

// Wrote tells the watcher that its client wrote data into name's znode:
// res is the write's result (its set's, in a transaction), whose Stamp
// separates the notifications of that write and of earlier ones, which it
// overwrote, from those of later writes. The data-change notifications of
// name stamped at or below it are not read, and the watcher takes data and
// res.Stat as what it last reported of name, as if it had read them:
// nothing is reported for that write, at a resync either. So the caller
// must know the data it wrote as the state of name. Every other
// notification is answered as always: those stamped above res.Stamp are of
// later writes (another client's take right after the write is read and
// reported), and creations and deletions are always read. A result
// without a stamp or a stat says nothing. Safe to call from any goroutine.
func (w *Watcher) Wrote(name string, data []byte, res zkclient.OpResult) {
	if res.Stamp == 0 || res.Stat == nil {
		return
	}
	m := meta{version: res.Stat.Version, czxid: res.Stat.Czxid, mzxid: res.Stat.Mzxid, data: maphash.Bytes(dataSeed, data)}
	w.wroteMu.Lock()
	if old, ok := w.wrote[name]; !ok || old.stamp < res.Stamp {
		w.wrote[name] = written{stamp: res.Stamp, meta: m}
	}
	w.wroteMu.Unlock()
}

// skipWritten drops from evs the data-change notifications that a Wrote
// covers, taking what that write left as known, and forgets what Wrote
// reported once no notification still queued can be stamped at or below
// it (the queue hands notifications over in stamp order).
func (w *Watcher) skipWritten(evs []zkclient.Event) []zkclient.Event {
	if len(evs) == 0 {
		return evs
	}
	w.wroteMu.Lock()
	defer w.wroteMu.Unlock()
	if len(w.wrote) == 0 {
		return evs
	}
	last := evs[len(evs)-1].Stamp
	kept := evs[:0]
	for _, ev := range evs {
		name, ok := strings.CutPrefix(ev.Path, w.root+"/")
		rec, wrote := w.wrote[name]
		if !ok || !wrote || ev.Type != zkclient.EventNodeDataChanged || ev.Stamp > rec.stamp {
			kept = append(kept, ev)
			continue
		}
		// Only forward, on the same incarnation: a resync may have read
		// a later state already.
		if k, ok := w.known[name]; ok && k.czxid == rec.meta.czxid && k.mzxid < rec.meta.mzxid {
			rec.meta.armed = k.armed
			w.known[name] = rec.meta
		}
	}
	for name, rec := range w.wrote {
		if rec.stamp <= last {
			delete(w.wrote, name)
		}
	}
	return kept
}

// Run follows the root until ctx is done, then closes Events and returns
// ctx's error. It blocks while the consumer does not read Events.
func (w *Watcher) Run(ctx context.Context) error {
	defer close(w.out)
	queue, unsubscribe := w.zk.NodeEvents(w.root)
	defer unsubscribe()
	changes, stop := w.zk.Changes()
	defer stop()

	session, conn := int64(0), int64(0)
	connected := true
	needSync := true
	rearm := true // set every watch again: at the start, and after a reconnect or lost watches
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rearm {
			for name := range w.known {
				w.disarm(name)
			}
			rearm = false
		}
		if needSync && w.zk.HasSession() {
			// Notifications that arrive during the sync are handled after
			// it; reading those sequences again is harmless.
			session, conn = w.zk.SessionID(), w.zk.Connection()
			if err := w.fullSync(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.log.Warn().Err(err).Str("root", w.root).Msg("watcher: sync failed; retrying")
				rearm = true // some watches may have been set on a connection now gone
				select {
				case <-ctx.Done():
				case <-changes:
				case <-time.After(retryPause):
				}
				continue
			}
			needSync = false
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.resync:
			needSync = true
		case <-changes:
			has := w.zk.HasSession()
			if has && (!connected || w.zk.SessionID() != session || w.zk.Connection() != conn) {
				// Reconnected (notifications may have been missed, and
				// the server forgot the persistent watches with the
				// connection), or a new session.
				needSync, rearm = true, true
			}
			connected = has
		case <-queue.Ready():
			if err := w.handle(ctx, w.skipWritten(queue.Drain())); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.log.Warn().Err(err).Msg("watcher: handling notifications failed; resyncing")
				needSync, rearm = true, true
			}
		}
	}
}

// retryPause separates attempts at a full sync that failed with a session.
const retryPause = 500 * time.Millisecond

// handle answers a batch of notifications.
func (w *Watcher) handle(ctx context.Context, evs []zkclient.Event) error {
	relist := false
	reread := map[string]bool{}
	for _, ev := range evs {
		switch {
		case ev.Type == zkclient.EventNotWatching:
			return fmt.Errorf("watches lost: %v", ev.Err)
		case ev.Path == w.root:
			relist = true
		default:
			name, ok := strings.CutPrefix(ev.Path, w.root+"/")
			if !ok || strings.Contains(name, "/") {
				continue // a window or something deeper: not ours
			}
			reread[name] = true // its persistent watch stays set
		}
	}
	if relist {
		if err := w.syncChildren(ctx); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(reread))
	for name := range reread {
		names = append(names, name)
	}
	slices.Sort(names)
	// In parallel: a burst of notifications (the primary initialising
	// thousands of sequences) must not queue up behind serial reads.
	return w.readAll(ctx, names)
}

// fullSync re-reads the children and every sequence, reporting differences,
// and ends with a Synced event.
func (w *Watcher) fullSync(ctx context.Context) error {
	names, rootExists, err := w.listChildren(ctx)
	if err != nil {
		return err
	}
	present := setOf(names)
	for name := range w.known {
		if !present[name] {
			if err := w.emit(ctx, Event{Kind: Removed, Name: name}); err != nil {
				return err
			}
			delete(w.known, name)
		}
	}
	if err := w.readAll(ctx, names); err != nil {
		return err
	}
	current := make([]string, 0, len(w.known))
	for name := range w.known {
		current = append(current, name)
	}
	slices.Sort(current)
	w.log.Debug().Str("root", w.root).Int("sequences", len(current)).Bool("root_exists", rootExists).Msg("watcher: synced")
	return w.emit(ctx, Event{Kind: Synced, Names: current, Root: rootExists})
}

// syncChildren re-lists the root after a children notification.
func (w *Watcher) syncChildren(ctx context.Context) error {
	names, _, err := w.listChildren(ctx)
	if err != nil {
		return err
	}
	var added []string
	for _, name := range names {
		if _, ok := w.known[name]; !ok {
			added = append(added, name)
		}
	}
	present := setOf(names)
	for name := range w.known {
		if !present[name] {
			if err := w.emit(ctx, Event{Kind: Removed, Name: name}); err != nil {
				return err
			}
			delete(w.known, name)
		}
	}
	return w.readAll(ctx, added)
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// listChildren lists the root and sets the children watch; if the root is
// missing it sets an existence watch instead, so its creation is noticed.
// The notifications come through the event queue (the Q variants of the
// watching reads keep no channel per watch).
func (w *Watcher) listChildren(ctx context.Context) ([]string, bool, error) {
	s := w.zk.Session()
	names, _, err := s.ChildrenQ(ctx, w.root)
	if errors.Is(err, zkclient.ErrNoNode) {
		exists, _, err := s.ExistsQ(ctx, w.root)
		if err != nil {
			return nil, false, fmt.Errorf("watch %s: %w", w.root, err)
		}
		if exists { // created in between
			return w.listChildren(ctx)
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", w.root, err)
	}
	// Names starting with '.' are seqkeeper's own znodes (the root's
	// .seqkeeper), never sequences: a sequence name starts with a letter
	// or digit.
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, ".") })
	slices.Sort(names)
	return names, true, nil
}
