package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The flags below belong to the test binary: with 'go test' they go after
// the package, e.g. go test -bench Contention ./bench/ -bench.dur=5s.
var (
	// runFor bounds the benchmarks that run for a fixed time against
	// ZooKeeper instead of b.N times (a ZooKeeper write takes
	// milliseconds, so b.N would be tiny and noisy).
	runFor = flag.Duration("bench.dur", 3*time.Second, "how long each ZooKeeper-bound benchmark runs")
	// raiseClients is BenchmarkRaises's load.
	raiseClients = flag.Int("bench.raiseclients", 8, "BenchmarkRaises: the clients draining the sequences (1 to 200)")
	// shortRoot puts the benchmark's sequences under a root as long as the
	// default one, instead of under the shared server's test root (about
	// 70 characters): every watched znode's path is kept in memory.
	shortRoot = flag.Bool("bench.shortroot", false, "use a root as long as the default /all-sequences instead of one under the test root")
	// large enables the restore of 100,000 sequences (about a minute).
	large = flag.Bool("bench.large", false, "also restore 100,000 sequences in BenchmarkRestore")
	// huge restores 1,000,000 instead (the idle load at full size; the server
	// needs SEQKEEPER_TEST_ZK_HEAP=4g or so).
	huge = flag.Bool("bench.huge", false, "restore 1,000,000 sequences in BenchmarkRestore (only that size)")
	// heapProfile names a file for the heap profile BenchmarkRestore
	// writes once the primary tracks every sequence (what B/sequence
	// counts; -test.memprofile is written after the primary stopped).
	heapProfile = flag.String("bench.heapprofile", "", "write BenchmarkRestore's heap profile, taken with the primary tracking every sequence, to this file")
	// primaryLog shows the benchmarks' primaries at work: their log, with
	// millisecond timestamps, goes to stderr (the phases of a restore,
	// say).
	primaryLog = flag.Bool("bench.primarylog", false, "log what the benchmarks' primaries do to stderr, with millisecond timestamps")
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one benchmark's sequences root on the shared real ZooKeeper.
type env struct {
	b       *testing.B
	servers []string
	root    string
	// observeZK, while set, is the ObserveRequest of the sessions opened.
	observeZK func(op string, d time.Duration)
	// primaryZK, when set, is the session startPrimary runs primaries on.
	primaryZK *zkclient.Client
}

func newEnv(b *testing.B) *env {
	b.Helper()
	z := testenv.ZooKeeper(b)
	e := &env{b: b, servers: z.Servers, root: z.Root + "/all-sequences"}
	if *shortRoot {
		// As long as the default root, /all-sequences, and unique on the
		// shared server.
		e.root = fmt.Sprintf("/all-seq-%05x", rand.N(1<<20))
		// Cleaned up only on a server others use (SEQKEEPER_TEST_ZK): a
		// server this binary started goes with it, and deleting a
		// million sequences from it took half an hour.
		if os.Getenv("SEQKEEPER_TEST_ZK") != "" {
			conn := testenv.Connect(b, z.Servers, 10*time.Second)
			b.Cleanup(func() { _ = testenv.DeleteAll(conn, e.root) })
		}
	}
	if err := e.session().EnsurePath(context.Background(), e.root); err != nil {
		b.Fatal(err)
	}
	return e
}

// session opens a ZooKeeper session of its own, closed when the
// benchmark ends.
func (e *env) session() *zkclient.Client {
	e.b.Helper()
	c, err := zkclient.Dial(context.Background(), e.servers, zkclient.Options{SessionTimeout: 10 * time.Second,
		ObserveRequest: e.observeZK})
	if err != nil {
		e.b.Fatal(err)
	}
	e.b.Cleanup(c.Close)
	return c
}

// client returns a worker's sequence client on a session of its own.
func (e *env) client() *sequence.Client {
	e.b.Helper()
	c, err := sequence.NewClient(e.session(), sequence.Options{Root: e.root})
	if err != nil {
		e.b.Fatal(err)
	}
	return c
}

// admin returns a client with the primary's powers on a session of its own.
func (e *env) admin() *seqzk.Client {
	e.b.Helper()
	c, err := seqzk.NewClient(e.session(), seqzk.Options{Root: e.root})
	if err != nil {
		e.b.Fatal(err)
	}
	return c
}

// create registers name and sets its ceiling, standing in for the primary
// (a ceiling of 1<<50 never needs raising during a benchmark).
func (e *env) create(name string, r seqzk.Registration) *seqzk.Client {
	e.b.Helper()
	c := e.admin()
	ctx := context.Background()
	if err := c.Register(ctx, name, r); err != nil {
		e.b.Fatal(err)
	}
	if _, err := c.Keeper().Revalidate(ctx, name, 0, 1<<50); err != nil {
		e.b.Fatal(err)
	}
	return c
}

// hist is a latency histogram with 1 ns buckets up to histLinear and the
// rest kept exactly; recording costs an index and an increment, so timing
// every call of a 20 ns operation stays cheap.
type hist struct {
	counts []uint32
	slow   []time.Duration
	n      int64
}

const histLinear = 1 << 14 // 16.4 µs

func newHist() *hist { return &hist{counts: make([]uint32, histLinear)} }

func (h *hist) add(d time.Duration) {
	h.n++
	if d < histLinear {
		h.counts[max(d, 0)]++
		return
	}
	h.slow = append(h.slow, d)
}

func (h *hist) merge(o *hist) {
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.slow = append(h.slow, o.slow...)
}

// quantile returns the q-quantile (nearest rank).
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			return time.Duration(i)
		}
	}
	slices.Sort(h.slow)
	return h.slow[min(int(rank-seen-1), len(h.slow)-1)]
}

func (h *hist) max() time.Duration {
	if len(h.slow) > 0 {
		return slices.Max(h.slow)
	}
	for i := len(h.counts) - 1; i >= 0; i-- {
		if h.counts[i] > 0 {
			return time.Duration(i)
		}
	}
	return 0
}

// durations is an exact sample of slower operations (ZooKeeper and HTTP
// round trips), reported as quantiles.
type durations []time.Duration

func (ds durations) quantile(q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// goroutines runs body(0..g-1) in g goroutines with the benchmark timer
// running only while they do, fails b with the first error, and returns
// the time they took.
func goroutines(b *testing.B, g int, body func(i int) error) time.Duration {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, g)
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		wg.Go(func() {
			if err := body(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return elapsed
}

// forTime calls op from g goroutines until -bench.dur has passed (b.N is
// ignored: one run is long enough) and returns every call's latency and
// the time taken.
func forTime(b *testing.B, g int, op func(i int) error) (durations, time.Duration) {
	b.Helper()
	lat := make([]durations, g)
	deadline := time.Now().Add(*runFor)
	elapsed := goroutines(b, g, func(i int) error {
		for time.Now().Before(deadline) {
			t0 := time.Now()
			if err := op(i); err != nil {
				return err
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
		return nil
	})
	var all durations
	for _, l := range lat {
		all = append(all, l...)
	}
	return all, elapsed
}
