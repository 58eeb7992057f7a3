package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/client"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// The test, against the real thing: three `seqkeeper serve`
// processes of the built binary, which the test kills (SIGKILL: a crash,
// the primary among them) or stops (SIGTERM) and starts again on the same
// address about once a second, sometimes two at once, while four takers
// take IDs through Allocators that they close (pushing the unused IDs
// back) and replace every second or so. Every ID handed out once; every
// error one the caller can act on, and no push refused; the takers kept
// taking, and took again after the last restart.
//
// Not parallel: it has the machine to itself, so that the replicas' and
// ZooKeeper's timing is the test's own. The chaos lasts 9 s, 4 s with
// -short (four rounds: the first still kills the primary).
func TestFailoverAgainstServeProcesses(t *testing.T) {
	testenv.Slow(t)
	const chaosFor = 9 * time.Second
	const (
		round     = time.Second // a replica down and up again
		takers    = 4
		minIDs    = 20_000
		maxBatch  = 2000
		takePause = 50 // IDs a taker takes between pauses of a millisecond
	)
	z := testenv.ZooKeeper(t)
	c := testenv.StartCluster(t, z, testenv.ClusterOptions{Env: map[string]string{
		// A killed replica's session expires in 2 s. The reserve (2 s of
		// takes, at least 100,000 IDs) bridges most of the time without a
		// primary (a killed primary, perhaps then a killed successor in
		// line, each until its session expires), not all of it: some takes
		// meet the ceiling (503 ceiling_reached) and, after RetryFor (2 s),
		// fail with ErrUnavailable.
		"SEQKEEPER_ZK_SESSION_TIMEOUT": "2s",
		"SEQKEEPER_RUNWAY":             "2s",
		"SEQKEEPER_MIN_RESERVE":        "100000",
	}})
	if out, err := c.Run("create", "orders"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	rec := &answers{byKind: map[string]int{}}
	cl, err := client.New(client.Options{Endpoints: c.Endpoints(), RequestTimeout: 2 * time.Second, RetryFor: 2 * time.Second,
		HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	// The primary initialises the new sequence: wait for the first IDs.
	var first client.Ranges
	for deadline := time.Now().Add(30 * time.Second); ; {
		if first, err = cl.Take(context.Background(), "orders", 1); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no IDs from the new sequence: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // also after a t.Fatal: no taker outlives the test
	defer stop()
	var (
		taken                  atomic.Int64
		allocators, pushedBack atomic.Int64
		errsMu                 sync.Mutex
		errsByKind             = map[string]int{}
		wrong                  []string // errors the caller cannot act on
	)
	held := make([]idRuns, takers)
	held[0].add(first[0].Start)
	failed := func(what string, err error) {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // the test's end
		}
		kind, ok := actionable(err)
		errsMu.Lock()
		defer errsMu.Unlock()
		errsByKind[what+" "+kind]++
		if !ok && len(wrong) < 20 {
			wrong = append(wrong, fmt.Sprintf("%s: %v", what, err))
		}
	}
	for w := range takers {
		r := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() {
			for ctx.Err() == nil {
				a, err := client.NewAllocator(cl, "orders", client.AllocatorOptions{InitialBatch: 50, MaxBatch: maxBatch})
				if err != nil {
					t.Error(err)
					return
				}
				allocators.Add(1)
				// Each allocator lives 0.3-1.5 s, then is closed (its
				// unused IDs pushed back, during the failures) and
				// replaced.
				for end := time.Now().Add(time.Duration(300+r.IntN(1200)) * time.Millisecond); ctx.Err() == nil && time.Now().Before(end); {
					id, err := a.Next(ctx)
					if err != nil {
						failed("next", err)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					held[w].add(id)
					if taken.Add(1)%takePause == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := a.Close(cctx); err != nil {
					failed("close", err)
				}
				cancel()
				pushedBack.Add(a.Stats().PushedBack)
			}
		})
	}

	// The chaos, in rounds of about a second: a replica goes down (SIGKILL
	// or SIGTERM, at random) and, a moment later, up again on its address;
	// in one round of four a second one goes down with it. The victim is
	// the primary (the replica whose /v1/status says it leads) whenever one
	// leads and none was hit in the last two rounds; the primary is
	// killed and stopped in turn, starting with a kill. After a kill no
	// replica leads until the killed primary's session expires (4 s).
	for deadline := time.Now().Add(30 * time.Second); c.Leader(context.Background()) < 0; {
		if time.Now().After(deadline) {
			t.Fatal("no replica leads")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := rand.New(rand.NewPCG(2026, 11))
	var kills, stops, primaryKills, primaryStops, doubles, rounds int
	lastPrimaryHit := -3
	down := func(i int, kill bool) string {
		if kill {
			c.Kill(i)
			kills++
			return fmt.Sprintf("r%d killed", i)
		}
		if err := c.Stop(i); err != nil {
			t.Errorf("graceful stop of r%d: %v", i, err)
		}
		stops++
		return fmt.Sprintf("r%d stopped", i)
	}
	began := time.Now()
	for ; time.Since(began) < chaosFor; rounds++ {
		next := time.Now().Add(round)
		lctx, cancel := context.WithTimeout(context.Background(), time.Second)
		leader := c.Leader(lctx)
		cancel()
		victim, kill := r.IntN(c.Len()), r.IntN(2) == 0
		if leader >= 0 && rounds-lastPrimaryHit > 2 {
			victim, kill = leader, primaryKills <= primaryStops
		}
		victims := []int{victim}
		if r.IntN(4) == 0 {
			victims = append(victims, (victim+1+r.IntN(c.Len()-1))%c.Len())
			doubles++
		}
		var did []string
		for k, i := range victims {
			if k > 0 {
				kill = r.IntN(2) == 0
			}
			if i == leader {
				lastPrimaryHit = rounds
				if kill {
					primaryKills++
				} else {
					primaryStops++
				}
			}
			did = append(did, down(i, kill))
		}
		t.Logf("round %d at %s: primary r%d; %s; %d IDs taken", rounds, time.Since(began).Round(time.Millisecond), leader, strings.Join(did, ", "), taken.Load())
		time.Sleep(time.Duration(100+r.IntN(300)) * time.Millisecond)
		for _, i := range victims {
			if err := c.Start(i); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range victims {
			if err := c.WaitReady(i, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Until(next))
	}
	chaos := time.Since(began)

	// All up: the takers must take again, whichever replica leads now.
	before := taken.Load()
	deadline := time.Now().Add(20 * time.Second)
	for taken.Load() < before+10_000 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	after := taken.Load() - before
	stop()
	wg.Wait()

	// Every ID handed out once.
	var all idRuns
	for w := range held {
		all = append(all, held[w]...)
	}
	dups := all.overlaps()
	for _, d := range dups[:min(len(dups), 10)] {
		t.Errorf("handed out twice: %s", d)
	}
	// None of them is waiting in the recycled list to be handed out again.
	admin, err := seqzk.NewClient(testenv.Connect(t, z.Servers, 10*time.Second), seqzk.Options{Root: c.Root})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := admin.Describe(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range st.Recycled {
		if all.intersects(rg.Start, rg.End) {
			t.Errorf("recycled %d:%d holds IDs already handed out", rg.Start, rg.End)
		}
	}
	for _, e := range wrong {
		t.Errorf("an error the caller cannot act on: %s", e)
	}
	rec.mu.Lock()
	for _, e := range rec.refused {
		t.Errorf("a refused push: %s", e)
	}
	answered := fmt.Sprint(rec.byKind)
	rec.mu.Unlock()
	if taken.Load() < minIDs {
		t.Errorf("the takers took %d IDs; want at least %d", taken.Load(), minIDs)
	}
	if after < 10_000 {
		t.Errorf("after the last restart the takers took %d IDs in 20 s", after)
	}
	if primaryKills == 0 {
		t.Errorf("the primary was never killed")
	}
	t.Logf("%d IDs (%d after the chaos) by %d allocators, %d pushed back on close; %d rounds in %s: %d kills (%d of the primary), %d graceful stops (%d of the primary), %d rounds with two replicas down",
		taken.Load(), after, allocators.Load(), pushedBack.Load(), rounds, chaos.Round(time.Millisecond), kills, primaryKills, stops, primaryStops, doubles)
	t.Logf("errors returned: %v; replicas' error answers: %s", errsByKind, answered)
}

// actionable classifies an error a taker got: its kind, and whether the
// caller can act on it (ErrUnavailable: retry later; ErrUncertain: the
// documented answer of a push whose outcome is unknown; ErrNotHandedOut:
// the replica that handed the IDs out was restarted since, and leaves them
// unused). A refused push (ErrBadPush) or any other error is a failure.
func actionable(err error) (string, bool) {
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrBadPush):
		return "bad_push", false
	case errors.Is(err, client.ErrUnavailable):
		return "unavailable", true
	case errors.Is(err, client.ErrUncertain):
		return "uncertain", true
	case errors.Is(err, client.ErrNotHandedOut):
		return "not_handed_out", true
	case errors.As(err, &ae):
		return ae.Code, false
	}
	return "other", false
}

// answers is an http.RoundTripper that counts the replicas' error answers
// by code, and records refused pushes: also those of an Allocator's
// background push-back, whose error no caller sees.
type answers struct {
	mu      sync.Mutex
	byKind  map[string]int
	refused []string
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		kind := "no answer"
		if strings.Contains(err.Error(), "connection refused") {
			kind = "connection refused"
		}
		a.mu.Lock()
		a.byKind[kind]++
		a.mu.Unlock()
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil // the client sees the short body
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byKind[fmt.Sprintf("%d %s", resp.StatusCode, e.Error.Code)]++
	if e.Error.Code == "bad_push" && len(a.refused) < 20 {
		a.refused = append(a.refused, fmt.Sprintf("%s %s: %s", req.Method, req.URL.Path, e.Error.Message))
	}
	return resp, nil
}

// idRuns are IDs as runs of consecutive ones, in the order taken: a taker
// takes millions, mostly consecutive.
type idRuns [][2]int64

func (r *idRuns) add(id int64) {
	if n := len(*r); n > 0 && (*r)[n-1][1]+1 == id {
		(*r)[n-1][1] = id
		return
	}
	*r = append(*r, [2]int64{id, id})
}

// overlaps sorts the runs and describes every ID range in more than one.
func (r idRuns) overlaps() []string {
	sort.Slice(r, func(i, j int) bool { return r[i][0] < r[j][0] })
	var out []string
	end := int64(-1 << 63)
	for _, run := range r {
		if run[0] <= end {
			out = append(out, fmt.Sprintf("%d:%d", run[0], min(run[1], end)))
		}
		end = max(end, run[1])
	}
	return out
}

// intersects reports whether an ID in start..end is in r; r sorted.
func (r idRuns) intersects(start, end int64) bool {
	i, _ := slices.BinarySearchFunc(r, start, func(run [2]int64, id int64) int {
		if run[1] < id {
			return -1
		}
		return 1
	})
	// r[i] is the first run ending at or after start.
	return i < len(r) && r[i][0] <= end
}
