package integration

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ZooKeeperProxy gives clients in the test process stable addresses for
// the ensemble's servers: a server's host port changes whenever its
// container starts again, and a ZooKeeper client keeps the addresses it
// was given. Each proxy listens on its own local port and forwards every
// new connection to the server's current host port.
type ZooKeeperProxy struct {
	addrs []string
	lns   []net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
	wg    sync.WaitGroup
}

// NewZooKeeperProxy starts a proxy per ZooKeeper server of c, closed when
// the test ends.
func NewZooKeeperProxy(t testing.TB, c *Cluster) *ZooKeeperProxy {
	t.Helper()
	p := &ZooKeeperProxy{conns: map[net.Conn]bool{}}
	t.Cleanup(p.Close)
	for _, n := range c.ZooKeepers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("zookeeper proxy: %v", err)
		}
		p.lns = append(p.lns, ln)
		p.addrs = append(p.addrs, ln.Addr().String())
		p.wg.Go(func() { p.serve(ln, n) })
	}
	return p
}

// Addrs returns the proxies' addresses, one per server, in order.
func (p *ZooKeeperProxy) Addrs() []string { return append([]string(nil), p.addrs...) }

// Close stops the proxies and closes every proxied connection.
func (p *ZooKeeperProxy) Close() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *ZooKeeperProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.done {
			return false
		}
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *ZooKeeperProxy) serve(ln net.Listener, n *Node) {
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(down, n) })
	}
}

func (p *ZooKeeperProxy) forward(down net.Conn, n *Node) {
	defer down.Close()
	addr := n.Addr(ZooKeeperPort)
	if addr == "" {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(down, true) {
		return
	}
	defer p.track(down, false)
	if !p.track(up, true) {
		return
	}
	defer p.track(up, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	// One direction ended: end both, as a dropped connection would.
	up.Close()
	down.Close()
	<-done
}
