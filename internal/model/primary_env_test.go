package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// crashableStore is a store like newStore's on a backend that the test can
// stop dead, as if its process crashed.
func (e *env) crashableStore() (*crashable, *persist.Store) {
	e.t.Helper()
	b, err := persist.NewFile(e.storeDir)
	if err != nil {
		e.fatalf("%v", err)
	}
	c := &crashable{Backend: b}
	c.left.Store(math.MaxInt64)
	s, err := persist.NewStore(c, persist.StoreOptions{Buckets: storeBuckets, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		e.fatalf("%v", err)
	}
	return c, s
}

// crashable is a real backend that does nothing more once a number of
// requests have gone through (left): every later request fails before
// reaching the storage, as for a process that died mid-way. Its requests
// can also be slowed (lag: each waits up to that long before it goes), as
// a deposed primary's may be (opDeposePrimary).
type crashable struct {
	persist.Backend
	left atomic.Int64
	lag  atomic.Int64 // nanoseconds
}

var errCrashed = errors.New("the process crashed (model fault)")

// pass holds a request for its lag and reports whether it may go.
func (c *crashable) pass(ctx context.Context) error {
	if lag := c.lag.Load(); lag > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(lag))):
		}
	}
	if c.left.Add(-1) < 0 {
		return errCrashed
	}
	return nil
}

func (c *crashable) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := c.pass(ctx); err != nil {
		return nil, "", err
	}
	return c.Backend.Get(ctx, key)
}

func (c *crashable) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	if err := c.pass(ctx); err != nil {
		return "", err
	}
	return c.Backend.Put(ctx, key, data, ifMatch)
}

func (c *crashable) Delete(ctx context.Context, key string) error {
	if err := c.pass(ctx); err != nil {
		return err
	}
	return c.Backend.Delete(ctx, key)
}

func (c *crashable) List(ctx context.Context, prefix string) ([]string, error) {
	if err := c.pass(ctx); err != nil {
		return nil, err
	}
	return c.Backend.List(ctx, prefix)
}

// setup starts everything and waits until the primary has initialised
// every sequence.
func setup(t *testing.T, seed uint64, m *model, specs []seqSpec, overTLS bool) *env {
	var ens *testenv.Ensemble
	if overTLS {
		ens = testenv.StartTLSEnsemble(t, 1)
	} else {
		ens = testenv.StartEnsemble(t, 1)
	}
	e := prepare(t, seed, m, specs, ens, overTLS, fmt.Sprintf("/model-%08x", uint32(seed)))
	e.startPrimary()
	e.populate()
	return e
}

// prepare returns the env of one root on a running ensemble: its paths
// under root, its store (in a directory of its own) and its admin session.
// No primary runs yet: the caller starts one (startPrimary, or a process
// of several roots) and then calls populate. Over TLS the admin applies
// the roles' layout first, as an operator does before the replicas start.
func prepare(t *testing.T, seed uint64, m *model, specs []seqSpec, ens *testenv.Ensemble, overTLS bool, root string) *env {
	e := &env{t: t, seed: seed, m: m, specs: specs, deleted: map[string]int{}, undeletable: map[string]bool{}, archive: map[string][][]byte{}}
	e.ens, e.tls = ens, overTLS
	if overTLS {
		id := func(role string) []zkclient.ID { return []zkclient.ID{{Scheme: "x509", ID: "CN=" + role}} }
		e.layout = seqzk.Layout{Roles: map[seqzk.Role][]zkclient.ID{seqzk.Admin: id(asAdmin), seqzk.Replica: id(asReplica), seqzk.Worker: id(asWorker)}}
	}
	e.zkAddr = e.ens.Addr(0)
	e.root = root
	e.seqRoot, e.marker = e.root+"/all-sequences", e.root+"/cluster"
	e.storeDir, e.copyDir = t.TempDir(), t.TempDir()
	e.store = e.newStore()
	// The admin session redials at once after ZooKeeper lost its data: it
	// holds no cache and no ephemeral node, and the test reads through it.
	e.admin = e.client(e.dial(asAdmin, e.zkAddr, adminSession, time.Second), ceilingWait)
	if overTLS {
		ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
		defer cancel()
		if _, _, err := e.admin.Operator().ApplyLayout(ctx, e.layout, "", e.marker); err != nil {
			e.fatalf("apply the ACL layout: %v", err)
		}
	}
	return e
}

// populate registers the run's sequences, waits until the primary has
// initialised every one, and starts the workers.
func (e *env) populate() {
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	e.waitFor(ctx, "the sequences root", func() bool {
		ok, _, _ := e.admin.ZK().Session().Exists(context.Background(), e.seqRoot)
		return ok
	})
	for _, s := range e.specs {
		if err := e.admin.Register(ctx, s.name, s.reg); err != nil {
			e.fatalf("register %s: %v", s.name, err)
		}
	}
	for _, s := range e.specs {
		e.waitFor(ctx, "the primary to initialise "+s.name, func() bool {
			_, err := e.store.Get(ctx, s.name)
			return err == nil
		})
	}
	for i := range directWorkers + proxiedWorkers {
		w := &worker{label: fmt.Sprintf("w%d", i)}
		if i < directWorkers {
			w.zk = e.dial(asWorker, e.zkAddr, workerSession, 0)
		} else {
			w.label += "p"
			w.proxy = testenv.NewProxy(e.t, e.zkAddr)
			e.closers = append(e.closers, w.proxy.Close)
			w.zk = e.dial(asWorker, w.proxy.Addr(), proxiedSession, 0)
		}
		w.seq = e.client(w.zk, ceilingWait)
		e.workers = append(e.workers, w)
		e.m.held[w.label] = map[string]*idSet{}
	}
	e.m.held["admin"] = map[string]*idSet{}
}

// close stops the primary and every client and server of the run.
func (e *env) close() {
	e.closeClients()
	e.ens.StopAll()
}

// closeClients stops the primary and every client of the root, not the
// ensemble.
func (e *env) closeClients() {
	e.resumeStale()
	if pr := e.primary(); pr != nil {
		e.stopPrimary(pr, "end of run")
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func (e *env) waitFor(ctx context.Context, what string, cond func() bool) {
	e.t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			e.fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// primary returns the current primary (nil before the first).
func (e *env) primary() *primaryRun {
	e.primMu.Lock()
	defer e.primMu.Unlock()
	return e.prim
}

func (e *env) setPrimary(pr *primaryRun) {
	e.primMu.Lock()
	e.prim = pr
	e.primMu.Unlock()
}

// startPrimary starts a new primary with a new session, through its own
// proxy (so its network can be frozen), and makes it the current one.
func (e *env) startPrimary() {
	e.nprim++
	proxy := testenv.NewProxy(e.t, e.zkAddr)
	e.closers = append(e.closers, proxy.Close)
	zc := e.dial(asReplica, proxy.Addr(), primarySession, 0)
	e.setPrimary(e.runPrimary(fmt.Sprintf("p%d", e.nprim), zc, proxy))
}

// runPrimary starts a primary of the root as holder on the session zc
// (reached through proxy), supervised as 'seqkeeper serve' does: when Run
// fails it runs again after a pause, until the test stops it.
func (e *env) runPrimary(holder string, zc *zkclient.Client, proxy *testenv.Proxy) *primaryRun {
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = e.marker
	cfg.Runway = time.Second
	cfg.MinReserve = 50
	cfg.MaxReserve = maxReserve
	cfg.SweepInterval = 200 * time.Millisecond
	cfg.StoreTimeout = primaryStoreTimeout
	// The audit repairs what a store fault cost: read the store whole
	// often.
	cfg.AuditInterval = 2 * time.Second
	// Compact the store's log often, so that compactions interleave with
	// every other operation and fault.
	cfg.CompactInterval, cfg.CompactSegments = 300*time.Millisecond, 4
	crash, store := e.crashableStore()
	logger := zerolog.New(&e.m.plog).Level(zerolog.InfoLevel).With().Timestamp().Str("holder", holder).Logger()
	p, err := primary.New(cfg, primary.Deps{Sequences: e.client(zc, time.Second), Store: store, Holder: holder, Logger: logger})
	if err != nil {
		e.fatalf("%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &primaryRun{holder: holder, p: p, store: store, crash: crash, zk: zc, proxy: proxy, cancel: cancel, done: make(chan struct{})}
	e.primMu.Lock()
	e.runs = append(e.runs, pr)
	e.primMu.Unlock()
	go func() {
		defer close(pr.done)
		for {
			err := p.Run(ctx)
			if ctx.Err() != nil {
				return
			}
			e.m.mu.Lock()
			e.m.call("primary-run", err)
			e.m.mu.Unlock()
			if pr.deposed.Load() {
				// Its term is over: its lead callback returns, and its
				// election rejoins behind the primary that deposed it.
				pr.ended, pr.endedAt = err, time.Now()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return pr
}

// stopPrimary cancels a primary's leadership and waits for Run to return.
func (e *env) stopPrimary(pr *primaryRun, why string) {
	pr.cancel()
	select {
	case <-pr.done:
	case <-time.After(30 * time.Second):
		e.m.note(fmt.Sprintf("primary still running 30s after it was stopped (%s)", why))
	}
}
