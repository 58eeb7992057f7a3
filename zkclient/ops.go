package zkclient

import (
	"context"
	"time"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
)

// Stat is a znode's metadata.
type Stat struct {
	Czxid       int64 // zxid of the change that created the znode
	Mzxid       int64 // zxid of the change that last modified its data
	Pzxid       int64 // zxid of the change that last modified its children
	Version     int32 // number of changes to its data
	Cversion    int32 // number of changes to its children
	NumChildren int32
	// EphemeralOwner is the session that owns an ephemeral znode, else 0.
	EphemeralOwner int64
	DataLength     int32
	Ctime, Mtime   int64 // milliseconds since the epoch
}

func stat(s *zk.Stat) *Stat {
	if s == nil {
		return nil
	}
	return &Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid,
		Version: s.Version, Cversion: s.Cversion, NumChildren: s.NumChildren,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		Ctime: s.Ctime, Mtime: s.Mtime,
	}
}

// CreateFlags choose the kind of znode Create makes.
type CreateFlags int32

const (
	// Ephemeral znodes are deleted when their session ends.
	Ephemeral CreateFlags = zk.FlagEphemeral
	// Sequential znodes get a 10-digit counter appended to their name.
	Sequential CreateFlags = zk.FlagSequence
)

// AnyVersion matches every version in Set, Delete and Check.
const AnyVersion int32 = -1

// Session is one connection of a Client. Operations on it go to that
// connection only: after the client replaces it (see Client), they fail
// with ErrClosing, so that a caller that read something on one connection
// cannot act on it through another by mistake. Client's own operations
// use the current connection.
type Session struct {
	c    *Client
	conn *link
}

// link is one go-zookeeper connection and the watches set through it.
type link struct {
	*zk.Conn
	watches *watches
	gen     int64 // Client.gen while this connection is the client's
}

// Session returns the client's current connection.
func (c *Client) Session() Session { return Session{c: c, conn: c.conn.Load()} }

// ID is the ZooKeeper session ID of the connection, 0 before one is
// established. go-zookeeper opens a new session on the same connection after
// its session expires, so the ID can change; compare it to detect expiry.
func (s Session) ID() int64 { return s.conn.SessionID() }

// watch counts a request that sets a watch and returns its connection.
func (s Session) watch() *link {
	s.c.watchesSet.Add(1)
	return s.conn
}

// Current reports whether s is still the client's connection.
func (s Session) Current() bool { return s.c.conn.Load() == s.conn }

// run calls f, or returns early with ctx's error when ctx ends first. A
// request already sent cannot be withdrawn: it completes in the background
// (go-zookeeper fails every request when its connection drops or closes),
// so a write abandoned this way may still be applied. A caller that must
// know a write's outcome passes context.WithoutCancel(ctx): the request then
// runs to its reply, or to its failure when the connection drops.
//
// op names the request for Options.ObserveRequest.
func run[T any](ctx context.Context, s Session, op string, f func() (T, error)) (T, error) {
	var zero T
	if s.c.isClosed() {
		return zero, ErrClosed
	}
	if observe := s.c.opts.ObserveRequest; observe != nil {
		g := f
		f = func() (T, error) {
			start := time.Now()
			v, err := g()
			observe(op, time.Since(start))
			return v, err
		}
	}
	if ctx.Done() == nil {
		v, err := f()
		return v, s.c.wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, s.c.wrap(r.err)
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// wrap turns ErrClosing into ErrClosed once the client is closed, so that
// retry loops, which retry ErrClosing, stop.
func (c *Client) wrap(err error) error {
	if err == zk.ErrClosing && c.isClosed() {
		return ErrClosed
	}
	return err
}

type read struct {
	data []byte
	st   *zk.Stat
}

type list struct {
	names []string
	st    *zk.Stat
}

// Get returns a znode's data and stat.
func (s Session) Get(ctx context.Context, path string) ([]byte, *Stat, error) {
	r, err := run(ctx, s, "get", func() (read, error) {
		d, st, err := s.conn.Get(path)
		return read{d, st}, err
	})
	return r.data, stat(r.st), err
}

// GetW is Get that also sets a watch on the znode's data: the channel
// receives one event, when the data changes, the znode is deleted, or the
// watch is lost with its connection or session (EventNotWatching), and is
// then closed.
//
// As ZooKeeper promises, the event reaches the channel before the reply of
// any later request on the same connection: a caller that sees its own
// write succeed can rely on a non-blocking receive to tell whether the
// watch fired before it.
func (s Session) GetW(ctx context.Context, path string) ([]byte, *Stat, <-chan Event, error) {
	ch := s.conn.watches.add(path, dataWatch)
	data, st, err := s.GetQ(ctx, path)
	if err != nil {
		s.conn.watches.remove(path, dataWatch, ch)
		return nil, nil, nil, err
	}
	return data, st, ch, nil
}

// Read is one znode's result in a MultiRead: its data and stat, or its
// own error (ErrNoNode for a znode that does not exist).
type Read struct {
	Data []byte
	Stat *Stat
	Err  error
}

// MultiRead reads many znodes in one request (ZooKeeper 3.6's multiRead):
// one Read per path, in order. It is not a transaction: each znode is read
// as it is when the server reaches it. It sets no watch; AddWatch sets
// watches that need no read to stay set.
//
// Performance: one request costs the server about as much as a single
// read (docs/performance.md, "Raises and the pace of ZooKeeper"), so a
// watcher that reads what a batch of notifications names pays one
// request, not one per znode.
func (s Session) MultiRead(ctx context.Context, paths ...string) ([]Read, error) {
	rs, err := run(ctx, s, "multiRead", func() ([]zk.ReadResult, error) { return s.conn.MultiRead(paths...) })
	if err != nil {
		return nil, err
	}
	out := make([]Read, len(rs))
	for i, r := range rs {
		out[i] = Read{Data: r.Data, Stat: stat(r.Stat), Err: r.Error}
	}
	return out, nil
}

// AddWatch sets a persistent watch on path (ZooKeeper 3.6's addWatch):
// it stays set after it fires and notifies every change of the znode, its
// data, its children, its creation and deletion (with recursive, of every
// znode under it too), through the queues of NodeEvents only. The server
// drops it with the connection: after a reconnect (Changes), set it again.
// Setting it twice is harmless.
//
// A one-shot watch (GetW, ExistsW, ChildrenW, and their Q forms) set
// afterwards on the same connection and znode is not sent to the server
// (the vendored go-zookeeper's send loop clears its flag): the
// persistent watch's notifications fire it, and the two never end each
// other.
func (s Session) AddWatch(ctx context.Context, path string, recursive bool) error {
	_, err := run(ctx, s, "addWatch", func() (struct{}, error) { return struct{}{}, s.watch().AddWatch(path, recursive) })
	return err
}

// Children returns the names of a znode's children, unsorted.
func (s Session) Children(ctx context.Context, path string) ([]string, *Stat, error) {
	r, err := run(ctx, s, "children", func() (list, error) {
		names, st, err := s.conn.Children(path)
		return list{names, st}, err
	})
	return r.names, stat(r.st), err
}

// ChildrenW is Children that also sets a watch on the list of children,
// which also fires when the znode is deleted (see GetW).
func (s Session) ChildrenW(ctx context.Context, path string) ([]string, *Stat, <-chan Event, error) {
	ch := s.conn.watches.add(path, childWatch)
	names, st, err := s.ChildrenQ(ctx, path)
	if err != nil {
		s.conn.watches.remove(path, childWatch, ch)
		return nil, nil, nil, err
	}
	return names, st, ch, nil
}

// Exists reports whether a znode exists, with its stat if it does.
func (s Session) Exists(ctx context.Context, path string) (bool, *Stat, error) {
	r, err := run(ctx, s, "exists", func() (read, error) {
		ok, st, err := s.conn.Exists(path)
		if !ok {
			st = nil
		}
		return read{st: st}, err
	})
	return r.st != nil, stat(r.st), err
}

// ExistsW is Exists that also sets a watch: on creation if the znode does
// not exist, else on its data and deletion (see GetW).
func (s Session) ExistsW(ctx context.Context, path string) (bool, *Stat, <-chan Event, error) {
	ch := s.conn.watches.add(path, dataWatch)
	ok, st, err := s.ExistsQ(ctx, path)
	if err != nil {
		s.conn.watches.remove(path, dataWatch, ch)
		return false, nil, nil, err
	}
	return ok, st, ch, nil
}

// GetQ, ChildrenQ and ExistsQ set the same watches as GetW, ChildrenW and
// ExistsW but return no channel: the notification reaches only the queues
// of NodeEvents. A subscriber that watches many znodes uses them, so that
// no channel is kept per watch until it fires, here or in go-zookeeper
// (its GetWQ and friends, added in the vendored copy).

// GetQ is GetW without the channel.
func (s Session) GetQ(ctx context.Context, path string) ([]byte, *Stat, error) {
	r, err := run(ctx, s, "get", func() (read, error) {
		d, st, err := s.watch().GetWQ(path)
		return read{d, st}, err
	})
	return r.data, stat(r.st), err
}

// ChildrenQ is ChildrenW without the channel.
func (s Session) ChildrenQ(ctx context.Context, path string) ([]string, *Stat, error) {
	r, err := run(ctx, s, "children", func() (list, error) {
		names, st, err := s.watch().ChildrenWQ(path)
		return list{names, st}, err
	})
	return r.names, stat(r.st), err
}

// ExistsQ is ExistsW without the channel.
func (s Session) ExistsQ(ctx context.Context, path string) (bool, *Stat, error) {
	r, err := run(ctx, s, "exists", func() (read, error) {
		ok, st, err := s.watch().ExistsWQ(path)
		if !ok {
			st = nil
		}
		return read{st: st}, err
	})
	return r.st != nil, stat(r.st), err
}

// Create makes a znode with the client's ACL and returns its path (which
// differs from path for Sequential znodes).
func (s Session) Create(ctx context.Context, path string, data []byte, flags CreateFlags) (string, error) {
	return run(ctx, s, "create", func() (string, error) {
		return s.conn.Create(path, data, int32(flags), s.c.acl)
	})
}

// Set replaces a znode's data if its version is version (AnyVersion: any).
func (s Session) Set(ctx context.Context, path string, data []byte, version int32) (*Stat, error) {
	st, err := run(ctx, s, "set", func() (*zk.Stat, error) { return s.conn.Set(path, data, version) })
	return stat(st), err
}

// Delete removes a znode if its version is version (AnyVersion: any).
func (s Session) Delete(ctx context.Context, path string, version int32) error {
	_, err := run(ctx, s, "delete", func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, version) })
	return err
}

// Sync waits until the server the session is connected to has caught up
// with the leader on path.
func (s Session) Sync(ctx context.Context, path string) error {
	_, err := run(ctx, s, "sync", func() (string, error) { return s.conn.Sync(path) })
	return err
}
