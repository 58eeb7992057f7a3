package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/zkclient"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// openStore returns a Store on a fresh MinIO bucket with the default
// options; call it again with the same s3 for a second Store on the same
// objects (a primary starting cold).
func openStore(b *testing.B, s3 *testenv.S3) *persist.Store {
	b.Helper()
	be, err := persist.NewS3(context.Background(), persist.S3Config{Bucket: s3.Bucket, Endpoint: s3.Endpoint,
		Region: s3.Region, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	s, err := persist.NewStore(be, persist.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// startPrimary runs a primary on e's root until the benchmark ends, on
// e.primaryZK when set (the session several roots' primaries share, as
// in one serve process), else on a session of its own.
func startPrimary(b *testing.B, e *env, store *persist.Store, tune func(*config.Primary)) *primary.Primary {
	b.Helper()
	cfg := config.DefaultPrimary()
	zc := e.primaryZK
	if zc == nil {
		zc = e.session()
	}
	seqs, err := seqzk.NewClient(zc, seqzk.Options{Root: e.root})
	if err != nil {
		b.Fatal(err)
	}
	cfg.MarkerPath = e.root + "-cluster"
	if tune != nil {
		tune(&cfg)
	}
	deps := primary.Deps{Sequences: seqs, Store: store, Holder: "bench"}
	if *primaryLog {
		zerolog.TimeFieldFormat = "15:04:05.000"
		deps.Logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).With().Timestamp().Logger()
	}
	p, err := primary.New(cfg, deps)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := p.Run(ctx)
		if ctx.Err() == nil {
			// Stopped on its own: say so now, not at the end of a wait
			// for what it will never do (waitUntil gives up on it).
			b.Errorf("the primary stopped: %v", err)
			err = nil
		}
		done <- err
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	return p
}

// waitUntil polls cond every 5 ms for up to limit, or until the benchmark
// has failed (a primary that stopped).
func waitUntil(b *testing.B, limit time.Duration, what string, cond func() bool) {
	b.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if b.Failed() {
			b.Fatalf("%s: given up, the benchmark has failed", what)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not done after %s", what, limit)
		}
	}
}

// tracking is how many sequences p follows, counted without listing them.
func tracking(p *primary.Primary) int { return p.Following() }

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRestore is the restore and memory row: the store holds N
// sequences that ZooKeeper lacks (a wiped ensemble); a primary starts
// cold, loads the store, persists the new ceilings and re-creates every
// znode. restore-s is from Run to Stats().Restored == N; tracked-s until
// the primary follows all N through its watcher. B/sequence is the heap
// the primary holds per maintained sequence (runtime.MemStats after GC,
// before the primary starts and once it tracks all N, its watcher's first
// sync is handled and the restore's log is compacted: the store's cache
// and the watcher's state included; the status is built only when asked
// for). 100,000
// sequences only with -bench.large:
//
//	SEQKEEPER_TEST_ZK_HEAP=1g go test -run '^$' -bench 'Restore' -benchtime 1x ./bench/ -bench.large
func BenchmarkRestore(b *testing.B) {
	sizes := []int{1000, 10_000}
	if *large {
		sizes = append(sizes, 100_000)
	}
	if *huge {
		sizes = []int{1_000_000}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("sequences=%d", n), func(b *testing.B) {
			for range b.N {
				restoreOnce(b, n)
			}
		})
	}
}

func restoreOnce(b *testing.B, n int) {
	b.StopTimer()
	ctx := context.Background()
	e := newEnv(b)
	s3 := testenv.ObjectStore(b)
	seed := openStore(b, s3)
	epoch, err := seed.AdvanceEpoch(ctx, "seed")
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]persist.Record, n)
	for i := range recs {
		recs[i] = persist.Record{Name: fmt.Sprintf("s%06d", i), Ceiling: int64(1000 + i), Start: 1, End: state.MaxID}
	}
	if err := seed.Put(ctx, epoch, recs...); err != nil {
		b.Fatal(err)
	}
	store := openStore(b, s3)
	before := heapAfterGC()
	b.StartTimer()
	start := time.Now()
	p := startPrimary(b, e, store, nil)
	limit := time.Duration(n)*10*time.Millisecond + time.Minute
	waitUntil(b, limit, "restore", func() bool { return p.Stats().Restored >= int64(n) })
	restored := time.Since(start)
	waitUntil(b, limit, "track", func() bool { return tracking(p) >= n })
	tracked := time.Since(start)
	b.StopTimer()
	// The memory a primary keeps, not what its start passes through: the
	// watcher's first full sync handled (its lists of every name freed)
	// and the restore's log folded into the bucket objects (which the
	// store's cache then holds, as it does at any time after a compaction).
	// The primary folds its log every CompactInterval (minutes) or once
	// CompactSegments writes wait, and a restore writes a handful: fold
	// what waits, as the primary's next compaction would, in its leader
	// epoch.
	leader, _, err := store.Epoch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	waitUntil(b, limit, "steady state", func() bool {
		if store.Pending() > 0 {
			if _, err := store.Compact(ctx, leader); err != nil {
				b.Fatal(err)
			}
		}
		return p.Stats().Syncs > 0 && store.Pending() == 0
	})
	after := heapAfterGC()
	if *heapProfile != "" {
		f, err := os.Create(*heapProfile)
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(pprof.WriteHeapProfile(f), f.Close()); err != nil {
			b.Fatal(err)
		}
	}
	// Said at once, on stderr (b.Logf shows only once the benchmark and
	// its clean-up end): the floors below take as long again, and the
	// clean-up of a million znodes many minutes.
	fmt.Fprintf(os.Stderr, "%d sequences: restored in %.2f s, followed in %.2f s, %.0f B/sequence\n",
		n, restored.Seconds(), tracked.Seconds(), (float64(after)-float64(before))/float64(n))
	// The floors need the server to hold twice as many znodes again: up
	// to 100,000 sequences only (a million more of each thrashed the
	// test server at a 6 GB heap).
	if n <= 100_000 {
		bare := bareCreate(b, e, n, false)
		guarded := bareCreate(b, e, n, true)
		b.ReportMetric(bare.Seconds(), "bare-create-s")
		b.ReportMetric(guarded.Seconds(), "guarded-create-s")
		b.ReportMetric(restored.Seconds()/bare.Seconds(), "restore/bare")
		b.ReportMetric(restored.Seconds()/guarded.Seconds(), "restore/guarded")
	}
	b.ReportMetric(restored.Seconds(), "restore-s")
	b.ReportMetric(tracked.Seconds(), "tracked-s")
	b.ReportMetric(float64(n)/restored.Seconds(), "sequences/s")
	b.ReportMetric((float64(after)-float64(before))/float64(n), "B/sequence")
	runtime.KeepAlive(p)
}

// bareCreate is the restore's floor: the time to create the
// same znodes (a state and its marker per sequence, the same data) under
// another root of the same server, in multi() transactions of 750
// sequences (about what seqzk.Keeper.Restore fits in its 512 KB), four in
// flight at once as it sends them, with nothing else: no store, no
// deletion records, no epoch. guarded adds what each restore transaction
// also carries: per sequence, the create and delete of its deletion
// record that make the transaction fail if a delete overtook the restore
// (seqzk's guardOps for a name never deleted), and the root's version
// bump that stamps the transaction's epoch.
func bareCreate(b *testing.B, e *env, n int, guarded bool) time.Duration {
	b.Helper()
	ctx := context.Background()
	zc := e.session()
	root := fmt.Sprintf("%s-bare-%t", e.root, guarded)
	meta := root + "/" + seqzk.MetaName
	if err := zc.EnsurePath(ctx, meta); err != nil {
		b.Fatal(err)
	}
	data := state.State{Start: 1, Next: 1001, Ceiling: 3000, End: state.MaxID, ZKEpoch: 7, Marker: "h-0123456789abcdef", PushFloor: 1001}.Encode()
	const perTxn, inflight = 750, 4
	sem := make(chan struct{}, inflight)
	errs := make(chan error, n/perTxn+1)
	start := time.Now()
	var wg sync.WaitGroup
	for first := 0; first < n; first += perTxn {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ops := make([]zkclient.Op, 0, 4*perTxn+1)
			for i := first; i < min(first+perTxn, n); i++ {
				name := fmt.Sprintf("s%06d", i)
				path := root + "/" + name
				ops = append(ops, zkclient.CreateOp(path, data, 0), zkclient.CreateOp(path+"/h-0123456789abcdef", nil, 0))
				if guarded {
					ops = append(ops, zkclient.CreateOp(meta+"/"+name, nil, 0), zkclient.DeleteOp(meta+"/"+name, 0))
				}
			}
			if guarded {
				ops = append(ops, zkclient.SetOp(root, nil, zkclient.AnyVersion))
			}
			if _, err := zc.Session().Multi(ctx, ops...); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return elapsed
}

// BenchmarkRaises is the raise-throughput row: how many sequences one
// primary keeps topped up per second. 200 sequences (MinReserve 100, a
// Runway so short the smoothed rate adds little) are drained by 8 clients,
// each take emptying a sequence's whole reserve, so every take calls for a
// raise and the next take of that sequence waits for it. Each raise is a
// store write (batched with others) and then a ZooKeeper compare-and-set.
// It also reports what the store bills: backend requests per raise, and
// bucket objects written per store write.
// The primary sizes reserves to cover recent bursts, so reserves grow
// during the run and IDs/s is not a measure of the primary; raises/s is:
//
//	go test -run '^$' -bench 'Raises' ./bench/ -bench.dur=5s
//
// raise-p99/bound measures the raise latency against its goal: its p99 over
// one store write plus one ZooKeeper multi(), their medians as the primary
// met them in the same run (store-write-p50-ms, zk-multi-p50-ms). With
// -bench.raiseclients=1 the same primary works under a light load.
func BenchmarkRaises(b *testing.B) {
	const sequences = 200
	clients := *raiseClients
	if clients < 1 || clients > sequences {
		b.Fatalf("-bench.raiseclients=%d: want 1 to %d", clients, sequences)
	}
	ctx := context.Background()
	e := newEnv(b)
	admin := e.admin()
	names := make([]string, sequences)
	for i := range names {
		names[i] = fmt.Sprintf("r%03d", i)
		if err := admin.Register(ctx, names[i], seqzk.Registration{}); err != nil {
			b.Fatal(err)
		}
	}
	store := openStore(b, testenv.ObjectStore(b))
	// The goal's bound: one store write (a PUT and the GET of the epoch
	// that confirms it) and one ZooKeeper multi(), as the primary itself
	// met them during the run.
	var storeTimes, zkTimes requestTimes
	store.ObserveRequests(storeTimes.observe)
	e.observeZK = zkTimes.observe
	p := startPrimary(b, e, store, func(c *config.Primary) {
		c.MinReserve, c.Runway = 100, time.Nanosecond
	})
	e.observeZK = nil
	waitUntil(b, time.Minute, "initialise", func() bool { return p.Stats().Initialised >= sequences })
	cs := make([]*sequence.Client, clients)
	for i := range cs {
		cs[i] = e.client()
	}
	before, reqsBefore := p.Stats(), store.Requests()
	storeTimes.on.Store(true)
	zkTimes.on.Store(true)
	ids := make([]int64, clients)
	deadline := time.Now().Add(*runFor)
	// Every take empties its sequence's reserve (it asks for more than
	// any reserve). For one take in eight, a watcher notes when the
	// raise that follows lands in ZooKeeper: the raise latency.
	emptied := make(chan raiseProbe, 1024)
	latencies := make(chan durations, 1)
	go func() { latencies <- watchRaises(ctx, admin, emptied) }()
	elapsed := goroutines(b, clients, func(i int) error {
		for k := 0; time.Now().Before(deadline); k++ {
			name := names[i+clients*(k%(sequences/clients))]
			got, err := cs[i].Take(ctx, name, 1_000_000)
			if err != nil {
				return err
			}
			ids[i] += got.Count()
			if k%8 == 0 && len(got) > 0 {
				select {
				case emptied <- raiseProbe{name: name, at: time.Now(), last: got[len(got)-1].End}:
				default:
				}
			}
		}
		return nil
	})
	close(emptied)
	storeTimes.on.Store(false)
	zkTimes.on.Store(false)
	raiseLatency := <-latencies
	after, reqs := p.Stats(), store.Requests()
	var total int64
	for _, n := range ids {
		total += n
	}
	raises := after.Raises - before.Raises
	puts := after.StorePuts - before.StorePuts
	b.ReportMetric(float64(raises)/elapsed.Seconds(), "raises/s")
	b.ReportMetric(float64(puts)/elapsed.Seconds(), "store-puts/s")
	b.ReportMetric(float64(raises)/float64(max(puts, 1)), "raises/put")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "IDs/s")
	// What the store bills: every GET and PUT (conflicts included).
	objects := reqs.Puts - reqsBefore.Puts
	b.ReportMetric(float64(objects+reqs.Gets-reqsBefore.Gets)/float64(max(raises, 1)), "store-requests/raise")
	b.ReportMetric(float64(objects)/float64(max(puts, 1)), "objects/store-write")
	b.ReportMetric(millis(raiseLatency.quantile(0.5)), "raise-p50-ms")
	b.ReportMetric(millis(raiseLatency.quantile(0.99)), "raise-p99-ms")
	bound := storeTimes.median("put") + storeTimes.median("get") + zkTimes.median("multi")
	b.ReportMetric(millis(storeTimes.median("put")+storeTimes.median("get")), "store-write-p50-ms")
	b.ReportMetric(millis(zkTimes.median("multi")), "zk-multi-p50-ms")
	b.ReportMetric(float64(raiseLatency.quantile(0.99))/float64(max(bound, 1)), "raise-p99/bound")
}

// raiseProbe is a take that emptied its sequence's reserve: its last ID.
type raiseProbe struct {
	name string
	at   time.Time
	last int64
}

// watchRaises waits, for every probe at once (up to 64), until the
// sequence's ceiling in ZooKeeper rises above the probe's last ID, and
// returns how long after the take each raise landed. (It once waited for
// one probe at a time, so a slow raise delayed the sighting of the raises
// behind it, and the figures included that wait.)
func watchRaises(ctx context.Context, admin *seqzk.Client, probes <-chan raiseProbe) durations {
	var mu sync.Mutex
	var out durations
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for pr := range probes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if d, ok := watchRaise(ctx, admin, pr); ok {
				mu.Lock()
				out = append(out, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// watchRaise waits until pr's raise is in ZooKeeper and returns how long
// after the take that was.
func watchRaise(ctx context.Context, admin *seqzk.Client, pr raiseProbe) (time.Duration, bool) {
	for {
		data, _, ch, err := admin.ZK().Session().GetW(ctx, admin.Path(pr.name))
		if err != nil {
			return 0, false
		}
		if st, err := state.ParseState(pr.name, data); err != nil || st.Ceiling > pr.last {
			return time.Since(pr.at), err == nil
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
		}
	}
}

// requestTimes collects the durations of requests by kind while on.
type requestTimes struct {
	on atomic.Bool
	mu sync.Mutex
	by map[string]durations
}

func (rt *requestTimes) observe(op string, d time.Duration) {
	if !rt.on.Load() {
		return
	}
	rt.mu.Lock()
	if rt.by == nil {
		rt.by = map[string]durations{}
	}
	rt.by[op] = append(rt.by[op], d)
	rt.mu.Unlock()
}

func (rt *requestTimes) median(op string) time.Duration {
	return rt.of(op).quantile(0.5)
}

// of returns the durations of op's requests.
func (rt *requestTimes) of(op string) durations {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.by[op]
}

// ops returns the kinds of requests seen, sorted.
func (rt *requestTimes) ops() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Sorted(maps.Keys(rt.by))
}
