package election

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Candidate node names: _c_<guid>-n_<sequence>. The GUID is what makes a
// create whose reply was lost findable again; the sequence, appended by the
// server, is the place in the queue.
const (
	nodePrefix = "_c_"
	seqMarker  = "-n_"
)

// candidate is one candidacy: one node, in one session.
type candidate struct {
	guid    string
	node    string // full path; empty until created or found
	seq     int64
	session int64 // the session that owns node
	// created is set once a create was sent under guid, so that leave looks
	// for a node even when join never learned the create's outcome;
	// inflight delivers the result of a create that was still running when
	// join gave up waiting.
	created  bool
	inflight <-chan createResult
	// beatWarned is set once the leader's heartbeat warned that it could
	// not write the beat (heartbeat's goroutine alone reads and sets it).
	beatWarned bool
}

type createResult struct {
	path string
	err  error
}

// entry is a parsed child of the candidate directory.
type entry struct {
	name string
	guid string
	seq  int64
}

// parseNode parses a candidate node name. Names that are not candidates (an
// operator's stray node) are ignored by every reader.
func parseNode(name string) (entry, bool) {
	rest, ok := strings.CutPrefix(name, nodePrefix)
	if !ok {
		return entry{}, false
	}
	i := strings.LastIndex(rest, seqMarker)
	if i <= 0 {
		return entry{}, false
	}
	seq, err := strconv.ParseInt(rest[i+len(seqMarker):], 10, 64)
	if err != nil {
		return entry{}, false
	}
	return entry{name: name, guid: rest[:i], seq: seq}, true
}

// sortedCandidates returns the candidates among children, in queue order:
// by the sequence the server appended, never by the whole name, whose GUID
// prefix is random.
func sortedCandidates(children []string) []entry {
	out := make([]entry, 0, len(children))
	for _, name := range children {
		if c, ok := parseNode(name); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// join gives c a node: the one a previous attempt with the same GUID made in
// this session if there is one, else a new one. go-zookeeper's
// CreateProtectedEphemeralSequential does not do for us: it makes up its own
// GUID that the caller never sees, gives up after three attempts or when
// its lookup itself fails (orphaning a node it may have made), and its
// lookup can index past the end of a short foreign name. Looking first also
// makes adoption the ordinary path rather than a rare recovery.
func (e *Election) join(ctx context.Context, c *candidate) error {
	pause := e.retryPolicy()
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		found, owner, err := e.find(ctx, c.guid)
		// Read after find: a node is ours only if the session we have now
		// owns it. One owned by an earlier session of ours goes with that
		// session.
		sid := e.client.SessionID()
		switch {
		case err != nil:
			if errors.Is(err, zkclient.ErrNoNode) || isFatal(err) {
				return err
			}
			if pause.Wait(ctx, failures) != nil {
				return ctx.Err()
			}
			failures++
			continue
		case found != "" && owner == sid:
			c.node, c.session = found, sid
			c.seq = mustSeq(found)
			e.logc(zerolog.InfoLevel, c).Msg("election: adopted candidate node from an earlier create")
			return nil
		case found != "":
			// Another session owns a node with our GUID (an earlier one of
			// ours, whose node dies with it): not ours to take. Start over
			// under a new GUID.
			c.guid, c.created = e.newGUID(), false
			continue
		}

		r, sid, err := e.create(ctx, c)
		if err != nil {
			return err
		}
		switch {
		case r.err == nil && e.client.SessionID() == sid:
			c.node, c.session = r.path, sid
			c.seq = mustSeq(r.path)
			return nil
		case r.err == nil:
			// The session changed around the create (a request queued
			// while disconnected is sent on the next connection): find out
			// which session owns the node.
		case errors.Is(r.err, zkclient.ErrNoNode), isFatal(r.err):
			return r.err
		default:
			// Connection loss or session expiry: the node may or may not
			// exist. Look for it before creating another.
			e.log.Debug().Err(r.err).Str("guid", c.guid).Msg("election: create failed; looking for the node by GUID")
			if pause.Wait(ctx, failures) != nil {
				return ctx.Err()
			}
			failures++
		}
	}
}

// create makes c's node, an ephemeral sequential node named by c.guid, in
// the session current now, and returns the create's outcome and that
// session's ID. It first waits until the election is ready (e.ready). The
// create is not bound to ctx: if ctx ends before its outcome, create
// returns ctx's error and leaves the outcome to come on c.inflight, which
// leave needs.
func (e *Election) create(ctx context.Context, c *candidate) (createResult, int64, error) {
	if err := e.ready(ctx); err != nil {
		return createResult{}, 0, err
	}
	acl := e.leafACL(ctx)
	s := e.client.Session()
	sid := s.ID()
	if e.beforeCreate != nil {
		e.beforeCreate()
	}
	c.created = true
	done := make(chan createResult, 1)
	go func() {
		path, flags := e.path+"/"+nodePrefix+c.guid+seqMarker, zkclient.Ephemeral|zkclient.Sequential
		var p string
		var err error
		if acl != nil {
			p, err = s.CreateWithACL(context.WithoutCancel(ctx), path, e.data, flags, acl)
		} else {
			p, err = s.Create(context.WithoutCancel(ctx), path, e.data, flags)
		}
		done <- createResult{p, err}
	}()
	select {
	case r := <-done:
		return r, sid, nil
	case <-ctx.Done():
		c.inflight = done
		return createResult{}, 0, ctx.Err()
	}
}

// isFatal tells errors that retrying cannot fix.
func isFatal(err error) bool {
	return errors.Is(err, zkclient.ErrNoAuth) || errors.Is(err, zkclient.ErrInvalidACL) || errors.Is(err, zkclient.ErrBadArguments)
}

// retryPolicy spaces the retries of one candidacy's requests.
func (e *Election) retryPolicy() backoff.Policy {
	return backoff.Policy{Initial: 20 * time.Millisecond, Max: max(e.lossAfter/2, 50*time.Millisecond)}
}

func mustSeq(path string) int64 {
	c, _ := parseNode(path[strings.LastIndexByte(path, '/')+1:])
	return c.seq
}

// find returns the candidate node with this GUID and its owner session, or
// "" when there is none.
func (e *Election) find(ctx context.Context, guid string) (node string, owner int64, err error) {
	children, err := call(ctx, e, func(s zkclient.Session) ([]string, error) {
		names, _, err := s.Children(ctx, e.path)
		return names, err
	})
	if err != nil {
		return "", 0, err
	}
	for _, name := range children {
		if c, ok := parseNode(name); !ok || c.guid != guid {
			continue
		}
		p := e.path + "/" + name
		st, err := call(ctx, e, func(s zkclient.Session) (*zkclient.Stat, error) {
			_, st, err := s.Exists(ctx, p)
			return st, err
		})
		if err != nil {
			return "", 0, err
		}
		if st != nil {
			return p, st.EphemeralOwner, nil
		}
	}
	return "", 0, nil
}

// waitTurn returns nil once c is the lowest candidate, having marked its
// node so (markLowest), or why it never will be: its node or session is
// gone, or ctx is done. Between checks it watches only the nearest lower
// candidate, and probes it while that candidate is the lowest.
func (e *Election) waitTurn(ctx context.Context, c *candidate) error {
	changes, stop := e.client.Changes()
	defer stop()
	pause := e.retryPolicy()
	failures := 0
	for {
		if e.client.SessionID() != c.session {
			return ErrSessionLost
		}
		children, err := call(ctx, e, func(s zkclient.Session) ([]string, error) {
			names, _, err := s.Children(ctx, e.path)
			return names, err
		})
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, zkclient.ErrNoNode) || isFatal(err) {
				return err
			}
			if pause.Wait(ctx, failures) != nil {
				return ctx.Err()
			}
			failures++
			continue
		}
		failures = 0
		queue := sortedCandidates(children)
		i := slices.IndexFunc(queue, func(x entry) bool { return e.path+"/"+x.name == c.node })
		switch {
		case i < 0:
			return ErrNodeLost
		case i == 0:
			e.markLowest(ctx, c)
			return nil
		}
		pred := e.path + "/" + queue[i-1].name
		// A data watch, not an exists watch: on a node that is already gone
		// go-zookeeper would keep an exists watch registered for ever.
		p, err := e.readPredecessor(ctx, pred)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // gone already: look again
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			if pause.Wait(ctx, failures) != nil {
				return ctx.Err()
			}
			failures++
			continue
		}
		// A predecessor marked lowest leads, whatever queue we read
		// before it became so.
		next := i == 1 || p.version > 0
		e.logc(zerolog.DebugLevel, c).Str("predecessor", pred).Int("position", i).Bool("next", next).Msg("election: waiting for predecessor")
		if err := e.await(ctx, c, p, next, changes); err != nil {
			return err
		}
	}
}

// await waits until predecessor p's node is gone or changed (or its watch
// ends), or ctx is done, or c's session is replaced. next: p is the lowest
// candidate, whose process is probed (crash.go) and heartbeat read
// (beat.go), and whose node is deleted once the process is gone.
func (e *Election) await(ctx context.Context, c *candidate, p predecessor, next bool, changes <-chan struct{}) error {
	var dead <-chan struct{}
	var silent <-chan stillBeat
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if next {
		dead = e.probe(pctx, p.address)
		silent = e.watchBeat(pctx, c, p)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.gone:
			// Deleted, marked lowest, or the session ended
			// (EventNotWatching): the queue must be read again; the
			// predecessor's departure does not make us the lowest.
			e.wakeups.Add(1)
			return nil
		case <-dead:
			dead = nil
			e.deleteCrashed(ctx, c, p) // its watch then fires
		case b := <-silent:
			silent = nil
			if !e.deleteSilent(ctx, c, p, b) { // else its watch fires
				silent = e.watchBeat(pctx, c, p)
			}
		case <-changes:
			if e.client.SessionID() != c.session {
				return ErrSessionLost
			}
		}
	}
}

// leave deletes c's node, if it has one and its session still has it. While
// Run goes on it keeps trying, because a node left behind in a live session
// would sit ahead of every other candidate with nobody leading; once ctx is
// done it gives up after one session timeout (the node then goes when the
// session ends).
func (e *Election) leave(ctx context.Context, c *candidate) {
	limit := e.client.SessionTimeout()
	if c.node == "" && c.created {
		// join stopped before it knew whether its create made a node: wait
		// for the create still in flight, then look the node up by GUID.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		defer cancel()
		if c.inflight != nil {
			select {
			case r := <-c.inflight:
				if r.err == nil {
					c.node = r.path
				}
			case <-wctx.Done():
			}
		}
		if c.node == "" {
			node, owner, err := e.find(wctx, c.guid)
			if err != nil || node == "" {
				return
			}
			c.node, c.session = node, owner
		}
	}
	if c.node == "" {
		return
	}

	changes, stop := e.client.Changes()
	defer stop()
	pause := e.retryPolicy()
	var expire <-chan time.Time
	for failures := 0; ; failures++ {
		if c.session != 0 && e.client.SessionID() != c.session {
			e.logc(zerolog.InfoLevel, c).Msg("election: left; the node went with its session")
			return
		}
		if expire == nil && ctx.Err() != nil {
			t := time.NewTimer(limit)
			defer t.Stop()
			expire = t.C
		}
		err := e.deleteNode(context.Background(), c.node, zkclient.AnyVersion, limit)
		if err == nil || errors.Is(err, zkclient.ErrNoNode) {
			e.logc(zerolog.InfoLevel, c).Msg("election: left; candidate node deleted")
			return
		}
		if errors.Is(err, zkclient.ErrClosed) { // Close asked the server to end the session; its timeout ends it otherwise
			e.logc(zerolog.InfoLevel, c).Msg("election: left; the client is closed, and the node goes with its session")
			return
		}
		if isFatal(err) {
			e.logc(zerolog.ErrorLevel, c).Err(err).Msg("election: cannot delete candidate node; it stays until the session ends")
			return
		}
		select {
		case <-changes:
		case <-time.After(pause.Delay(failures)):
		case <-expire:
			e.logc(zerolog.WarnLevel, c).Err(err).Msg("election: gave up deleting candidate node; it goes when the session ends")
			return
		}
	}
}

// deleteNode deletes p at version (zkclient.AnyVersion: any), waiting at
// most limit for a session and the reply, or until ctx is done.
func (e *Election) deleteNode(ctx context.Context, p string, version int32, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	_, err := call(ctx, e, func(s zkclient.Session) (struct{}, error) { return struct{}{}, s.Delete(ctx, p, version) })
	return err
}
