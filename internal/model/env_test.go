package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Timing. Sessions are short so that faults cost seconds, not minutes;
// testenv's servers accept session timeouts down to 2 ticks (400 ms).
const (
	primarySession = 3 * time.Second
	workerSession  = 4 * time.Second
	// proxiedSession is the session of the workers behind a proxy. A
	// frozen worker's session and connection survive a freeze shorter than
	// 2/3 of it (go-zookeeper's read timeout), so its delayed request is
	// delivered on the connection it was sent on: staleMax keeps below.
	proxiedSession = 8 * time.Second
	staleMax       = 4 * time.Second
	adminSession   = 4 * time.Second
	ceilingWait    = 1500 * time.Millisecond
	callTimeout    = 3 * time.Second
	faultTimeout   = 60 * time.Second

	// maxReserve bounds how far one raise moves a ceiling, so that IDs
	// beyondMargin above a ceiling read a moment ago are certainly never
	// issued when a push of them arrives.
	maxReserve   = 1 << 20
	beyondMargin = 1 << 32
	// storeBuckets is the store's bucket count.
	storeBuckets = 16
	// primaryStoreTimeout bounds each store request of the primaries.
	primaryStoreTimeout = 2 * time.Second

	directWorkers  = 4
	proxiedWorkers = 2
)

// specsFor returns the run's sequences; the seed picks the window count.
func specsFor(seed uint64) []seqSpec {
	windows := 2 + int(seed%3)
	return []seqSpec{
		{name: "plain", kind: "plain"},
		{name: "plain-hi", kind: "plain", reg: seqzk.Registration{Start: 1_000_000_000}},
		{name: "windowed", kind: "windowed", reg: seqzk.Registration{Windows: windows}},
		{name: "bounded", kind: "bounded", reg: seqzk.Registration{Start: 1000, End: 6000}, landedEnd: 6000},
		{name: "tiny", kind: "bounded", reg: seqzk.Registration{Start: 1, End: 300}, landedEnd: 300},
		{name: "top", kind: "top", reg: seqzk.Registration{Start: math.MaxInt64 - 500}},
	}
}

// worker is one client process: its own ZooKeeper session and
// seqzk.Client, directly or through a proxy that can freeze it.
type worker struct {
	label  string
	zk     *zkclient.Client
	seq    *seqzk.Client
	proxy  *testenv.Proxy
	frozen bool // its proxy is paused (a delayed take is in flight); driver only
}

// primaryRun is one primary, supervised as 'seqkeeper serve' does: when
// Run fails it is run again after a pause, until the test stops it.
type primaryRun struct {
	holder string
	p      *primary.Primary
	store  *persist.Store
	crash  *crashable // the store's backend, which the test can make "die"
	zk     *zkclient.Client
	proxy  *testenv.Proxy
	cancel context.CancelFunc
	done   chan struct{}
	// deposed is set when a successor starts beside it (opDeposePrimary):
	// once Run returns it is not run again. ended and endedAt are then
	// what Run returned of itself, and when (zero: it ran until stopped);
	// read them after done.
	deposed atomic.Bool
	ended   error
	endedAt time.Time
}

// zkCopy is a saved ZooKeeper data directory.
type zkCopy struct {
	dir      string
	op       int
	storeGen int // store faults before it: restoring across one is out of scope
}

// staleTake is a take in flight on a frozen worker.
type staleTake struct {
	w        *worker
	name     string
	op       int
	resumeAt int
	deadline time.Time
	done     chan string
}

// env is one run of one root: the servers, clients, primaries and the
// model. Apart from m (see model) and prim, it belongs to the root's driver
// goroutine (and, with several roots, to the fault driver while it holds
// every driver off; see rootsRun).
type env struct {
	t    *testing.T
	seed uint64
	m    *model

	specs []seqSpec
	// label names the root in a run of several roots (" root r1 (<path>)";
	// empty for TestModel).
	label string
	ens   *testenv.Ensemble
	// tls runs every session over TLS as an x509 identity of its role
	// (TestModelOverTLS), under layout, which the admin applies first
	// and the primary keeps through every loss of ZooKeeper's data.
	tls      bool
	layout   seqzk.Layout
	zkAddr   string
	root     string
	seqRoot  string
	marker   string
	storeDir string
	copyDir  string
	store    *persist.Store // the test's own: checks, tombstones
	admin    *seqzk.Client
	workers  []*worker
	// prim is the current primary; with several roots in one process
	// the process's fault driver replaces it, so read it with primary().
	prim    *primaryRun
	primMu  sync.Mutex
	runs    []*primaryRun // every primary started, for the end's check
	nprim   int
	copies  []zkCopy
	stale   *staleTake
	closers []func()

	skip       map[string]bool // SEQKEEPER_MODEL_SKIP
	deleted    map[string]int  // names deleted (op of the delete), not re-created
	rollbackOp int             // op of the last ZooKeeper data loss
	// undeletable are the deleted names that may exist again: a restore
	// of ZooKeeper from a copy taken before their delete may have brought
	// them back (docs/fault-model.md), or the model's own create, its
	// reply lost, may land.
	undeletable map[string]bool
	exports     []string            // exports taken during the run (opExport)
	archive     map[string][][]byte // earlier versions of store objects (archiveStore)
	api         *httptest.Server    // the HTTP API of the admin routes (httpAdmin)
	apiStore    *persist.Store      // the store api was built on
	adoptions   int                 // legacy counters adopted (opAdopt)
	// noStoreFaults, while set, keeps opStoreFault off: a run of several
	// roots sets it between a copy of ZooKeeper and its restore.
	noStoreFaults atomic.Bool
}

// fatalf stops the run for a problem of the test's environment (a server
// that does not start, a file that cannot be written): not a finding.
func (e *env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf("seed %#x%s: test environment: %s", e.seed, e.label, fmt.Sprintf(format, args...))
}

// The roles of the run's sessions: over TLS each is an x509 identity
// (CN=<role>) that the layout gives that role.
const (
	asAdmin   = "admin"
	asReplica = "replica"
	asWorker  = "worker"
)

func (e *env) dial(role, addr string, session, redial time.Duration) *zkclient.Client {
	e.t.Helper()
	c := e.connect(role, addr, session, redial)
	e.closers = append(e.closers, c.Close)
	return c
}

// connect opens a session as dial does; the caller closes it.
func (e *env) connect(role, addr string, session, redial time.Duration) *zkclient.Client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	opts := zkclient.Options{SessionTimeout: session, ConnectTimeout: faultTimeout, RedialAfter: redial}
	if e.tls {
		opts.TLS = e.ens.ClientTLS(e.t, role)
		opts.ACL = []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "x509", ID: "CN=" + role}}}
	}
	c, err := zkclient.Dial(ctx, []string{addr}, opts)
	if err != nil {
		e.fatalf("dial zookeeper %s: %v", addr, err)
	}
	return c
}

func (e *env) client(zc *zkclient.Client, wait time.Duration) *seqzk.Client {
	e.t.Helper()
	c, err := seqzk.NewClient(zc, seqzk.Options{Root: e.seqRoot, CeilingWait: wait, Layout: e.layout})
	if err != nil {
		e.fatalf("%v", err)
	}
	return c
}

func (e *env) newStore() *persist.Store {
	e.t.Helper()
	b, err := persist.NewFile(e.storeDir)
	if err != nil {
		e.fatalf("%v", err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Buckets: storeBuckets, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		e.fatalf("%v", err)
	}
	return s
}

// pickWorker returns a worker that is not frozen.
func (e *env) pickWorker(r *rand.Rand) *worker {
	var ok []*worker
	for _, w := range e.workers {
		if !w.frozen {
			ok = append(ok, w)
		}
	}
	return ok[r.IntN(len(ok))]
}

// live reports whether the model believes name exists (not deleted).
func (e *env) live(name string) bool {
	_, gone := e.deleted[name]
	return !gone
}

// liveNames returns the names the model believes exist.
func (e *env) liveNames() []string {
	var live []string
	for _, s := range e.specs {
		if e.live(s.name) {
			live = append(live, s.name)
		}
	}
	return live
}

// pickName returns a sequence name, nearly always a live one. Bounded
// sequences (and the one at the top of the space) are used up early, so
// unbounded ones are picked three times as often.
func (e *env) pickName(r *rand.Rand) string {
	var names []string
	all := r.IntN(20) == 0
	for _, s := range e.specs {
		if !all && !e.live(s.name) {
			continue
		}
		names = append(names, s.name)
		if s.kind == "plain" || s.kind == "windowed" {
			names = append(names, s.name, s.name)
		}
	}
	if len(names) == 0 {
		return e.specs[r.IntN(len(e.specs))].name
	}
	return names[r.IntN(len(names))]
}

func (e *env) spec(name string) seqSpec {
	for _, s := range e.specs {
		if s.name == name {
			return s
		}
	}
	panic("no sequence " + name)
}

// take takes n IDs of name on w's client and records the result.
func (e *env) take(w *worker, who, name string, n int64, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	got, err := w.seq.Take(ctx, name, n)
	cancel()
	return e.took(w.label, who, name, n, got, err)
}

// took records a take's result in the model: the oracle, what the worker
// now holds, and the store's ceiling (invariant 2). It may run on any
// goroutine.
func (e *env) took(label, who, name string, n int64, got sequence.Ranges, err error) string {
	if err != nil {
		return e.record(label, who, name, n, got, err)
	}
	e.record(label, who, name, n, got, nil)
	m := e.m
	m.mu.Lock()
	gen, lost := m.storeGen, m.lost[name]
	m.mu.Unlock()
	line := fmt.Sprintf("%s take %s %d -> %s", who, name, n, got)
	if lost {
		return line + " (store lost the record; not checked against it)"
	}
	highest := got[len(got)-1].End
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	rec, gerr := e.store.Get(ctx, name)
	cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.storeGen != gen || m.lost[name] {
		return line // a store fault happened meanwhile
	}
	switch {
	case errors.Is(gerr, persist.ErrNotFound):
		m.fail(fmt.Sprintf("DURABLE BEFORE USABLE: %s was handed %s of %q at op #%d, and the store has no record of %q",
			who, got, name, m.op, name))
	case gerr != nil:
		m.call("store-get", gerr)
	case rec.Ceiling < highest:
		m.fail(fmt.Sprintf("DURABLE BEFORE USABLE: %s was handed %s of %q at op #%d, above the stored ceiling %d",
			who, got, name, m.op, rec.Ceiling))
	}
	return line
}

// record records a take's result in the oracle and in what the worker now
// holds, without checking the store (a legacy counter's take has no stored
// ceiling); took checks it too. It may run on any goroutine.
func (e *env) record(label, who, name string, n int64, got sequence.Ranges, err error) string {
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		class := m.call("take", err)
		return fmt.Sprintf("%s take %s %d -> error %s", who, name, n, class)
	}
	m.call("take", nil)
	for _, p := range m.ledgers[name].take(m.op, who, got) {
		m.fail(p)
	}
	h := m.held[label][name]
	if h == nil {
		h = &idSet{}
		m.held[label][name] = h
	}
	for _, r := range got {
		h.add(r)
	}
	for len(h.rs) > 32 { // the worker used its oldest IDs
		h.rs = h.rs[1:]
	}
	m.takesOK++
	m.handed += got.Count()
	return fmt.Sprintf("%s take %s %d -> %s", who, name, n, got)
}

// zkHealthy reports whether ZooKeeper holds a validated state of every
// live sequence in its current epoch: it then knows on its own what it
// issued, and the store may lose data without both losing it.
func (e *env) zkHealthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	epoch, err := e.admin.Meta().CurrentEpoch(ctx)
	if err != nil {
		return false
	}
	for _, s := range e.specs {
		if !e.live(s.name) {
			continue
		}
		st, _, err := e.admin.Describe(ctx, s.name)
		if err != nil || st.Registered || st.ZKEpoch != epoch {
			return false
		}
	}
	return true
}

// storeCovers reports whether the store covers every sequence again after
// a store fault, and forgets the faults of those it covers: the stored
// ceiling is at least ZooKeeper's and every ID handed out, at every check
// for coverHold. A single check is not enough: a raise whose store write
// the fault lost may still be on its way to ZooKeeper, and raise it above
// the store after the check (the primary's audit then repairs it).
func (e *env) storeCovers() bool {
	e.m.mu.Lock()
	var lost []string
	for name := range e.m.lost {
		lost = append(lost, name)
	}
	e.m.mu.Unlock()
	if len(lost) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	covered := 0
	for _, name := range lost {
		ok, ceiling := e.covers(ctx, name)
		e.m.mu.Lock()
		since, seen := e.m.coveredSince[name]
		switch {
		case !ok:
			delete(e.m.coveredSince, name)
		case !seen:
			e.m.coveredSince[name] = time.Now()
		case time.Since(since) >= coverHold:
			delete(e.m.lost, name)
			delete(e.m.coveredSince, name)
			covered++
			e.m.logOp(fmt.Sprintf("       store covers %s again (ceiling %d, for %s)", name, ceiling, time.Since(since).Round(time.Millisecond)))
		}
		e.m.mu.Unlock()
	}
	return covered == len(lost)
}

// coverHold is how long the store must cover a sequence after a store
// fault before the oracle checks takes against it again: longer than a
// raise can be in flight (its store write, the fencing read, its
// ZooKeeper write), each bounded by primaryStoreTimeout.
const coverHold = 2*primaryStoreTimeout + time.Second

// covers reports whether the store covers sequence name now: its record
// is at least ZooKeeper's ceiling (or a tombstone, for a name deleted)
// and every ID handed out. It returns the stored ceiling.
func (e *env) covers(ctx context.Context, name string) (bool, int64) {
	rec, err := e.store.Get(ctx, name)
	if err != nil {
		return false, 0
	}
	if e.live(name) {
		st, _, err := e.admin.Describe(ctx, name)
		if err != nil || st.Registered || rec.Ceiling < st.Ceiling {
			return false, rec.Ceiling
		}
	} else if !rec.Deleted() {
		return false, rec.Ceiling
	}
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	return rec.Ceiling >= e.m.ledgers[name].highest, rec.Ceiling
}

// settle waits, up to a bound, until ZooKeeper serves and the primary has
// revalidated every live sequence.
func (e *env) settle(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !e.zkHealthy() {
		time.Sleep(100 * time.Millisecond)
	}
}

// zkFault stops the server (SIGTERM, or SIGKILL with kill), runs between
// on its stopped data directory, and starts it again.
func (e *env) zkFault(kill bool, between func() error) {
	e.t.Helper()
	if kill {
		e.ens.Kill(0)
	} else {
		e.ens.Stop(0)
	}
	if between != nil {
		if err := between(); err != nil {
			e.fatalf("zookeeper data directory: %v", err)
		}
	}
	if err := e.ens.Start(0); err != nil {
		e.fatalf("restart zookeeper: %v", err)
	}
	if err := e.ens.WaitServing(0, faultTimeout); err != nil {
		e.fatalf("zookeeper not serving after a fault: %v", err)
	}
}

// fault records an injected fault; the driver calls it.
func (e *env) fault(what string) {
	e.m.mu.Lock()
	e.m.faults = append(e.m.faults, fmt.Sprintf("#%d %s", e.m.op, what))
	e.m.mu.Unlock()
}

// getState reads the state of a znode with its stat.
func (e *env) getState(path, name string) (sequence.State, *zkclient.Stat, error) {
	data, stat, err := e.admin.ZK().Session().Get(context.Background(), path)
	if err != nil {
		return sequence.State{}, nil, err
	}
	st, err := state.ParseState(name, data)
	return st, stat, err
}

// resumeStale ends a delayed take: the worker's network flows again and
// the take's result is recorded (by its goroutine).
func (e *env) resumeStale() {
	s := e.stale
	if s == nil {
		return
	}
	e.stale = nil
	s.w.proxy.Resume()
	var line string
	select {
	case line = <-s.done:
	case <-time.After(60 * time.Second):
		line = "still running 60s after resume"
		e.m.note("delayed take still running 60s after resume")
	}
	s.w.frozen = false
	e.m.mu.Lock()
	e.m.logOp(fmt.Sprintf("#%-5d resume %s (delayed since #%d): %s", e.m.op, s.w.label, s.op, line))
	e.m.mu.Unlock()
}
