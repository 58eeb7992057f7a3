package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between clients under test and one server, so a test
// can break the network of one client without touching the server or the
// other clients. Clients connect to Addr instead of the server.
//
// The network has three faults, which combine:
//
//   - Cut closes every live connection (both ends see it at once, as after a
//     reset) and black-holes new ones until Heal: they are accepted but
//     nothing is forwarded. A black hole rather than a refusal, because that
//     is what a partition looks like to a client: its connection attempt
//     hangs instead of failing fast, so its reconnect loop runs at the pace
//     of a real outage. At Heal the held connections are connected to the
//     server and what the client sent meanwhile is delivered, as TCP
//     retransmission would after a partition heals.
//   - Pause freezes every connection, live and new, without closing any:
//     bytes are held (in the proxy and the kernel buffers) and delivered at
//     Resume. Neither end notices anything but silence, so a client only
//     learns of it through its own timeouts.
//   - PauseReplies freezes only the server-to-client direction: requests
//     still reach the server and take effect, their replies are held. With
//     Cut it models a request that succeeded but whose reply was lost.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	cut     bool
	paused  bool
	replies bool // server-to-client direction paused
	closed  bool
	links   map[*link]struct{}
	// changed is closed and replaced on every change of the flags above, to
	// wake the goroutines waiting for traffic to flow again.
	changed chan struct{}

	wg sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client net.Conn
	done   chan struct{}

	mu     sync.Mutex
	closed bool
	server net.Conn // nil until the connection may flow and the server is dialled
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// connect attaches the server side, unless the link was closed meanwhile.
func (l *link) connect(s net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.server = s
	return true
}

// NewProxy starts a proxy to target (host:port) on a free loopback port and
// stops it, closing every connection, when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy to %s: %v", target, err)
	}
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{}), changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every live connection and black-holes new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinks()
	p.notify()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Heal ends a Cut: connections accepted during it are connected to the
// target, and new ones are forwarded at once (unless paused).
func (p *Proxy) Heal() { p.set(func() { p.cut = false }) }

// Pause freezes every connection, live and new, in both directions, without
// closing any, until Resume.
func (p *Proxy) Pause() { p.set(func() { p.paused = true }) }

// PauseReplies freezes the server-to-client direction only, until Resume.
func (p *Proxy) PauseReplies() { p.set(func() { p.replies = true }) }

// Resume ends Pause and PauseReplies: held bytes are delivered.
func (p *Proxy) Resume() { p.set(func() { p.paused, p.replies = false, false }) }

// Close stops the proxy and closes every connection. Safe to call twice.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	links := p.takeLinks()
	p.notify()
	p.mu.Unlock()
	p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	f()
	p.notify()
	p.mu.Unlock()
}

// notify wakes every waiter; p.mu must be held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// takeLinks empties the link set and returns what it held; p.mu must be held.
func (p *Proxy) takeLinks() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	clear(p.links)
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve holds a new connection while the network is cut or paused, then
// connects it to the target and forwards both ways until either end closes
// or the proxy cuts it.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer p.drop(l)
	if !p.waitFlow(l, false) {
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the server is down: the client sees its connection closed
	}
	if !l.connect(s) { // cut while dialling
		s.Close()
		return
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, l.client, s, true) }()
	go func() { defer wg.Done(); p.pipe(l, s, l.client, false) }()
	wg.Wait()
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// pipe copies src to dst, holding each chunk while that direction is
// frozen. Either side failing ends the whole link, as a broken TCP
// connection would.
func (p *Proxy) pipe(l *link, dst, src net.Conn, reply bool) {
	defer l.close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitFlow(l, reply) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitFlow blocks until bytes may flow in the given direction, and reports
// false when the link was closed meanwhile.
func (p *Proxy) waitFlow(l *link, reply bool) bool {
	for {
		p.mu.Lock()
		flowing := !p.cut && !p.paused && !(reply && p.replies)
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-l.done:
			return false
		default:
		}
		if flowing {
			return true
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}
