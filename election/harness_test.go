package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) {
	zerolog.TimeFieldFormat = time.RFC3339Nano // step-down timing shows in the logs
	testenv.Main(m)
}

// cluster is a set of replicas campaigning on one path, each with its own
// ZooKeeper session, watched by a checker that records every moment two of
// them lead at once.
type cluster struct {
	t           testing.TB
	servers     []string // what replicas connect to, unless through a proxy
	path        string
	timeout     time.Duration
	redialAfter time.Duration
	proxied     bool // each replica connects through its own proxy to servers[0]
	frac        float64
	crashProbe  time.Duration

	active atomic.Int32 // lead callbacks whose context is live

	mu         sync.Mutex
	replicas   []*replica
	terms      []*termRecord // in the order lead was called
	lastEpoch  int64
	violations []string
	changed    chan struct{} // closed and replaced on every term start or end
}

type replica struct {
	name   string
	c      *cluster
	proxy  *testenv.Proxy
	client *zkclient.Client
	e      *Election
	cancel context.CancelFunc
	done   chan struct{}
	runErr error
}

// termRecord is one call of lead as the test saw it.
type termRecord struct {
	replica *replica
	term    Term
	start   time.Time
	end     time.Time // zero while leading
	cause   error
}

type clusterOpts struct {
	servers []string // default: the shared server, under the test's root
	// timeout is the session timeout, 10s unless the test needs sessions to
	// expire: a shorter one makes a stall of the loaded test machine look
	// like a partition.
	timeout time.Duration
	// redialAfter is the clients' RedialAfter, zkclient's default (twice
	// the session timeout) unless set: a test that checks sessions survive
	// an outage sets it past the longest outage a loaded machine makes.
	redialAfter  time.Duration
	proxied      bool
	lossFraction float64
	// crashProbe is every replica's Config.CrashProbe: 0 (off) unless a
	// test is about it.
	crashProbe time.Duration
}

func newCluster(t testing.TB, o clusterOpts) *cluster {
	t.Helper()
	if o.servers == nil {
		z := testenv.ZooKeeper(t)
		o.servers = z.Servers
		return startCluster(t, o, z.Root+"/election")
	}
	return startCluster(t, o, "/seqkeeper/election")
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func startCluster(t testing.TB, o clusterOpts, path string) *cluster {
	c := &cluster{
		t: t, servers: o.servers, path: path, timeout: cmpOr(o.timeout, 10*time.Second), redialAfter: o.redialAfter,
		proxied: o.proxied, frac: o.lossFraction, crashProbe: o.crashProbe, changed: make(chan struct{}),
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go c.check(stop, &wg)
	// Cleanups run last-in first-out: replicas stop first (registered
	// later), then the checker, then the verdict.
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, v := range c.violations {
			t.Errorf("safety violation: %s", v)
		}
	})
	return c
}

// check samples IsLeader of every replica every millisecond.
func (c *cluster) check(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		rs := slices.Clone(c.replicas)
		c.mu.Unlock()
		var leaders []string
		for _, r := range rs {
			if r.e.IsLeader() {
				leaders = append(leaders, r.name)
			}
		}
		if len(leaders) > 1 {
			c.violate("IsLeader true on %v at once", leaders)
		}
	}
}

func (c *cluster) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.violations) < 10 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (c *cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// add starts a replica and its Run.
func (c *cluster) add(name string) *replica {
	c.t.Helper()
	r := c.newReplica(name, Config{})
	r.start()
	return r
}

// newReplica connects a replica without starting Run; cfg's zero fields are
// filled in.
func (c *cluster) newReplica(name string, cfg Config) *replica {
	c.t.Helper()
	r := &replica{name: name, c: c}
	servers := c.servers
	if c.proxied {
		r.proxy = testenv.NewProxy(c.t, c.servers[0])
		servers = []string{r.proxy.Addr()}
	}
	log := testLogger(c.t).With().Str("replica", name).Logger()
	client, err := zkclient.Dial(context.Background(), servers, zkclient.Options{SessionTimeout: c.timeout, RedialAfter: c.redialAfter, Logger: &log})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(client.Close)
	r.client = client
	cfg.Client = client
	if cfg.Path == "" {
		cfg.Path = c.path
	}
	if cfg.Identity.ID == "" {
		cfg.Identity = Identity{ID: name, Address: name + ":8080", Version: "test"}
	}
	cfg.Logger = log
	if cfg.LossFraction == 0 {
		cfg.LossFraction = c.frac
	}
	if cfg.CrashProbe == 0 {
		cfg.CrashProbe = c.crashProbe
	}
	if r.e, err = New(cfg); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.replicas = append(c.replicas, r)
	c.mu.Unlock()
	return r
}

func (r *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		r.runErr = r.e.Run(ctx, r.c.lead(r))
	}()
	r.c.t.Cleanup(r.stop)
	if r.proxy != nil {
		// Cleanups run last-in first-out: the link is whole again before
		// stop waits for Run, whose leave would otherwise wait out a
		// paused or cut link until the session's end (the test is over).
		r.c.t.Cleanup(func() { r.proxy.Heal(); r.proxy.Resume() })
	}
}

// stop cancels Run and waits for it to return.
func (r *replica) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(4 * r.c.timeout):
		r.c.t.Errorf("%s: Run did not return within %s of cancel", r.name, 4*r.c.timeout)
	}
}

// lead is every replica's lead function: it counts live leaderships and
// checks that epochs rise.
func (c *cluster) lead(r *replica) func(context.Context, Term) {
	return func(ctx context.Context, term Term) {
		if n := c.active.Add(1); n > 1 {
			c.violate("%s started leading (epoch %d) while %d other lead callbacks were live", r.name, term.Epoch, n-1)
		}
		rec := &termRecord{replica: r, term: term, start: time.Now()}
		c.mu.Lock()
		if term.Epoch <= c.lastEpoch {
			c.violations = append(c.violations, fmt.Sprintf("%s got epoch %d after epoch %d", r.name, term.Epoch, c.lastEpoch))
		}
		c.lastEpoch = term.Epoch
		c.terms = append(c.terms, rec)
		c.notifyLocked()
		c.mu.Unlock()

		<-ctx.Done()

		end := time.Now()
		c.active.Add(-1)
		c.mu.Lock()
		rec.end, rec.cause = end, context.Cause(ctx)
		c.notifyLocked()
		c.mu.Unlock()
	}
}

// termCount is the number of terms started so far.
func (c *cluster) termCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.terms)
}

// waitTerm waits until term number i (0-based) has started and returns it.
func (c *cluster) waitTerm(i int, within time.Duration) *termRecord {
	c.t.Helper()
	return c.waitFor(within, fmt.Sprintf("term #%d to start", i), func() (*termRecord, bool) {
		if len(c.terms) > i {
			return c.terms[i], true
		}
		return nil, false
	})
}

// waitEnd waits until rec has ended.
func (c *cluster) waitEnd(rec *termRecord, within time.Duration) {
	c.t.Helper()
	c.waitFor(within, fmt.Sprintf("the term of %s (epoch %d) to end", rec.replica.name, rec.term.Epoch), func() (*termRecord, bool) {
		return rec, !rec.end.IsZero()
	})
}

// current returns the term being served, if any.
func (c *cluster) current() *termRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.terms); n > 0 && c.terms[n-1].end.IsZero() {
		return c.terms[n-1]
	}
	return nil
}

// snapshot returns a copy of rec read under the lock.
func (c *cluster) snapshot(rec *termRecord) termRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *rec
}

func (c *cluster) waitFor(within time.Duration, what string, cond func() (*termRecord, bool)) *termRecord {
	c.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		rec, ok := cond()
		changed := c.changed
		c.mu.Unlock()
		if ok {
			return rec
		}
		select {
		case <-changed:
		case <-deadline.C:
			c.t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
}

// queue lists the candidate nodes in order with the replica owning each,
// as observer sees them.
func (c *cluster) queue(observer *zkclient.Client) []*replica {
	c.t.Helper()
	ctx := context.Background()
	children, _, err := observer.Session().Children(ctx, c.path)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	rs := slices.Clone(c.replicas)
	c.mu.Unlock()
	var out []*replica
	for _, e := range sortedCandidates(children) {
		ok, st, err := observer.Session().Exists(ctx, c.path+"/"+e.name)
		if err != nil {
			c.t.Fatal(err)
		}
		if !ok {
			continue
		}
		i := slices.IndexFunc(rs, func(r *replica) bool { return r.client.SessionID() == st.EphemeralOwner })
		if i < 0 {
			c.t.Fatalf("candidate %s owned by unknown session 0x%x", e.name, st.EphemeralOwner)
		}
		out = append(out, rs[i])
	}
	return out
}

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testLogger sends zerolog output to t.Log, shown on failure or with -v,
// and drops it once the test is over (background goroutines may still log).
func testLogger(t testing.TB) zerolog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}).
		With().Timestamp().Logger().Level(zerolog.DebugLevel)
}

type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// errIsAny reports whether err matches one of targets.
func errIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
