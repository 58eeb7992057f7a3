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
package zkclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
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
	// to the session (and re-added by go-zookeeper after reconnects).
	Digest string
	// Logger receives session transitions. Default: disabled.
	Logger *zerolog.Logger
}

// Client is a ZooKeeper session shared by a process's components. It is safe
// for concurrent use.
type Client struct {
	conn *zk.Conn
	// connp publishes conn to the event callback, which can run before
	// zk.Connect has returned.
	connp   atomic.Pointer[zk.Conn]
	servers []string
	timeout time.Duration
	log     zerolog.Logger

	// disconnectedAt is the UnixNano time the session was last seen without
	// a connection, 0 while connected with a session.
	disconnectedAt atomic.Int64
	lastSession    atomic.Int64

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
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
	c := &Client{
		servers: servers,
		timeout: opts.SessionTimeout,
		log:     zerolog.Nop(),
		subs:    make(map[chan struct{}]struct{}),
	}
	if opts.Logger != nil {
		c.log = *opts.Logger
	}
	c.disconnectedAt.Store(time.Now().UnixNano())
	conn, _, err := zk.Connect(servers, opts.SessionTimeout,
		zk.WithLogger(zkLogger{c.log}), zk.WithLogInfo(false), zk.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(servers, ","), err)
	}
	c.conn = conn
	c.connp.Store(conn)
	if opts.Digest != "" {
		if err := conn.AddAuth("digest", []byte(opts.Digest)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zookeeper digest auth: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	ch, stop := c.Changes()
	defer stop()
	for c.conn.State() != zk.StateHasSession {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("%w with %s after %s (state %s): are the servers up and reachable?",
				ErrNoSession, strings.Join(servers, ","), opts.ConnectTimeout, conn.State())
		}
	}
	return c, nil
}

// onEvent runs on go-zookeeper's event loop: it must never block.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		c.disconnectedAt.Store(0)
		if conn := c.connp.Load(); conn != nil {
			id := conn.SessionID()
			if prev := c.lastSession.Swap(id); prev != 0 && prev != id {
				c.log.Warn().Str("session", fmt.Sprintf("0x%x", id)).Str("previous_session", fmt.Sprintf("0x%x", prev)).
					Msg("zookeeper session replaced: the previous session expired")
			} else {
				c.log.Info().Str("session", fmt.Sprintf("0x%x", id)).Str("server", ev.Server).Msg("zookeeper session established")
			}
		}
	case zk.StateDisconnected, zk.StateExpired, zk.StateConnecting:
		if c.disconnectedAt.CompareAndSwap(0, time.Now().UnixNano()) {
			c.log.Warn().Str("state", ev.State.String()).Msg("zookeeper connection lost")
		}
	case zk.StateAuthFailed:
		c.log.Error().Msg("zookeeper authentication failed: check the digest credentials")
	}
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

// Conn is the underlying go-zookeeper connection.
func (c *Client) Conn() *zk.Conn { return c.conn }

// Servers is the server list the client was dialled with.
func (c *Client) Servers() []string { return c.servers }

// SessionTimeout is the requested session timeout.
func (c *Client) SessionTimeout() time.Duration { return c.timeout }

// SessionID is the current session's id, 0 before the first session. It
// changes when go-zookeeper replaces an expired session.
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// State is the connection state.
func (c *Client) State() zk.State { return c.conn.State() }

// DisconnectedFor is how long the client has been without a connected
// session; 0 when connected.
func (c *Client) DisconnectedFor() time.Duration {
	at := c.disconnectedAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

// Close ends the session: its ephemeral nodes go at once.
func (c *Client) Close() { c.conn.Close() }

// zkLogger sends go-zookeeper's own messages to zerolog at debug level.
type zkLogger struct{ log zerolog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug().Msgf("zk: "+format, args...)
}
