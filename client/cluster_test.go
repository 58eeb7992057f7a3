package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestMain holds every request to a replica's API, and every answer, to
// the OpenAPI document (internal/apitest).
func TestMain(m *testing.M) {
	apitest.InstallDefault()
	os.Exit(max(testenv.Run(m), apitest.Check()))
}

// cluster is a sequences root on the shared real ZooKeeper, with a primary
// (file store) keeping its ceilings raised unless started without one.
type cluster struct {
	t       *testing.T
	servers []string
	root    string
	admin   *seqzk.Client
	store   *persist.Store // the primary's; nil without one
}

func newCluster(t *testing.T, withPrimary bool) *cluster {
	t.Helper()
	z := testenv.ZooKeeper(t)
	c := &cluster{t: t, servers: z.Servers, root: z.SequencesRoot(t)}
	zc := c.session()
	var err error
	if c.admin, err = seqzk.NewClient(zc, seqzk.Options{Root: c.root}); err != nil {
		t.Fatal(err)
	}
	if !withPrimary {
		return c
	}
	b, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, err := persist.NewStore(b, persist.StoreOptions{Buckets: 4})
	if err != nil {
		t.Fatal(err)
	}
	c.store = store
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = z.Root + "/cluster"
	cfg.Runway, cfg.MinReserve, cfg.SweepInterval = time.Second, 1000, 200*time.Millisecond
	p, err := primary.New(cfg, primary.Deps{Sequences: c.seqzk(), Store: store, Holder: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *cluster) session() *zkclient.Client {
	c.t.Helper()
	zc, err := zkclient.Dial(context.Background(), c.servers, zkclient.Options{SessionTimeout: 4 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(zc.Close)
	return zc
}

func (c *cluster) seqzk() *seqzk.Client {
	c.t.Helper()
	s, err := seqzk.NewClient(c.session(), seqzk.Options{Root: c.root, CeilingWait: time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// create registers name and waits until takes succeed (the primary
// initialised it), or initialises it with ceiling when no primary runs.
func (c *cluster) create(name string, r seqzk.Registration, ceiling int64) {
	c.t.Helper()
	ctx := context.Background()
	if err := c.admin.Register(ctx, name, r); err != nil {
		c.t.Fatal(err)
	}
	if ceiling > 0 {
		if _, err := c.admin.Keeper().Revalidate(ctx, name, 0, ceiling); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _, err := c.admin.Describe(ctx, name)
		if err == nil && !st.Registered && st.Ceiling >= st.Next {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the primary did not initialise %s: %+v %v", name, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replica is one httpapi.Server on a fixed address, which the test can
// kill (connections dropped, nothing pushed back: a crash) or stop
// gracefully, and start again on the same address.
type replica struct {
	c     *cluster
	addr  string
	token string
	// adminToken turns the admin routes on (they write tombstones to the
	// cluster's store).
	adminToken string
	// name is the root's name the replica answers /v1/roots/{name}/...
	// under; empty: none.
	name string

	mu  sync.Mutex
	hs  *http.Server
	srv *httpapi.Server
	zc  *zkclient.Client
}

func (c *cluster) replica(token string) *replica {
	c.t.Helper()
	return c.adminReplica(token, "")
}

// adminReplica is a replica whose admin routes take adminToken.
func (c *cluster) adminReplica(token, adminToken string) *replica {
	c.t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		c.t.Fatal(err)
	}
	r := &replica{c: c, addr: fmt.Sprintf("127.0.0.1:%d", port), token: token, adminToken: adminToken}
	r.start()
	c.t.Cleanup(func() { r.stop(false) })
	return r
}

// namedReplica is a replica that answers its root's rooted routes under
// name too.
func (c *cluster) namedReplica(name string) *replica {
	c.t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		c.t.Fatal(err)
	}
	r := &replica{c: c, addr: fmt.Sprintf("127.0.0.1:%d", port), name: name}
	r.start()
	c.t.Cleanup(func() { r.stop(false) })
	return r
}

func (r *replica) url() string { return "http://" + r.addr }

func (r *replica) start() {
	r.c.t.Helper()
	zc, err := zkclient.Dial(context.Background(), r.c.servers, zkclient.Options{SessionTimeout: 4 * time.Second})
	if err != nil {
		r.c.t.Fatal(err)
	}
	seqs, err := sequence.NewClient(zc, sequence.Options{Root: r.c.root, CeilingWait: time.Second})
	if err != nil {
		r.c.t.Fatal(err)
	}
	opts := httpapi.Options{Name: r.name, Sequences: seqs, Token: r.token, Registry: prometheus.NewRegistry()}
	if r.adminToken != "" {
		opts.AdminToken = r.adminToken
		opts.Admin = &httpapi.Operator{Sequences: r.c.seqzk(), Store: r.c.store}
	}
	srv, err := httpapi.New(opts)
	if err != nil {
		r.c.t.Fatal(err)
	}
	var ln net.Listener
	for range 50 { // the address of the killed server may linger a moment
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.c.t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(ln) }()
	r.mu.Lock()
	r.hs, r.srv, r.zc = hs, srv, zc
	r.mu.Unlock()
}

// stop stops the replica: gracefully (drain, push back) or killed.
func (r *replica) stop(graceful bool) {
	r.mu.Lock()
	hs, srv, zc := r.hs, r.srv, r.zc
	r.hs = nil
	r.mu.Unlock()
	if hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if graceful {
		_ = hs.Shutdown(ctx)
		_ = srv.Close(ctx)
	} else {
		_ = hs.Close()
	}
	zc.Close()
}

// ledger records IDs and reports any handed out twice.
type ledger struct {
	mu   sync.Mutex
	seen map[int64]string
	dups []string
}

func (l *ledger) add(who string, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[int64]string{}
	}
	if prev, ok := l.seen[id]; ok && len(l.dups) < 10 {
		l.dups = append(l.dups, fmt.Sprintf("ID %d handed out to %s and to %s", id, prev, who))
	}
	l.seen[id] = who
}
