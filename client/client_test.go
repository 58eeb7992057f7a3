package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/client"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// Takers with Allocators over three replicas while replicas are killed,
// stopped and started again: every ID unique, the takers kept taking, and
// every error one the caller can act on.
func TestFailoverKeepsIDsUnique(t *testing.T) {
	t.Parallel()
	c := newCluster(t, true)
	c.create("orders", seqzk.Registration{}, 0)
	reps := []*replica{c.replica(""), c.replica(""), c.replica("")}
	cl, err := client.New(client.Options{Endpoints: []string{reps[0].url(), reps[1].url(), reps[2].url()},
		RequestTimeout: 2 * time.Second, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var l ledger
	var taken, unavailable atomic.Int64
	var other sync.Map
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			a, err := client.NewAllocator(cl, "orders", client.AllocatorOptions{InitialBatch: 50})
			if err != nil {
				t.Error(err)
				return
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := a.Close(cctx); err != nil && !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrNotHandedOut) {
					t.Errorf("taker %d: close: %v", w, err)
				}
			}()
			for ctx.Err() == nil {
				id, err := a.Next(ctx)
				switch {
				case err == nil:
					l.add(fmt.Sprintf("taker %d", w), id)
					taken.Add(1)
				case ctx.Err() != nil:
				case errors.Is(err, client.ErrUnavailable):
					unavailable.Add(1)
					time.Sleep(50 * time.Millisecond)
				default:
					other.Store(err.Error(), true)
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(1, 2))
	restarts := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); restarts++ {
		rep := reps[r.IntN(len(reps))]
		rep.stop(r.IntN(2) == 0)
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		rep.start()
		time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
	}
	before := taken.Load()
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	for _, d := range l.dups {
		t.Error(d)
	}
	other.Range(func(k, _ any) bool {
		t.Errorf("an error the caller cannot act on: %v", k)
		return true
	})
	if taken.Load() < 1000 || taken.Load() == before {
		t.Errorf("the takers took %d IDs (%d after the restarts ended)", taken.Load(), taken.Load()-before)
	}
	t.Logf("%d IDs over %d replica restarts, %d takes found no replica (ErrUnavailable)", taken.Load(), restarts, unavailable.Load())
}

// Errors come back at once, matching the sentinels the caller acts on.
func TestErrorsTheCallerCanActOn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, false)
	c.create("small", seqzk.Registration{Start: 1, End: 10}, 10)
	rep := c.replica("secret")
	cl, err := client.New(client.Options{Endpoints: []string{rep.url()}, Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.Take(ctx, "missing", 1); !errors.Is(err, client.ErrUnknownSequence) {
		t.Errorf("take of a missing sequence: %v", err)
	}
	if _, err := cl.Take(ctx, "bad/name", 1); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("take of a bad name: %v", err)
	}
	if _, err := cl.Take(ctx, "small", 0); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("take of 0 IDs: %v", err)
	}
	got, err := cl.Take(ctx, "small", 10)
	if err != nil || got.Count() != 10 {
		t.Fatalf("take 10: %v %v", got, err)
	}
	if _, err := cl.Take(ctx, "small", 1); !errors.Is(err, client.ErrExhausted) {
		t.Errorf("take of an exhausted sequence: %v", err)
	}
	if _, err := cl.Recycle(ctx, "small", client.Ranges{{Start: 50, End: 60}}, ""); !errors.Is(err, client.ErrNotHandedOut) {
		t.Errorf("recycle of IDs never issued: %v", err)
	}
	wrong, _ := client.New(client.Options{Endpoints: []string{rep.url()}, Token: "wrong"})
	if _, err := wrong.Take(ctx, "small", 1); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("take with a wrong token: %v", err)
	}
	var ae *client.APIError
	if _, err := cl.Take(ctx, "missing", 1); !errors.As(err, &ae) || ae.Status != 404 || ae.Endpoint != rep.url() {
		t.Errorf("APIError: %#v", ae)
	}
	for _, bad := range []client.Options{{}, {Endpoints: []string{"10.0.0.1:8080"}}, {Endpoints: []string{rep.url()}, Token: "a b"}} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}

// A 503 with Retry-After makes the client wait that long before it asks
// that replica again; with no other replica the call ends ErrUnavailable.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	c := newCluster(t, false)
	c.create("capped", seqzk.Registration{}, 5) // no primary: it stays at its ceiling
	rep := c.replica("")
	cl, _ := client.New(client.Options{Endpoints: []string{rep.url()}, RequestTimeout: 3 * time.Second, RetryFor: 2500 * time.Millisecond})
	if _, err := cl.Take(context.Background(), "capped", 5); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := cl.Take(context.Background(), "capped", 1)
	var ae *client.APIError
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ae) || ae.Code != "ceiling_reached" {
		t.Fatalf("take at the ceiling: %v; want ErrUnavailable wrapping ceiling_reached", err)
	}
	// The server waits CeilingWait (1 s) and answers 503 Retry-After: 1;
	// a second attempt comes only a second later, and there is no time
	// for a third.
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s: the second attempt did not wait for Retry-After", took)
	}
}

// The push rule: a recycle without a key whose answer is lost fails with
// ErrUncertain and is not sent again (it landed once); with a key it is
// retried on the next replica and answered already applied.
func TestUncertainPushIsNotRetried(t *testing.T) {
	t.Parallel()
	c := newCluster(t, false)
	c.create("pushy", seqzk.Registration{}, 1000)
	rep := c.replica("")
	proxy := testenv.NewProxy(t, rep.addr)
	// The IDs are taken through the proxy: their recycle goes back there.
	viaProxy, _ := client.New(client.Options{Endpoints: []string{"http://" + proxy.Addr()}, RequestTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	got, err := viaProxy.Take(ctx, "pushy", 100)
	if err != nil {
		t.Fatal(err)
	}
	recycled := func() int64 {
		st, _, err := c.admin.Describe(ctx, "pushy")
		if err != nil {
			t.Fatal(err)
		}
		return sequence.Ranges(st.Recycled).Count()
	}
	proxy.PauseReplies()
	_, err = viaProxy.Recycle(ctx, "pushy", client.Ranges{{Start: got[0].Start, End: got[0].Start + 9}}, "")
	if !errors.Is(err, client.ErrUncertain) {
		t.Fatalf("unkeyed recycle through a proxy that holds the answer: %v; want ErrUncertain", err)
	}
	if n := recycled(); n > 10 {
		t.Fatalf("%d IDs recycled; the uncertain push was sent again", n)
	}
	// With a key, a retry after the lost answer may go to another
	// endpoint of the same replica, which answers it definitively.
	both, _ := client.New(client.Options{Endpoints: []string{"http://" + proxy.Addr(), rep.url()}, RequestTimeout: 500 * time.Millisecond})
	key := client.NewPushKey()
	ids := client.Ranges{{Start: got[0].Start + 20, End: got[0].Start + 29}}
	for range 2 {
		already, err := both.Recycle(ctx, "pushy", ids, key)
		if err != nil {
			t.Fatalf("keyed recycle: %v", err)
		}
		if already {
			break // retried after the lost answer, or a second call
		}
	}
	proxy.Resume()
	if n := recycled(); n != 20 && n != 10 {
		t.Errorf("%d IDs recycled; want the keyed push once (plus the uncertain one if it landed)", n)
	}
}

// A recycle goes back to the replica that handed the IDs out, the only one
// that takes them back, whatever the round robin says; IDs the client did
// not take are refused by the replica (ErrNotHandedOut).
func TestRecycleGoesToTheReplicaThatHandedOut(t *testing.T) {
	t.Parallel()
	c := newCluster(t, false)
	c.create("back", seqzk.Registration{}, 10_000)
	reps := []*replica{c.replica(""), c.replica(""), c.replica("")}
	cl, err := client.New(client.Options{Endpoints: []string{reps[0].url(), reps[1].url(), reps[2].url()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var taken client.Ranges
	for range 6 { // over every replica
		got, err := cl.Take(ctx, "back", 10)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, got...)
	}
	for _, r := range taken {
		if _, err := cl.Recycle(ctx, "back", client.Ranges{{Start: r.Start, End: r.Start + 1}}, ""); err != nil {
			t.Fatalf("recycle of %d:%d: %v", r.Start, r.Start+1, err)
		}
	}
	other, _ := client.New(client.Options{Endpoints: []string{reps[0].url(), reps[1].url(), reps[2].url()}})
	if _, err := other.Recycle(ctx, "back", client.Ranges{{Start: taken[0].Start + 5, End: taken[0].Start + 5}}, ""); err != nil && !errors.Is(err, client.ErrNotHandedOut) {
		t.Fatalf("recycle by a client that did not take the IDs: %v; want success (its round robin hit the replica) or ErrNotHandedOut", err)
	}
}

// Any Go service can import the package without linking ZooKeeper.
func TestNoZooKeeperInTheClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/seqkeeper/seqkeeper/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"zookeeper", "zkclient", "/zk", "seqkeeper/sequence", "seqkeeper/httpapi", "aws-sdk", "prometheus"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the client links %s", dep)
			}
		}
	}
}

// The example in examples/httpclient runs against a real replica and
// prints IDs.
func TestExampleRuns(t *testing.T) {
	t.Parallel()
	c := newCluster(t, false)
	c.create("example", seqzk.Registration{Start: 7}, 1000)
	rep := c.replica("tok")
	cmd := exec.Command("go", "run", "../examples/httpclient", "-endpoints", rep.url(), "-token", "tok", "-sequence", "example", "-n", "3")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Fields(string(out))[0] != "7" || len(strings.Fields(string(out))) != 3 {
		t.Fatalf("go run ./examples/httpclient: %v\n%s", err, out)
	}
	// Close pushed the rest of its batch back. (The replica's own
	// allocator may have taken them again from ZooKeeper since, so count
	// them where they arrived.)
	req, _ := http.NewRequest("GET", rep.url()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^seqkeeper_ids_recycled_total ([0-9]+)$`).FindSubmatch(metrics)
	if m == nil || string(m[1]) == "0" {
		t.Errorf("after the example the replica counts %q recycled IDs; want its unused IDs back", m)
	}
	// A failure is an exit status, not a 0 after a message.
	for what, args := range map[string][]string{
		"a wrong token":       {"-endpoints", rep.url(), "-token", "wrong", "-sequence", "example"},
		"an unknown sequence": {"-endpoints", rep.url(), "-token", "tok", "-sequence", "nosuch"},
	} {
		out, err := exec.Command("go", append([]string{"run", "../examples/httpclient"}, args...)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("the example with %s: %v; want exit status 1\n%s", what, err, out)
		}
	}
}
