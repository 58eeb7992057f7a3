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
		out: make(chan Event, 256), resync: make(chan struct{}, 1), known: map[string]meta{}}
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
			if err := w.handle(ctx, queue.Drain()); err != nil {
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

// readChunk is how many sequences readAll reads before it reports them: a
// full sync of 100,000 sequences holding every one's data at once kept 80
// bytes a sequence alive until the last was reported.
const readChunk = 1024

// readAll reads names with bounded parallelism, setting their data watches
// (notified through the event queue), and reports them in order of names.
func (w *Watcher) readAll(ctx context.Context, names []string) error {
	for len(names) > readChunk {
		if err := w.readSome(ctx, names[:readChunk]); err != nil {
			return err
		}
		names = names[readChunk:]
	}
	return w.readSome(ctx, names)
}

// readSome is readAll for at most readChunk names. It first sets the
// persistent watch of every name that has none on this connection, then
// reads them all, many per request: a change after a watch is set is
// notified, so what the read misses is reported next.
//
// Performance: a persistent watch (ZooKeeper 3.6's addWatch) stays set
// when it fires, so a notification is answered by a read that sets
// nothing, and the reads of a batch of notifications go out in multiRead
// requests of up to readBatch znodes, each costing the server about what
// one single read does. With one-shot watches every change cost a read of
// its own to set the watch again: under a load in which every take calls
// for a raise, two reads per raise, more than the take itself
// (docs/performance.md, "Issue 29").
func (w *Watcher) readSome(ctx context.Context, names []string) error {
	s := w.zk.Session()
	conn := w.zk.Connection()
	if err := w.arm(ctx, s, names); err != nil {
		return err
	}
	type batch struct {
		names []string
		reads []zkclient.Read
		err   error
	}
	var batches []*batch
	for rest := names; len(rest) > 0; {
		n := min(len(rest), readBatch)
		batches = append(batches, &batch{names: rest[:n]})
		rest = rest[n:]
	}
	sem := make(chan struct{}, max(1, w.opts.Parallelism/8))
	var wg sync.WaitGroup
	for _, b := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			paths := make([]string, len(b.names))
			for i, name := range b.names {
				paths[i] = w.root + "/" + name
			}
			b.reads, b.err = s.MultiRead(ctx, paths...)
		})
	}
	wg.Wait()
	if w.zk.Connection() != conn {
		// The watches were set on a connection that is gone, and the
		// server forgets persistent watches with it.
		return fmt.Errorf("reconnected while reading %d sequences", len(names))
	}
	for _, b := range batches {
		for i, name := range b.names {
			r := zkclient.Read{Err: b.err}
			if b.err == nil {
				r = b.reads[i]
			}
			if err := w.report(ctx, name, r.Data, r.Stat, r.Err); err != nil {
				return err
			}
		}
	}
	return nil
}

// readBatch is how many znodes one multiRead reads: a sequence's state is
// at most about 40 KB (a recycled list at its cap), and 32 of those fit
// the client's 1.5 MB buffer for one reply.
const readBatch = 32

// arm sets the persistent watch of each of names that has none set on the
// current connection, in parallel.
func (w *Watcher) arm(ctx context.Context, s zkclient.Session, names []string) error {
	sem := make(chan struct{}, w.opts.Parallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, name := range names {
		if w.known[name].armed {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.AddWatch(ctx, w.root+"/"+name, false); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("watch %s/%s: %w", w.root, name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil // report marks each name read as armed
}

// report emits what a read of name found, if it differs from what was
// reported before. After a read that succeeded the sequence's data watch
// is set: by that read, or by an earlier one whose watch has not fired
// (readSome set it again otherwise).
func (w *Watcher) report(ctx context.Context, name string, data []byte, stat *zkclient.Stat, err error) error {
	if errors.Is(err, zkclient.ErrNoNode) {
		if _, ok := w.known[name]; !ok {
			return nil
		}
		delete(w.known, name)
		return w.emit(ctx, Event{Kind: Removed, Name: name})
	}
	if err != nil {
		w.disarm(name)
		return fmt.Errorf("read %s/%s: %w", w.root, name, err)
	}
	m := meta{version: stat.Version, armed: true, czxid: stat.Czxid, mzxid: stat.Mzxid, data: maphash.Bytes(dataSeed, data)}
	old, ok := w.known[name]
	w.known[name] = m
	if ok && old.same(m) {
		return nil
	}
	kind := Changed
	if !ok {
		kind = Added
	}
	return w.emit(ctx, Event{Kind: kind, Name: name, Data: data, Version: stat.Version, Czxid: stat.Czxid, Mzxid: stat.Mzxid})
}

func (w *Watcher) emit(ctx context.Context, ev Event) error {
	select {
	case w.out <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
