package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Several roots on one ZooKeeper ensemble and one S3 bucket, each with its
// own election, primary and store prefix: the way past one primary's
// limit that docs/architecture.md ("When one primary is not enough")
// describes. The test runs four roots of two real 'seqkeeper serve'
// processes each; workers take IDs from every root through the library
// and through the replicas' HTTP API; the primary of one root is killed
// (SIGKILL) and that of another stopped (SIGTERM) while the other two
// keep raising. Every root must have a primary of its own, no ID may be
// handed out twice within a sequence, and the stores must not share an
// object or a record.
func TestFourRootsEachWithItsOwnPrimary(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	const roots = 4
	z := testenv.ZooKeeper(t)
	bucket := testenv.ObjectStore(t)
	conn := testenv.Connect(t, z.Servers, 10*time.Second)

	rs := make([]*rootUnderTest, roots)
	for i := range rs {
		rs[i] = newRootUnderTest(t, z, conn, bucket, fmt.Sprintf("r%d", i))
	}
	for _, r := range rs {
		r.startReplicas()
	}
	assertOwnPrimaries(t, rs)
	for _, r := range rs {
		if p, out := r.awaitPrimary(), r.c.ok("leader"); !strings.Contains(out, p.id) {
			t.Fatalf("%s: seqkeeper leader = %q; want %s", r.name, out, p.id)
		}
		for _, seq := range r.sequences {
			r.c.ok("create", seq)
		}
	}
	for _, r := range rs {
		r.awaitInitialised()
	}

	// Workers on every root: two through the library (a session each),
	// one through the replicas' HTTP API.
	ctx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	var wg sync.WaitGroup
	failures := make(chan error, 64)
	for _, r := range rs {
		for w := range 2 {
			client, err := sequence.NewClient(testenv.Connect(t, z.Servers, 10*time.Second),
				sequence.Options{Root: r.c.root, CeilingWait: workerCeilingWait})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { r.libraryWorker(ctx, w, client, failures) })
		}
		wg.Go(func() { r.httpWorker(ctx, 2, failures) })
	}
	for _, r := range rs {
		r.awaitProgress(failures, "the first IDs", 0)
	}

	// Fail two primaries at once: r0's crashes (its successor waits for
	// the session to expire), r1's resigns (its successor takes over at
	// once). r2 and r3 must not notice.
	before := make([]map[string]int64, roots)
	issued := make([]int, roots)
	for i, r := range rs {
		before[i], issued[i] = r.ceilings(), r.issued()
	}
	crashed, resigned := rs[0].awaitPrimary(), rs[1].awaitPrimary()
	stable := []*replicaUnderTest{rs[2].awaitPrimary(), rs[3].awaitPrimary()}
	began := time.Now()
	crashed.stop(syscall.SIGKILL)
	resigned.stop(syscall.SIGTERM)
	successors := []*replicaUnderTest{rs[0].awaitPrimary(), rs[1].awaitPrimary()}
	t.Logf("r0: %s killed, %s leads; r1: %s stopped, %s leads; %s after the failures (session timeout %s)",
		crashed.id, successors[0].id, resigned.id, successors[1].id, time.Since(began).Round(time.Millisecond), sessionTimeout)
	for i, r := range rs[2:] {
		if got := r.issued(); got <= issued[i+2] {
			t.Errorf("%s handed out no IDs while the primaries of r0 and r1 failed over (%d before, %d after)", r.name, issued[i+2], got)
		}
		if p := r.awaitPrimary(); p != stable[i] {
			t.Errorf("%s: primary changed from %s to %s when other roots' primaries failed", r.name, stable[i].id, p.id)
		}
	}
	if code := resigned.wait(); code != 0 {
		t.Errorf("%s: serve exited %d after SIGTERM; want 0\n%s", resigned.id, code, resigned.logs)
	}
	assertOwnPrimaries(t, rs)

	// Every root raises past the ceilings it had before the failures: the
	// successors of r0 and r1 took over the reservation, r2 and r3 kept it.
	for i, r := range rs {
		r.awaitRaisedPast(failures, before[i])
		r.awaitProgress(failures, "IDs after the failover", time.Since(began))
	}
	stopWorkers()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	for _, r := range rs {
		for _, seq := range r.sequences {
			r.ledgers[seq].Check(t)
		}
		if out, errOut, code := r.c.exe("verify"); code != 0 {
			t.Errorf("%s: seqkeeper verify: exit %d\n%s%s", r.name, code, out, errOut)
		}
		t.Logf("%s: %d IDs handed out; primary %s", r.name, r.issued(), r.awaitPrimary().id)
	}
	assertStoresApart(t, bucket, rs)
}

// Timing of the roots' replicas: short enough for a test, within what
// Config.Validate accepts (sweep <= runway).
const (
	sessionTimeout    = 4 * time.Second
	workerCeilingWait = 25 * time.Second // longer than a crashed primary's session
	workerPause       = 10 * time.Millisecond
	rootsDeadline     = 40 * time.Second
)

// rootUnderTest is one root: its own sequences root, election path, marker
// and store prefix, two serve processes, and the ledgers of its sequences.
type rootUnderTest struct {
	t         *testing.T
	name      string
	c         *cli
	prefix    string // the store's prefix in the shared bucket
	store     string // the store URL
	sequences []string
	replicas  []*replicaUnderTest
	ledgers   map[string]*testenv.Ledger
	taken     []atomic.Int64 // IDs per worker
}

func newRootUnderTest(t *testing.T, z *testenv.ZK, conn *zkclient.Client, bucket *testenv.S3, name string) *rootUnderTest {
	t.Helper()
	base := z.Path(name)
	r := &rootUnderTest{
		t: t, name: name, prefix: "roots/" + name,
		// The same name in every root is a different sequence in each.
		sequences: []string{"orders", name + "-items"},
		ledgers:   map[string]*testenv.Ledger{},
		taken:     make([]atomic.Int64, 3),
	}
	for _, s := range r.sequences {
		r.ledgers[s] = testenv.NewLedger()
	}
	r.store = fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s", bucket.Bucket, r.prefix, bucket.Endpoint, bucket.Region)
	// Only the root and the store are set: the election and the marker
	// are derived from the root, so each root has its own.
	root := base + "/all-sequences"
	election, _ := config.DerivedPaths(root)
	c := &cli{t: t, servers: z.Servers, root: root, election: election, conn: conn, storeCeiling: storeCeiling}
	c.env = map[string]string{
		"SEQKEEPER_ZK":                 strings.Join(z.Servers, ","),
		"SEQKEEPER_ROOT":               root,
		"SEQKEEPER_STORE":              r.store,
		"SEQKEEPER_ZK_SESSION_TIMEOUT": sessionTimeout.String(),
		"SEQKEEPER_CEILING_WAIT":       workerCeilingWait.String(),
		"SEQKEEPER_RUNWAY":             "2s",
		"SEQKEEPER_MIN_RESERVE":        "50",
		"SEQKEEPER_SWEEP_INTERVAL":     "200ms",
		"SEQKEEPER_LOG_FORMAT":         "json",
		"AWS_ACCESS_KEY_ID":            bucket.AccessKey,
		"AWS_SECRET_ACCESS_KEY":        bucket.SecretKey,
	}
	var err error
	if c.admin, err = seqzk.NewClient(conn, seqzk.Options{Root: c.root}); err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

// replicaUnderTest is one 'seqkeeper serve' process.
type replicaUnderTest struct {
	id   string
	proc *replicaProc // for its HTTP helpers
	cmd  *exec.Cmd
	logs *testenv.Buffer
	down atomic.Bool // stopped on purpose: its errors are expected
	done chan struct{}
	code int
}

func (r *rootUnderTest) startReplicas() {
	for _, suffix := range []string{"a", "b"} {
		id := r.name + "-" + suffix
		addr := freeAddr(r.t)
		cmd := exec.Command(seqkeeperBinary(r.t), "--root", r.c.root, "serve", "--http", addr, "--id", id)
		cmd.Env = r.c.environ()
		rep := &replicaUnderTest{id: id, proc: &replicaProc{id: id, addr: addr}, cmd: cmd, logs: &testenv.Buffer{}, done: make(chan struct{})}
		cmd.Stderr = rep.logs
		if err := cmd.Start(); err != nil {
			r.t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				rep.code = ee.ExitCode()
			}
			close(rep.done)
		}()
		r.t.Cleanup(func() {
			rep.stop(syscall.SIGTERM)
			select {
			case <-rep.done:
			case <-time.After(30 * time.Second):
				rep.stop(syscall.SIGKILL)
				<-rep.done
			}
			if r.t.Failed() {
				r.t.Logf("logs of %s:\n%s", id, rep.logs)
			}
		})
		r.replicas = append(r.replicas, rep)
	}
}

func (p *replicaUnderTest) stop(sig syscall.Signal) {
	p.down.Store(true)
	_ = p.cmd.Process.Signal(sig)
}

// wait waits for the process to exit and returns its exit code.
func (p *replicaUnderTest) wait() int {
	select {
	case <-p.done:
		return p.code
	case <-time.After(30 * time.Second):
		return -1
	}
}

// status is what a replica's GET /v1/status says about the election.
type status struct {
	Leading bool `json:"leading"`
	Primary *struct {
		ID string `json:"id"`
	} `json:"primary"`
}

func (p *replicaUnderTest) status(t *testing.T) (status, bool) {
	var st status
	if p.down.Load() || p.proc.get(t, "/v1/status", &st) != http.StatusOK {
		return st, false
	}
	return st, true
}

// primary returns the replica every running replica of the root names as
// primary and that says it leads, or nil.
func (r *rootUnderTest) primary() *replicaUnderTest {
	var leader *replicaUnderTest
	named := ""
	for _, p := range r.replicas {
		st, ok := p.status(r.t)
		if !ok {
			continue
		}
		if st.Primary == nil || (named != "" && st.Primary.ID != named) {
			return nil
		}
		named = st.Primary.ID
		if st.Leading {
			leader = p
		}
	}
	if leader == nil || leader.id != named {
		return nil
	}
	return leader
}

// awaitPrimary waits until the root's running replicas agree on a primary
// among them, and returns it. (A status request can fail under load, so a
// single look is not enough to say there is none.)
func (r *rootUnderTest) awaitPrimary() *replicaUnderTest {
	r.t.Helper()
	var p *replicaUnderTest
	r.await("a primary for "+r.name, nil, func() bool { p = r.primary(); return p != nil })
	return p
}

// await polls cond until it holds, failing the test at rootsDeadline or at
// the first failure a worker reports.
func (r *rootUnderTest) await(what string, failures chan error, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(rootsDeadline)
	for !cond() {
		select {
		case err := <-failures:
			r.t.Fatalf("waiting for %s: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitInitialised waits until the primary has initialised every sequence
// of the root.
func (r *rootUnderTest) awaitInitialised() {
	r.t.Helper()
	r.await(r.name+"'s sequences initialised", nil, func() bool {
		for _, seq := range r.sequences {
			st, _, err := r.c.admin.Describe(context.Background(), seq)
			if err != nil || st.Registered || st.Ceiling < st.Start {
				return false
			}
		}
		return true
	})
}

// awaitProgress waits until every worker of the root has taken IDs since
// the last call, or since the test began when since is 0.
func (r *rootUnderTest) awaitProgress(failures chan error, what string, since time.Duration) {
	r.t.Helper()
	base := make([]int64, len(r.taken))
	for i := range r.taken {
		base[i] = r.taken[i].Load()
	}
	r.await(fmt.Sprintf("%s in %s (%s after the failures)", what, r.name, since.Round(time.Millisecond)), failures, func() bool {
		for i := range r.taken {
			if r.taken[i].Load() <= base[i] {
				return false
			}
		}
		return true
	})
}

// ceilings reads every sequence's ceiling in ZooKeeper.
func (r *rootUnderTest) ceilings() map[string]int64 {
	r.t.Helper()
	out := map[string]int64{}
	for _, seq := range r.sequences {
		st, _, err := r.c.admin.Describe(context.Background(), seq)
		if err != nil {
			r.t.Fatal(err)
		}
		out[seq] = st.Ceiling
	}
	return out
}

// awaitRaisedPast waits until every sequence has handed out IDs above its
// ceiling in old: some primary raised it since.
func (r *rootUnderTest) awaitRaisedPast(failures chan error, old map[string]int64) {
	r.t.Helper()
	r.await(r.name+" raised past its ceilings before the failures", failures, func() bool {
		for _, seq := range r.sequences {
			st, _, err := r.c.admin.Describe(context.Background(), seq)
			if err != nil || st.Next <= old[seq]+1 {
				return false
			}
		}
		return true
	})
}

func (r *rootUnderTest) issued() int {
	n := 0
	for _, l := range r.ledgers {
		n += l.Issued()
	}
	return n
}

// libraryWorker takes IDs through the Go library until ctx ends,
// alternating between the root's sequences.
func (r *rootUnderTest) libraryWorker(ctx context.Context, w int, c *sequence.Client, failures chan<- error) {
	for i := 0; ctx.Err() == nil; i++ {
		seq := r.sequences[(i+w)%len(r.sequences)]
		ids, err := c.Take(ctx, seq, 5)
		if ctx.Err() != nil {
			return // a take cut short may have lost its IDs; never reused
		}
		if err != nil {
			failures <- fmt.Errorf("%s: worker %d: take from %s: %w", r.name, w, seq, err)
			return
		}
		r.record(w, seq, ids)
		sleep(ctx, workerPause)
	}
}

// httpWorker takes IDs through the replicas' HTTP API until ctx ends,
// alternating between replicas and sequences and skipping replicas the
// test stopped.
func (r *rootUnderTest) httpWorker(ctx context.Context, w int, failures chan<- error) {
	client := &http.Client{Timeout: workerCeilingWait + 5*time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		rep := r.replicas[i%len(r.replicas)]
		if rep.down.Load() {
			continue
		}
		seq := r.sequences[i%len(r.sequences)]
		ids, err := takeOverHTTP(ctx, client, rep.proc.addr, seq, 3)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && rep.down.Load():
			continue // stopped while the request was out; its IDs are lost
		case err != nil:
			failures <- fmt.Errorf("%s: http worker via %s: take from %s: %w", r.name, rep.id, seq, err)
			return
		}
		r.record(w, seq, ids)
		sleep(ctx, workerPause)
	}
}

func (r *rootUnderTest) record(w int, seq string, ids sequence.Ranges) {
	r.ledgers[seq].Took(w, ids)
	var n int64
	for _, rg := range ids {
		n += rg.Len()
	}
	r.taken[w].Add(n)
}

func takeOverHTTP(ctx context.Context, client *http.Client, addr, seq string, n int) (sequence.Ranges, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/sequences/%s/ids?count=%d", addr, seq, n), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Ranges [][2]int64 `json:"ranges"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d (%v)", resp.StatusCode, err)
	}
	out := make(sequence.Ranges, 0, len(body.Ranges))
	for _, rg := range body.Ranges {
		out = append(out, sequence.Range{Start: rg[0], End: rg[1]})
	}
	if len(out) == 0 {
		return nil, errors.New("a 200 answer without IDs")
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// assertOwnPrimaries checks that every root has a primary among its own
// replicas, so no two roots share one (as they would with one election
// path).
func assertOwnPrimaries(t *testing.T, rs []*rootUnderTest) {
	t.Helper()
	seen := map[*replicaUnderTest]string{}
	for _, r := range rs {
		p := r.awaitPrimary()
		switch {
		case !slices.Contains(r.replicas, p):
			t.Fatalf("%s's primary %s is not one of its replicas", r.name, p.id)
		case seen[p] != "":
			t.Fatalf("%s and %s share the primary %s", seen[p], r.name, p.id)
		}
		seen[p] = r.name
	}
}

// assertStoresApart checks that every object in the shared bucket belongs
// to exactly one root's store prefix, that each prefix holds a store of
// its own (its meta and leader epoch objects), and that each store holds
// the records of its own root's sequences and no others.
func assertStoresApart(t *testing.T, bucket *testenv.S3, rs []*rootUnderTest) {
	t.Helper()
	ctx := context.Background()
	objects := map[string][]string{} // root -> keys under its prefix
	pages := s3.NewListObjectsV2Paginator(bucket.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket.Bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			var owners []string
			for _, r := range rs {
				if rest, ok := strings.CutPrefix(key, r.prefix+"/"); ok {
					owners = append(owners, r.name)
					objects[r.name] = append(objects[r.name], rest)
				}
			}
			if len(owners) != 1 {
				t.Errorf("object %s belongs to %d stores %v; want exactly one", key, len(owners), owners)
			}
		}
	}
	for _, r := range rs {
		keys := objects[r.name]
		for _, want := range []string{"meta", "epoch"} {
			if !slices.Contains(keys, want) {
				t.Errorf("%s: store %s has no %s object (holds %v)", r.name, r.prefix, want, keys)
			}
		}
		b, err := persist.Open(ctx, r.store, persist.OpenOptions{AccessKey: bucket.AccessKey, SecretKey: bucket.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		store, err := persist.NewStore(b, persist.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, rec := range recs {
			names = append(names, rec.Name)
		}
		slices.Sort(names)
		want := slices.Sorted(slices.Values(r.sequences))
		if !slices.Equal(names, want) {
			t.Errorf("%s: store %s holds records %v; want its own sequences %v", r.name, r.prefix, names, want)
		}
		t.Logf("%s: store %s: %d objects, records %v", r.name, r.prefix, len(keys), names)
	}
}

// A store, an election path or a cluster marker belongs to one root: a
// second root started on another root's is refused (exit 2) with a
// message naming the root already there, before it joins any election.
// Shared, each of them broke that root (docs/architecture.md, "Roots that
// share a setting").
func TestRootsThatShareASettingAreRefused(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx := context.Background()
	a := struct{ root, election, marker, store string }{
		root: c.root, election: c.election, marker: c.root + "-cluster",
		store: "file://" + t.TempDir(),
	}
	for _, p := range []struct{ path, what string }{{a.election, "election_path"}, {a.marker, "marker_path"}} {
		if err := c.admin.Operator().Claim(ctx, p.path, p.what); err != nil {
			t.Fatal(err)
		}
	}
	b, err := persist.Open(ctx, a.store, persist.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Root: a.root})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, 0, persist.Record{Name: "x", Ceiling: 5}); err != nil {
		t.Fatal(err)
	}
	other := c.root + "-b"
	own := struct{ election, marker, store string }{other + "-election", other + "-cluster", "file://" + t.TempDir()}
	for _, tc := range []struct {
		name                    string
		election, marker, store string
		want                    string
	}{
		{"store", own.election, own.marker, a.store, "the store belongs to another sequences root"},
		{"election path", a.election, own.marker, own.store, "election_path " + a.election},
		{"marker path", own.election, a.marker, own.store, "marker_path " + a.marker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, seqkeeperBinary(t), "--root", other, "serve", "--id", "b0", "--http", "127.0.0.1:0")
			cmd.Env = append(c.environ(), "SEQKEEPER_ELECTION_PATH="+tc.election, "SEQKEEPER_MARKER_PATH="+tc.marker, "SEQKEEPER_STORE="+tc.store)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), a.root) {
				t.Fatalf("serve of root %s sharing the %s of %s: %v; want exit 2 naming %q and the root %s; output:\n%s", other, tc.name, a.root, err, tc.want, a.root, out)
			}
		})
	}
}
