package primary_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// gatedBackend holds the next PUT of a log segment (a store write) until
// the test releases it, once armed.
type gatedBackend struct {
	persist.Backend
	mu   sync.Mutex
	gate *gate
}

type gate struct {
	hit, release chan struct{}
}

func (g *gatedBackend) arm() *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = &gate{hit: make(chan struct{}), release: make(chan struct{})}
	return g.gate
}

func (g *gatedBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if strings.HasPrefix(key, "log/") {
		g.mu.Lock()
		gt := g.gate
		g.gate = nil
		g.mu.Unlock()
		if gt != nil {
			close(gt.hit)
			<-gt.release
		}
	}
	return g.Backend.Put(ctx, key, data, ifMatch)
}

func gatedFileStore(t *testing.T, dir string) (*persist.Store, *gatedBackend) {
	t.Helper()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedBackend{Backend: b}
	s, err := persist.NewStore(g, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, g
}

// fail releases the held write and fails the test: a test must not leave
// the primary stuck behind its gate.
func (g *gate) fail(t *testing.T, err error) {
	t.Helper()
	close(g.release)
	t.Fatal(err)
}

// parallelUnderShort makes a regression test of a gated primary parallel
// under -short: each holds the store writes of a primary of its own, on a
// root and a store of its own. The full run keeps them one at a time, as
// they always ran.
func parallelUnderShort(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}

// gatedPrimary starts a primary on a file store in dir whose log writes
// the test can hold (gatedBackend), with StoreTimeout a minute (a held write
// must not time out), and registers names, taking one ID of each (so the
// primary has initialised them). It returns the rig, the primary, a client
// on a session of its own and the gate; an operator's store is
// fileStore(t, dir).
func gatedPrimary(t *testing.T, dir string, tune func(*config.Primary), names ...string) (*fileRig, *primary.Primary, *seqzk.Client, *gatedBackend) {
	t.Helper()
	z := testenv.ZooKeeper(t)
	pstore, pgate := gatedFileStore(t, dir)
	r, p := startFilePrimary(t, z.Servers, z.Root, pstore, func(c *config.Primary) {
		c.StoreTimeout = time.Minute
		if tune != nil {
			tune(c)
		}
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(ctx, r.root); return ok })
	for _, name := range names {
		if err := c.Register(ctx, name, seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
	}
	return r, p, c, pgate
}

func waitGate(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Regression: the primary rotates a sequence onto a fresh znode (creation
// zxid Y) and decides a raise for it, whose store write is slow; meanwhile
// the sequence is deleted, and the delete's tombstone reaches the store
// first. The raise used to carry the znode it was decided for, and the
// merge kept Deleted only for a record of the same znode, so the late
// raise cleared the tombstone, and the primary re-created the deleted
// sequence. A tombstone now ends the incarnation (a rotation keeps it),
// and no later write of that incarnation can undo it. (A delete that read
// the znode before the rotation reads it again: its transaction is
// guarded by the version it read.)
func TestRotationCannotUndoADelete(t *testing.T) {
	parallelUnderShort(t)
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	pstore, pgate := gatedFileStore(t, dir)
	const rotateAt = 30
	r, p := startFilePrimary(t, z.Servers, z.Root, pstore, func(c *config.Primary) {
		c.RotateVersion = rotateAt
		c.MinReserve = 1000
		c.StoreTimeout = time.Minute
		c.SweepInterval = time.Second
	})
	c := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Exists(ctx, r.root); return ok })
	if err := c.Register(ctx, "s", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	czxid := func() int64 {
		_, stat, err := c.ZK().Get(ctx, r.root+"/s")
		if err != nil {
			t.Fatal(err)
		}
		return stat.Czxid
	}
	if _, err := c.Take(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	czxidX := czxid()
	// The primary rotates the sequence (czxid Y), one take a write.
	for p.Stats().Rotated == 0 {
		if _, err := c.Take(ctx, "s", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	czxidY := czxid()
	if czxidY == czxidX {
		t.Fatalf("rotation did not change the creation zxid")
	}

	// A take that calls for a raise; the primary decides it (czxid Y) and
	// its store write is held.
	raise := pgate.arm()
	if _, err := c.Take(ctx, "s", 1500); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "the primary's raise store write", raise.hit)

	// delete: the znode goes, then the tombstone reaches the store.
	dstore, _ := gatedFileStore(t, dir)
	ceiling, err := c.Delete(ctx, "s", dstore)
	if err != nil {
		close(raise.release)
		t.Fatalf("delete: %v", err)
	}
	t.Logf("delete returned: tombstone ceiling %d (znode rotated from %#x to %#x)", ceiling, czxidX, czxidY)
	rec, err := dstore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store after delete: deleted=%v ceiling=%d czxid=%#x", rec.Deleted(), rec.Ceiling, rec.Czxid)

	// The primary's raise store write lands.
	close(raise.release)
	time.Sleep(3 * time.Second)

	rec, err = dstore.Get(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	exists, _, err := c.ZK().Exists(ctx, r.root+"/s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 s after the raise's store write: store deleted=%v ceiling=%d czxid=%#x; znode exists=%v", rec.Deleted(), rec.Ceiling, rec.Czxid, exists)
	if !rec.Deleted() {
		t.Errorf("the store's record of deleted sequence s is live again (ceiling %d, czxid %#x): want the tombstone kept", rec.Ceiling, rec.Czxid)
	}
	if exists {
		t.Errorf("deleted sequence s exists again in ZooKeeper: want it gone")
	}
}
