// Package zkclient is seqkeeper's thin layer over go-zookeeper: one
// ZooKeeper session shared by every component of a process, with the session
// bookkeeping that go-zookeeper leaves to its users.
//
// go-zookeeper delivers session events through one callback that must never
// block, and after a session expires it silently opens a new session on the
// same *zk.Conn. Client turns that into state that components can poll
// (SessionID, State, DisconnectedFor) plus a non-blocking change signal
// (Changes). A component that must not act on a lost session (the primary,
// a client holding a cached znode version) compares SessionID before and
// after, and treats a long disconnect as a possibly expired session.
//
// Requests go through a Session, the client's connection at one moment
// (Client.Session): requests that must share a connection (a read and the
// write it decides, the watches of one view) take one Session and use it
// throughout; Session.Current tells whether it is still the client's.
package zkclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
)

// Defaults for Options.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultConnectTimeout = 30 * time.Second
)

// ErrNoSession is returned by Dial when no session could be established.
var ErrNoSession = errors.New("no zookeeper session")

// Options configure a Client. The zero value is usable.
type Options struct {
	// SessionTimeout is requested from the servers. It must lie within the
	// servers' minSessionTimeout..maxSessionTimeout (by default 2 to 20
	// ticks): components derive safety margins from it, so a server that
	// negotiated a shorter timeout would make them act too late. Default 10s.
	SessionTimeout time.Duration
	// ConnectTimeout bounds how long Dial waits for the first session.
	ConnectTimeout time.Duration
	// Digest is "user:password" for ZooKeeper digest authentication, added
	// to the session (and re-added by go-zookeeper after reconnects). With
	// it, the znodes the client creates give all permissions to that user
	// only; without it, to everyone.
	Digest string
	// RedialAfter replaces the connection with a new one once the client
	// has been without a session this long. A server that lost its data
	// (wiped, replaced, or restored from an older copy) refuses clients
	// that have seen a newer zxid, and go-zookeeper would retry that
	// refused connection forever; a new connection starts from zxid 0.
	// Default: twice the session timeout, when the old session is expired
	// on any server that still knows it.
	RedialAfter time.Duration
	// Logger receives session transitions. Default: disabled.
	Logger *zerolog.Logger
	// ObserveRequest, if set, is called after every request with its kind
	// ("get", "children", "exists", "create", "set", "delete", "sync",
	// "multi") and how long the round trip took, failed or not (for a
	// latency histogram). It runs on the request's goroutine: keep it fast.
	ObserveRequest func(op string, d time.Duration)
	// Dial, if set, opens the connection to one server instead of a plain
	// TCP dial: a transport of the caller's (TLS, a proxy), or a test's
	// that fails on purpose. Default net.DialTimeout.
	Dial func(network, address string, timeout time.Duration) (net.Conn, error)
	// TLS, if set, makes every connection TLS (ZooKeeper's
	// secureClientPort, served by its NettyServerCnxnFactory) with a clone
	// of this configuration, over Dial's connection. An empty ServerName is
	// the name of the server being dialled, as given in the server list.
	// With a client certificate, ZooKeeper's x509 scheme makes the
	// certificate's subject the session's identity: see ACL. Certificates
	// that change on disk are picked up by GetClientCertificate and
	// VerifyConnection, which run at every handshake.
	TLS *tls.Config
	// ACL is given to the znodes the client creates. Default: all
	// permissions to the Digest user if there is one, else to everyone
	// (ZooKeeper's OPEN_ACL_UNSAFE).
	ACL []ACL
}

// errNoHosts marks a connection that could not start because no server
// name resolved.
var errNoHosts = errors.New("no server address resolves")

// Client is a ZooKeeper session shared by a process's components. It is safe
// for concurrent use.
type Client struct {
	// conn is the current connection; Redial replaces it. Components must
	// call Conn for every request rather than keep the *zk.Conn.
	conn    atomic.Pointer[link]
	gen     atomic.Int64 // generation of conn; events of older ones are dropped
	servers []string
	opts    Options
	acl     []zk.ACL // of the znodes the client creates
	log     zerolog.Logger
	// lastDialErr is the last connection attempt's failure (a refused port,
	// a failed TLS handshake), nil once one succeeds: Dial's error names it.
	lastDialErr atomic.Pointer[error]

	// disconnectedAt is the UnixNano time the session was last seen without
	// a connection, 0 while connected with a session.
	disconnectedAt atomic.Int64
	lastSession    atomic.Int64
	redials        atomic.Int64
	// connects counts the sessions established or re-established: every
	// reconnect, even to the same session, changes it.
	connects atomic.Int64
	// watchesSet counts the requests that set a watch (the W and Q reads):
	// go-zookeeper keeps a channel per such request until its watch fires.
	watchesSet atomic.Int64

	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
	queues map[*EventQueue]struct{}
	stamp  uint64 // the last Event.Stamp dispatched (under mu)

	done chan struct{}
	once sync.Once
}

// Dial connects to servers and waits, bounded by ctx and
// Options.ConnectTimeout, until a session is established.
func Dial(ctx context.Context, servers []string, opts Options) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("zookeeper: no servers given (want host:port[,host:port...])")
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.RedialAfter == 0 {
		opts.RedialAfter = 2 * opts.SessionTimeout
	}
	c := &Client{
		servers: servers,
		opts:    opts,
		log:     zerolog.Nop(),
		subs:    make(map[chan struct{}]struct{}),
		queues:  make(map[*EventQueue]struct{}),
		done:    make(chan struct{}),
		acl:     zk.WorldACL(zk.PermAll),
	}
	if user, password, ok := strings.Cut(opts.Digest, ":"); ok {
		c.acl = zk.DigestACL(zk.PermAll, user, password)
	}
	if len(opts.ACL) > 0 {
		c.acl = toZK(opts.ACL)
	}
	if opts.Logger != nil {
		c.log = *opts.Logger
	}
	c.disconnectedAt.Store(time.Now().UnixNano())
	ch, stop := c.Changes()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	// Server names that do not resolve yet (a ZooKeeper starting beside
	// this process, in Kubernetes or docker-compose) are waited for like
	// servers that do not answer yet.
	for {
		err := c.connect()
		if err == nil {
			break
		}
		if !errors.Is(err, errNoHosts) {
			return nil, err
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w with %s after %s: %w: are the names right, and does DNS serve them yet?",
				ErrNoSession, strings.Join(servers, ","), opts.ConnectTimeout, err)
		}
	}
	for c.state() != zk.StateHasSession {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			state := c.state()
			c.Close()
			last := c.lastDialErr.Load()
			if last != nil && errors.Is(*last, ErrTLS) {
				return nil, fmt.Errorf("%w with %s after %s (state %s): %w",
					ErrNoSession, strings.Join(servers, ","), opts.ConnectTimeout, stateName(state), *last)
			}
			hint := "are the servers up and reachable?"
			if opts.TLS == nil {
				hint += " If ZooKeeper serves TLS only (a secureClientPort), configure TLS (zk_tls_ca_file)"
			}
			if last != nil {
				hint += fmt.Sprintf(" (last error: %v)", *last)
			}
			return nil, fmt.Errorf("%w with %s after %s (state %s): %s",
				ErrNoSession, strings.Join(servers, ","), opts.ConnectTimeout, stateName(state), hint)
		}
	}
	go c.redialLoop()
	return c, nil
}

// connect opens a new connection and makes it the current one.
func (c *Client) connect() error {
	c.mu.Lock() // under mu: stampAt and dispatch compare generations under it
	gen := c.gen.Add(1)
	c.mu.Unlock()
	var self atomic.Pointer[zk.Conn]
	w := &watches{m: make(map[watchKey][]chan Event)}
	hosts := zk.NewDNSHostProvider(zk.WithSkipUnresolvable(func(server string, err error) {
		c.log.Warn().Str("server", server).Err(err).Msg("zookeeper: a server name does not resolve; using the others")
	}))
	var dial func(string, string, time.Duration) (net.Conn, error) = c.recordDial(net.DialTimeout)
	if c.opts.Dial != nil {
		dial = c.recordDial(c.opts.Dial)
	}
	if c.opts.TLS != nil {
		dial = c.tlsDial(dial, c.opts.TLS)
	}
	conn, _, err := zk.Connect(c.servers, c.opts.SessionTimeout,
		zk.WithLogger(zkLogger{c.log}), zk.WithLogInfo(false), zk.WithHostProvider(hosts), zk.WithDialer(dial),
		zk.WithEventCallback(func(ev zk.Event) {
			// Watches first, on every connection, current or not: a
			// replaced connection's watches still end (NotWatching).
			w.fire(ev)
			if c.gen.Load() == gen {
				c.onEvent(gen, self.Load(), ev)
			}
		}))
	if err != nil {
		// It fails only when no server name resolves (WithSkipUnresolvable).
		return fmt.Errorf("zookeeper %s: %w: %w", strings.Join(c.servers, ","), errNoHosts, err)
	}
	self.Store(conn)
	if c.opts.Digest != "" {
		if err := conn.AddAuth("digest", []byte(c.opts.Digest)); err != nil {
			conn.Close()
			return fmt.Errorf("zookeeper digest auth: %w", err)
		}
	}
	if old := c.conn.Swap(&link{Conn: conn, watches: w, gen: gen}); old != nil {
		old.Close()
	}
	return nil
}

// redialLoop replaces a connection that has been without a session for
// RedialAfter.
func (c *Client) redialLoop() {
	t := time.NewTicker(min(c.opts.RedialAfter/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if d := c.DisconnectedFor(); d >= c.opts.RedialAfter {
			c.log.Warn().Int64("disconnected_for_ms", d.Milliseconds()).Msg("zookeeper: no session for too long; opening a new connection (the servers may have lost their data)")
			c.disconnectedAt.Store(time.Now().UnixNano())
			if err := c.connect(); err != nil {
				c.log.Error().Err(err).Msg("zookeeper: reconnect failed")
				continue
			}
			c.redials.Add(1)
			c.notify()
		}
	}
}

// onEvent runs on go-zookeeper's event loop: it must never block.
func (c *Client) onEvent(gen int64, conn *zk.Conn, ev zk.Event) {
	if ev.Type != zk.EventSession {
		c.dispatch(gen, ev)
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		c.connects.Add(1)
		c.disconnectedAt.Store(0)
		if conn != nil {
			id := conn.SessionID()
			if prev := c.lastSession.Swap(id); prev != 0 && prev != id {
				c.log.Warn().Str("session", fmt.Sprintf("0x%x", id)).Str("previous_session", fmt.Sprintf("0x%x", prev)).
					Msg("zookeeper session replaced: the previous session expired")
			} else {
				c.log.Info().Str("session", fmt.Sprintf("0x%x", id)).Str("server", ev.Server).Msg("zookeeper session established")
			}
		}
	case zk.StateDisconnected, zk.StateExpired, zk.StateConnecting:
		if c.disconnectedAt.CompareAndSwap(0, time.Now().UnixNano()) && !c.isClosed() {
			c.log.Warn().Str("state", ev.State.String()).Msg("zookeeper connection lost")
		}
	case zk.StateAuthFailed:
		c.log.Error().Msg("zookeeper authentication failed: check the digest credentials")
	}
	c.notify()
}

// notify signals every Changes subscriber without blocking.
func (c *Client) notify() {
	c.mu.Lock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending; the subscriber will re-read state
		}
	}
	c.mu.Unlock()
}

// Changes returns a channel that receives a value after every session state
// change (it never blocks ZooKeeper: signals coalesce), and a function that
// unsubscribes. Read SessionID, State and DisconnectedFor after a signal.
func (c *Client) Changes() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}
}

// Connection identifies the current connection: it changes every time the
// client (re)connects, whether or not the session survived. go-zookeeper
// reports a new connection before it sends any request on it, so a value
// read before a request and found unchanged after its reply proves the
// request and the reply travelled on one connection.
//
// Anything read from ZooKeeper may be cached only while Connection is
// unchanged: a reconnect may follow a leader election, and a leader
// election may follow a restore of the ensemble from an older copy, after
// which a session that survived sees no watch fire for what it lost.
func (c *Client) Connection() int64 { return c.connects.Load() }

// WatchesSet counts the reads that set a watch (GetW, ChildrenW, ExistsW
// and their Q forms). go-zookeeper keeps a channel for each until its watch
// fires, so a caller that sets watches again and again on znodes that do
// not change makes this, and memory, grow.
func (c *Client) WatchesSet() int64 { return c.watchesSet.Load() }

// Redials counts connections replaced after a long disconnect.
func (c *Client) Redials() int64 { return c.redials.Load() }

// Servers is the server list the client was dialled with.
func (c *Client) Servers() []string { return c.servers }

// Server is the address (one of Servers) of the server the current
// connection is connected to, or was last connected to while it
// reconnects.
func (c *Client) Server() string { return c.conn.Load().Server() }

// SessionTimeout is the requested session timeout.
func (c *Client) SessionTimeout() time.Duration { return c.opts.SessionTimeout }

// SessionID is the current session's id, 0 before the first session. It
// changes when go-zookeeper replaces an expired session.
func (c *Client) SessionID() int64 { return c.conn.Load().SessionID() }

// HasSession reports whether the client is connected with a session.
func (c *Client) HasSession() bool { return c.state() == zk.StateHasSession }

func (c *Client) state() zk.State { return c.conn.Load().State() }

// State names the connection state in a word, for status pages and logs:
// "has_session", "connecting", "connected" (no session yet),
// "disconnected", "expired", "auth_failed" or "unknown".
func (c *Client) State() string { return stateName(c.state()) }

func stateName(s zk.State) string {
	switch s {
	case zk.StateHasSession:
		return "has_session"
	case zk.StateConnecting:
		return "connecting"
	case zk.StateConnected, zk.StateSyncConnected, zk.StateConnectedReadOnly, zk.StateSaslAuthenticated:
		return "connected"
	case zk.StateDisconnected:
		return "disconnected"
	case zk.StateExpired:
		return "expired"
	case zk.StateAuthFailed:
		return "auth_failed"
	}
	return "unknown"
}

// DisconnectedFor is how long the client has been without a connected
// session; 0 when connected.
func (c *Client) DisconnectedFor() time.Duration {
	at := c.disconnectedAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close ends the session: its ephemeral nodes go at once.
func (c *Client) Close() {
	c.once.Do(func() { close(c.done) })
	if conn := c.conn.Load(); conn != nil {
		conn.Close()
	}
}

// zkLogger sends go-zookeeper's own messages to zerolog at debug level.
type zkLogger struct{ log zerolog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug().Msgf("zk: "+format, args...)
}
