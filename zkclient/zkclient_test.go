package zkclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDialFailsClearlyWithoutServers(t *testing.T) {
	t.Parallel()
	_, err := zkclient.Dial(context.Background(), []string{"127.0.0.1:1"}, zkclient.Options{ConnectTimeout: 500 * time.Millisecond})
	if !errors.Is(err, zkclient.ErrNoSession) {
		t.Fatalf("err = %v; want ErrNoSession", err)
	}
}

// A wiped server does not know the session any more: go-zookeeper opens a
// new one silently, and Client must make that visible.
func TestSessionReplacementIsVisible(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Writing makes the client remember a zxid the wiped server never saw;
	// the server refuses such a client, so only a new connection recovers.
	if _, err := c.Conn().Create("/x", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	first := c.SessionID()
	if first == 0 || c.DisconnectedFor() != 0 {
		t.Fatalf("after Dial: session %x, disconnected for %s", first, c.DisconnectedFor())
	}
	changes, stop := c.Changes()
	defer stop()

	if err := e.WipeAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() > 0 })
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changes, func() bool { return c.DisconnectedFor() == 0 && c.SessionID() != first })
	if ok, _, err := c.Conn().Exists("/x"); err != nil || ok {
		t.Fatalf("after the wipe: /x exists=%v err=%v; want a working session on the empty server", ok, err)
	}
	t.Logf("new session after %d redials", c.Redials())
}

func waitFor(t *testing.T, changes <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-changes:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("condition not reached in 30s")
		}
	}
}

func TestValidateRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/all-sequences", true},
		{"/a/b", true},
		{"", false},
		{"/", false},
		{"rel", false},
		{"/a/", false},
		{"/a//b", false},
		{"/a/../b", false},
		{"/zookeeper", false},
		{"/zookeeper/x", false},
		{"/zookeeperish", true},
	} {
		if err := zkclient.ValidateRoot(tc.path); (err == nil) != tc.ok {
			t.Errorf("ValidateRoot(%q) = %v; want ok=%v", tc.path, err, tc.ok)
		}
	}
}
