package primary_test

// Rigs of the primary's tests on a file store: a primary that runs until
// the test ends or until stopped, a store whose writes the test can hold,
// and a ledger of every ID handed out.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ids records every ID handed out and fails the test on a second one.
type ids map[int64]string

func (m ids) add(t *testing.T, who string, rs state.Ranges) {
	t.Helper()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			if first, dup := m[id]; dup {
				t.Errorf("id %d handed out twice: to %s, then to %s", id, first, who)
			}
			m[id] = who
		}
	}
}

// fileRig runs a primary on a file store for the servers and test root,
// and returns a client dialled with timeout to servers.
type fileRig struct {
	t       *testing.T
	servers []string
	root    string
	store   *persist.Store
}

func newFileRig(t *testing.T, servers []string, zroot string) *fileRig {
	t.Helper()
	r, _ := startFilePrimary(t, servers, zroot, fileStore(t, t.TempDir()), nil)
	c := r.client(servers, 10*time.Second)
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	return r
}

// startFilePrimary runs a primary on store until the test ends, tuned by
// tune (nil for the test defaults), without waiting for it to lead.
func startFilePrimary(t *testing.T, servers []string, zroot string, store *persist.Store, tune func(*config.Primary)) (*fileRig, *primary.Primary) {
	t.Helper()
	r := &fileRig{t: t, servers: servers, root: zroot + "/all-sequences", store: store}
	cfg := testPrimaryConfig(zroot)
	if tune != nil {
		tune(&cfg)
	}
	p, _ := runPrimary(t, cfg, r.client(servers, 4*time.Second), store, "p1")
	return r, p
}

// testPrimaryConfig is the tests' primary for the test root zroot: a
// runway of a second, a sweep every 200 ms.
func testPrimaryConfig(zroot string) config.Primary {
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = zroot + "/cluster"
	cfg.Runway = time.Second
	cfg.MinReserve = 100
	cfg.SweepInterval = 200 * time.Millisecond
	return cfg
}

// runPrimary runs a primary of cfg until the test ends or the returned
// function stops it (and waits for it), without waiting for it to lead.
// Its log (info and above) is printed when the test fails.
func runPrimary(t *testing.T, cfg config.Primary, seqs *seqzk.Client, store *persist.Store, holder string) (*primary.Primary, func()) {
	t.Helper()
	log, logger := primaryLog(t, holder)
	p, err := primary.New(cfg, primary.Deps{Sequences: seqs, Store: store, Holder: holder, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = lead(ctx, p, log) }()
	var stopped bool
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return p, stop
}

// primaryLog returns a buffer for holder's log (info and above), and the
// logger that writes it; its end is printed when the test fails. Call it
// before the primary's stop is registered, so that the print runs after
// the stop: a failed test shows what the primary did.
func primaryLog(t *testing.T, holder string) (*testenv.Buffer, zerolog.Logger) {
	log := &testenv.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log (the end):\n%s", holder, log.Tail(60))
		}
	})
	return log, zerolog.New(log).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// lead runs p as a replica's election would keep it running (internal/host,
// Root.lead): a primary that cannot start, on a ZooKeeper or store request
// that failed under load, gives leadership up and is elected again after a
// pause. The rig has no election, so it runs p again itself, except when
// fenced (a newer primary leads then, and in a replica its election says
// so): it returns that error, or nil once ctx is done. Each failure goes
// to log (nil: nowhere), which a failed test prints.
func lead(ctx context.Context, p *primary.Primary, log *testenv.Buffer) error {
	l := zerolog.Nop()
	if log != nil {
		l = zerolog.New(log).With().Timestamp().Logger()
	}
	for {
		err := p.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, primary.ErrFenced) {
			return err
		}
		l.Error().Err(err).Msg("test rig: primary.Run returned; running it again in 2 s, as a replica's election would")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func fileStore(t *testing.T, dir string) *persist.Store {
	t.Helper()
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (r *fileRig) client(servers []string, timeout time.Duration) *seqzk.Client {
	r.t.Helper()
	zc, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: timeout})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(zc.Close)
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: r.root, CeilingWait: 10 * time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// stoppablePrimary runs a primary on store like startFilePrimary, but
// returns a function that stops it (and waits for it), and leaves
// compactions to the test.
func stoppablePrimary(t *testing.T, r *fileRig, store *persist.Store, holder string, tune func(*config.Primary)) (*primary.Primary, func()) {
	t.Helper()
	cfg := testPrimaryConfig(r.root[:len(r.root)-len("/all-sequences")])
	// Compactions are run by the test, at chosen moments (and by each
	// primary at the start of its term when the log holds segments).
	cfg.CompactInterval = time.Hour
	cfg.CompactSegments = 1 << 30
	if tune != nil {
		tune(&cfg)
	}
	return runPrimary(t, cfg, r.client(r.servers, 4*time.Second), store, holder)
}

// loseZnodes makes ZooKeeper lose the named sequences' znodes (with their
// windows and markers) and the root's own znode (its era and deletion
// records), in one transaction: what a restore of ZooKeeper from a copy
// taken before the sequences were created does to them. Unlike a delete by
// hand, a primary knows it for a loss.
func loseZnodes(t *testing.T, c *seqzk.Client, names ...string) {
	t.Helper()
	ctx := context.Background()
	paths := []string{c.Meta().Path()}
	for _, n := range names {
		paths = append(paths, c.Path(n))
	}
	// One multi, so the loss is atomic. A window child can close between
	// the listing and the multi (takes use windows up while the primary
	// runs): list again and retry, a bounded number of times.
	for attempt := 0; ; attempt++ {
		var ops []zkclient.Op
		for _, p := range paths {
			children, _, err := c.ZK().Session().Children(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range children {
				ops = append(ops, zkclient.DeleteOp(p+"/"+ch, zkclient.AnyVersion))
			}
			ops = append(ops, zkclient.DeleteOp(p, zkclient.AnyVersion))
		}
		_, err := c.ZK().Session().Multi(ctx, ops...)
		if err == nil {
			return
		}
		if !errors.Is(err, zkclient.ErrNoNode) && !errors.Is(err, zkclient.ErrNotEmpty) || attempt == 20 {
			t.Fatal(err)
		}
	}
}

// gatedBackend holds the next PUT of a log segment (a store write) until
// the test releases it, once armed.
type gatedBackend struct {
	persist.Backend
	mu   sync.Mutex
	gate *gate
}

type gate struct {
	hit, release chan struct{}
	dropped      bool // set before release: the write fails unwritten
}

// drop releases the held write as one that never reached the store: its
// writer stopped first.
func (g *gate) drop() {
	g.dropped = true
	close(g.release)
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
			if gt.dropped {
				return "", errors.New("the test dropped this store write: its writer stopped before it")
			}
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
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(ctx, r.root); return ok })
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

// pausedBackend makes Put and Delete wait while the test holds pause.
type pausedBackend struct {
	persist.Backend
	pause *sync.RWMutex
}

func (b pausedBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	b.pause.RLock()
	defer b.pause.RUnlock()
	return b.Backend.Put(ctx, key, data, ifMatch)
}

func (b pausedBackend) Delete(ctx context.Context, key string) error {
	b.pause.RLock()
	defer b.pause.RUnlock()
	return b.Backend.Delete(ctx, key)
}
