package testenv

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers each line with the same line, and records every line it
// received, so a test can tell "the request arrived" from "the reply
// arrived".
type echoServer struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					e.mu.Lock()
					e.seen = append(e.seen, sc.Text())
					e.mu.Unlock()
					if _, err := c.Write([]byte(sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echoServer) received(line string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.seen {
		if s == line {
			return true
		}
	}
	return false
}

type client struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, rd: bufio.NewReader(c)}
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

// recv reads one line within d; ok is false on timeout, err set when the
// connection broke.
func (c *client) recv(d time.Duration) (line string, ok bool, err error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	s, err := c.rd.ReadString('\n')
	if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSuffix(s, "\n"), true, nil
}

func (c *client) expect(want string) {
	c.t.Helper()
	got, ok, err := c.recv(5 * time.Second)
	if err != nil || !ok || got != want {
		c.t.Fatalf("recv = %q, ok=%v, err=%v; want %q", got, ok, err, want)
	}
}

func (c *client) expectSilence() {
	c.t.Helper()
	if got, ok, err := c.recv(200 * time.Millisecond); ok || err != nil {
		c.t.Fatalf("recv = %q, ok=%v, err=%v; want silence", got, ok, err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, newEchoServer(t).ln.Addr().String())
	c := dial(t, p.Addr())
	c.send("hello")
	c.expect("hello")
}

func TestProxyCutClosesLiveAndBlackHolesNewUntilHeal(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := NewProxy(t, srv.ln.Addr().String())
	live := dial(t, p.Addr())
	live.send("a")
	live.expect("a")

	p.Cut()
	if _, _, err := live.recv(5 * time.Second); err == nil {
		t.Fatal("live connection still open after Cut")
	}
	held := dial(t, p.Addr()) // accepted: a black hole, not a refusal
	held.send("during-cut")
	held.expectSilence()
	if srv.received("during-cut") {
		t.Fatal("bytes sent during Cut reached the server before Heal")
	}

	p.Heal()
	held.expect("during-cut") // delivered late, as after a healed partition
	fresh := dial(t, p.Addr())
	fresh.send("b")
	fresh.expect("b")
}

func TestProxyPauseHoldsBytesWithoutClosing(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := NewProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	c.send("before")
	c.expect("before")

	p.Pause()
	c.send("frozen")
	c.expectSilence()
	if srv.received("frozen") {
		t.Fatal("bytes sent during Pause reached the server")
	}
	p.Resume()
	c.expect("frozen")
}

func TestProxyPauseRepliesLetsRequestsThrough(t *testing.T) {
	t.Parallel()
	srv := newEchoServer(t)
	p := NewProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	c.send("warm-up")
	c.expect("warm-up")

	p.PauseReplies()
	c.send("req")
	waitUntil(t, func() bool { return srv.received("req") })
	c.expectSilence()

	// A cut now loses the reply of a request that took effect.
	p.Cut()
	if _, _, err := c.recv(5 * time.Second); err == nil {
		t.Fatal("connection still open after Cut")
	}
	p.Heal()
	p.Resume()
	c2 := dial(t, p.Addr())
	c2.send("after")
	c2.expect("after")
}

func TestProxyCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	p := NewProxy(t, newEchoServer(t).ln.Addr().String())
	c := dial(t, p.Addr())
	c.send("x")
	c.expect("x")
	p.Close()
	p.Close()
	if _, _, err := c.recv(5 * time.Second); err == nil {
		t.Fatal("connection open after Close")
	}
}
