package primary_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// S3 down: ceilings stop rising, clients run on the reserve and then get the
// clear ceiling error; nothing above the stored ceiling is ever issued; when
// S3 returns, everything resumes.
func TestStoreOutageStopsRaisesAndResumes(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	m := testenv.StartMinIO(t)
	r.s3 = m.S3()
	r.s3.Bucket = "outage"
	if _, err := r.s3.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("outage")}); err != nil {
		t.Fatal(err)
	}
	run := r.start("p1", func(cfg *config.Primary) { cfg.StoreTimeout = time.Second })
	// The first take waits as long as a worker would for the primary to
	// initialise the name, however loaded the machine; the takes during
	// the outage wait half a second, so that the loop below meets the
	// ceiling quickly.
	patient := r.client(10 * time.Second)
	c := r.client(500 * time.Millisecond)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	if err := c.Register(ctx, "o", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := patient.Take(ctx, "o", 1); err != nil {
		t.Fatal(err)
	}
	stored := func() int64 {
		rec, err := r.store().Get(ctx, "o")
		if err != nil {
			t.Fatal(err)
		}
		return rec.Ceiling
	}
	before := stored()

	m.Stop()
	var highest int64
	var err error
	for i := 0; i < 10_000; i++ {
		var got state.Ranges
		got, err = c.Take(ctx, "o", 10)
		if err != nil {
			break
		}
		highest = got[len(got)-1].End
	}
	if !errors.Is(err, seqzk.ErrCeilingReached) || !strings.Contains(err.Error(), "store") {
		t.Fatalf("take with the store down: %v; want ErrCeilingReached mentioning the store", err)
	}
	// The primary's writes fail within StoreTimeout instead of hanging.
	waitFor(t, "a failed store write", func() bool { return run.p.Stats().StoreErrors > 0 })
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if highest > before {
		t.Fatalf("id %d issued while the store was down; the stored ceiling was %d", highest, before)
	}
	waitFor(t, "takes to resume", func() bool {
		got, err := c.Take(ctx, "o", 10)
		return err == nil && got[0].Start > highest
	})
	if got := stored(); got <= before {
		t.Fatalf("stored ceiling %d did not rise after the outage", got)
	}
	t.Logf("ran on the reserve up to %d (stored %d), then waited; resumed after the store came back", highest, before)
}

// 10,000 sequences are watched and maintained at once, and a new one is
// usable once its znode appears.
func TestMaintainsTenThousandSequences(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	c := r.client(30 * time.Second)
	conn := c.ZK()
	ctx := context.Background()
	if err := conn.EnsurePath(ctx, r.root); err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	reg := state.State{Registered: true, Start: 1, End: state.MaxID}.Encode()
	ops := make([]zkclient.Op, 0, 1000)
	for i := 0; i < n; i++ {
		ops = append(ops, zkclient.CreateOp(fmt.Sprintf("%s/s%05d", r.root, i), reg, 0))
		if len(ops) == cap(ops) {
			if _, err := conn.Session().Multi(ctx, ops...); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	began := time.Now()
	run := r.start("p1", func(cfg *config.Primary) { cfg.SweepInterval = 5 * time.Second })
	// How fast is for the benchmarks (bench/) and the log line below; here
	// the primary has to keep going until every sequence is initialised,
	// however busy the machine: it fails after a minute with none done.
	for last, progress := int64(-1), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		got := run.p.Stats().Initialised
		if got >= n {
			break
		}
		if got > last {
			last, progress = got, time.Now()
		}
		if time.Since(progress) > time.Minute {
			t.Fatalf("the primary initialised %d of %d sequences, then none for a minute", got, n)
		}
	}
	initialised := time.Since(began)

	// A new sequence, while the primary follows n: how long until its
	// first ID.
	usable := func(name string) time.Duration {
		began := time.Now()
		if err := c.Register(ctx, name, seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		return time.Since(began)
	}
	pickup := usable("fresh")
	// Again once the primary has worked through the events of its own
	// initialisation writes: the steady state.
	time.Sleep(5 * time.Second)
	settled := usable("fresh2")
	// Every sequence is usable.
	for _, i := range []int{0, 4321 % n, n - 1} {
		if _, err := c.Take(ctx, fmt.Sprintf("s%05d", i), 5); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("initialised %d sequences in %s; a new sequence was usable %s after its znode appeared (%s once the primary had settled)",
		n, initialised, pickup, settled)
}

// Bad input: garbage in one sequence znode and a corrupt store object are
// reported with the sequence's name and leave every other sequence working.
func TestBadInputIsIsolated(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newRig(t, z.Servers, z.Root)
	run := r.start("p1", nil)
	c := r.client(5 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
		if err := c.Register(ctx, names[i], seqzk.Registration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, names[i], 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ZK().Session().Create(context.Background(), r.root+"/garbage", []byte("seqkeeper-sequence v1\nnext banana\n"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "garbage reported unhealthy", func() bool {
		for _, s := range run.p.Status().Sequences {
			if s.Name == "garbage" && !s.Healthy && strings.Contains(s.Problem, `"garbage"`) {
				return true
			}
		}
		return false
	})

	// Corrupt the store object holding n00, then make a new primary read it.
	key, restore := corruptBucketOf(t, r, "n00")
	defer restore()
	run.stop()
	<-run.done
	run.done <- nil
	run2 := r.start("p2", nil)
	var broken, healthy []string
	waitFor(t, "the new primary's view", func() bool {
		broken, healthy = broken[:0], healthy[:0]
		for _, s := range run2.p.Status().Sequences {
			if strings.HasPrefix(s.Name, "n") {
				if s.Healthy {
					healthy = append(healthy, s.Name)
				} else if strings.Contains(s.Problem, "unreadable") {
					broken = append(broken, s.Name)
				}
			}
		}
		return len(broken)+len(healthy) == len(names)
	})
	if len(broken) == 0 || len(healthy) == 0 || broken[0] != "n00" && !contains(broken, "n00") {
		t.Fatalf("corrupt %s: broken %v, healthy %v; want n00 broken and others healthy", key, broken, healthy)
	}
	// A healthy sequence keeps being raised past its first reserve.
	for i := 0; i < 40; i++ {
		if _, err := c.Take(ctx, healthy[0], 50); err != nil {
			t.Fatalf("%s (healthy): %v", healthy[0], err)
		}
	}
	t.Logf("corrupt %s: unhealthy %v; healthy %v", key, broken, healthy)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// corruptBucketOf overwrites the store object that holds name with garbage
// and returns its key and a function that puts the original back.
func corruptBucketOf(t *testing.T, r *rig, name string) (string, func()) {
	t.Helper()
	ctx := context.Background()
	cl := r.s3.Client()
	list, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.s3.Bucket), Prefix: aws.String("buckets/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range list.Contents {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.s3.Bucket), Key: obj.Key})
		if err != nil {
			t.Fatal(err)
		}
		orig, _ := io.ReadAll(out.Body)
		out.Body.Close()
		put := func(b []byte) {
			if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.s3.Bucket), Key: obj.Key, Body: bytes.NewReader(b)}); err != nil {
				t.Fatal(err)
			}
		}
		put([]byte("not a bucket"))
		if _, err := r.store().Get(ctx, name); err != nil {
			var once sync.Once
			return *obj.Key, func() { once.Do(func() { put(orig) }) }
		}
		put(orig)
	}
	t.Fatalf("no store object holds %s", name)
	return "", nil
}

// Every ZooKeeper leader election fast-forwards each sequence by its
// reserve. The primary must not mistake its own jump for consumption, or
// the reserve (and the IDs skipped at the next election) would grow
// exponentially.
func TestReserveStaysBoundedAcrossElections(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	r := newRig(t, ens.Servers(), "/test")
	run := r.start("p1", nil) // MinReserve 100, Runway 1s
	c := r.client(20 * time.Second)
	ctx := context.Background()
	waitFor(t, "the root", func() bool { ok, _, _ := c.ZK().Session().Exists(context.Background(), r.root); return ok })
	for _, name := range []string{"plain", "windowed"} {
		reg := seqzk.Registration{}
		if name == "windowed" {
			reg.Windows = 2
		}
		if err := c.Register(ctx, name, reg); err != nil {
			t.Fatal(err)
		}
	}
	var first, last state.State
	for round := 0; round < 6; round++ {
		for _, name := range []string{"plain", "windowed"} {
			if _, err := c.Take(ctx, name, 5); err != nil {
				t.Fatalf("round %d: %s: %v", round, name, err)
			}
		}
		time.Sleep(1200 * time.Millisecond) // a full rate sample
		st, _, err := c.Describe(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = st
		}
		last = st
		ens.Stop(0) // a restart: a new ZooKeeper epoch, so a revalidation
		if err := ens.Start(0); err != nil {
			t.Fatal(err)
		}
	}
	if got := run.p.Stats().Revalidated; got < 5 {
		t.Fatalf("%d revalidations; the test needs one per restart", got)
	}
	// Five fast-forwards by at most two reserves each, plus the takes.
	skipped := last.Next - first.Next
	if skipped > 10*2*1000 {
		t.Fatalf("next moved %d over 5 elections (reserve now %d): the reserve grows with every fast-forward", skipped, last.Ceiling-last.Next)
	}
	t.Logf("next moved %d over 5 elections; reserve now %d", skipped, last.Ceiling-last.Next)
}
