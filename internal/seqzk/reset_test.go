package seqzk_test

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// resetConn is a connection whose next write fails as a connection reset
// by the peer does, once armed, and is closed with it.
type resetConn struct {
	net.Conn
	armed *atomic.Bool
}

func (c *resetConn) Write(b []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return c.Conn.Write(b)
}

// A take whose write fails on a reset connection (what a worker saw during
// a whole-ensemble restart: go-zookeeper hands the request the network's
// own error) rides it out: the outcome is unknown, so it reads again and
// takes fresh IDs, as after a lost reply. It used to fail with the raw
// "connection reset by peer".
func TestTakeRidesOutAResetConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var armed atomic.Bool
	zc, err := zkclient.Dial(context.Background(), e.servers, zkclient.Options{
		SessionTimeout: 10 * time.Second,
		Dial: func(network, address string, timeout time.Duration) (net.Conn, error) {
			c, err := net.DialTimeout(network, address, timeout)
			if err != nil {
				return nil, err
			}
			return &resetConn{Conn: c, armed: &armed}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: e.root, CeilingWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.create(e.client(seqzk.Options{}), "s", seqzk.Registration{}, 1000)
	ctx := context.Background()
	first, err := c.Take(ctx, "s", 10)
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	got, err := c.Take(ctx, "s", 10)
	if err != nil {
		t.Fatalf("take across a reset connection: %v", err)
	}
	if armed.Load() {
		t.Fatal("the reset was never injected")
	}
	if got[0].Start <= first[len(first)-1].End {
		t.Fatalf("took %s after %s", got, first)
	}
	if !zkclient.IsTransient(&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.ECONNRESET)}) {
		t.Fatal("a reset connection is not transient")
	}
}
