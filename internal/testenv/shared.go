package testenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ZK is a ZooKeeper for one test: the servers and a root path no other test
// uses. Code under test must keep everything it creates under Root.
type ZK struct {
	Servers []string
	Root    string
}

var shared struct {
	once    sync.Once
	servers []string
	err     error
}

// ZooKeeper returns the shared ZooKeeper (SEQKEEPER_TEST_ZK, or a standalone
// server started for this test binary) and a fresh root path for t, created
// empty. The root is deleted when the test ends.
func ZooKeeper(t testing.TB) *ZK {
	t.Helper()
	shared.once.Do(func() {
		if env := os.Getenv("SEQKEEPER_TEST_ZK"); env != "" {
			shared.servers = strings.Split(env, ",")
			return
		}
		dir, err := os.MkdirTemp("", "seqkeeper-zk-")
		if err != nil {
			shared.err = err
			return
		}
		e, err := NewEnsemble(dir, 1)
		if err != nil {
			shared.err = err
			return
		}
		shared.err = e.StartAll()
		shared.servers = e.Servers()
	})
	if shared.err != nil {
		t.Fatalf("shared ZooKeeper: %v", shared.err)
	}
	z := &ZK{Servers: shared.servers, Root: "/seqkeeper-test/" + uniqueName(t, 60)}
	conn := Connect(t, z.Servers, 10*time.Second)
	if err := CreateAll(conn, z.Root); err != nil {
		t.Fatalf("create test root %s: %v", z.Root, err)
	}
	t.Cleanup(func() { _ = DeleteAll(conn, z.Root) })
	return z
}

// SequencesRoot creates the test's sequences root (the default's name,
// under the test's own root) and returns its path.
func (z *ZK) SequencesRoot(t testing.TB) string {
	t.Helper()
	root := z.Path("all-sequences")
	if err := CreateAll(Connect(t, z.Servers, 10*time.Second), root); err != nil {
		t.Fatalf("create the sequences root %s: %v", root, err)
	}
	return root
}

// Path joins elements onto the test's root.
func (z *ZK) Path(elem ...string) string {
	return z.Root + "/" + strings.Join(elem, "/")
}

// Connect opens a ZooKeeper session to servers, waits until it is
// established, and closes it when the test ends.
func Connect(t testing.TB, servers []string, sessionTimeout time.Duration) *zkclient.Client {
	t.Helper()
	c, err := ConnectE(servers, sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ConnectE is Connect for code that is not a test; the caller closes the
// client.
func ConnectE(servers []string, sessionTimeout time.Duration) (*zkclient.Client, error) {
	return zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: sessionTimeout})
}

// CreateAll creates path and any missing parents as empty persistent znodes.
func CreateAll(c *zkclient.Client, path string) error {
	return c.EnsurePath(context.Background(), path)
}

// DeleteAll deletes path and everything under it.
func DeleteAll(conn *zkclient.Client, path string) error {
	ctx := context.Background()
	children, _, err := conn.Session().Children(ctx, path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	// Subtrees go 32 at a time (go-zookeeper pipelines them on the one
	// connection): a benchmark's million sequences took over half an hour
	// one after another.
	sem := make(chan struct{}, 32)
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = DeleteAll(conn, path+"/"+c)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	err = conn.Session().Delete(ctx, path, zkclient.AnyVersion)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	return err
}
