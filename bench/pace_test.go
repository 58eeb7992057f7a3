package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

var (
	paceInflight  = flag.Int("bench.inflight", 32, "BenchmarkPace: the takers (and the ZooKeeper writers of its baseline) in flight")
	paceLinger    = flag.Duration("bench.raiselinger", 20*time.Millisecond, "BenchmarkPace: how long the raise floor's raisers gather a multi() (up to 80 znodes) before they write it")
	paceFlights   = flag.Int("bench.raiseflights", 1, "BenchmarkPace: the raise floor's multi()s in flight")
	paceStoreRate = flag.Float64("bench.storerate", 0, "BenchmarkPace: the primary's store_write_rate (0: its default)")
	paceSessions  = flag.Int("bench.sessions", 0, "BenchmarkPace: the ZooKeeper sessions the takers share (default: one each, as separate workers; the baseline's writers share one)")
)

// BenchmarkPace measures how many raises a second one
// primary makes when every take empties a reserve, as a share of what the
// same ZooKeeper server takes in marker-checked writes at the same number
// in flight, both measured in this run on the same server, alternated:
// the writes, the raises, the writes again.
//
//   - The baseline (zk-writes/s) is BenchmarkZooKeeperWrites's
//     multi/raises=1: -bench.inflight goroutines on one session, each
//     writing its own znode by compare-and-set with its marker checked
//     (the write of every take and of every raise).
//   - The load: -bench.inflight takers, each on a session of its own as
//     separate workers are (-bench.sessions=1 puts them all on one, as
//     the baseline's writers are), each on its own sequences (64 each), taking a sequence's whole reserve at every
//     take, so that every take calls for a raise. The reserve is fixed at
//     100 IDs (min_reserve = max_reserve), so the load does not change as
//     it runs. A taker that comes back to a sequence before its raise
//     landed waits for it (waits/take).
//
// raises/zk-write is the goal's ratio: raises/s over the mean of the two
// baseline runs.
//
// The takers' floor (take-floor/s), measured beside each baseline, is
// what the takers' own requests allow with no primary at all:
// -bench.inflight goroutines, each on a session of its own (as the
// takers), each reading its own znode and then writing it with its marker
// checked, which is what a take that finds its copy emptied does (the
// read of the state the primary raised, then the take). Every take here
// calls for a raise, so raises/s cannot pass it: take-floor/zk-write is
// the ceiling of the goal's ratio for this load on this server, and
// raises/take-floor how much of it the raises themselves (the primary's
// writes, its watch's notifications, its reads) cost. The raise floor
// (raise-floor/s) adds to the takers' floor the raises' own writes and
// nothing else (raiseFloorOf): what any primary that writes its raises to
// ZooKeeper leaves at best.
//
// store-puts/raise is what S3 bills for the raises (the store's own PUT
// count), and raise latency is not here (BenchmarkRaises has it).
//
//	go test -run '^$' -bench 'Pace' ./bench/ -bench.dur=5s -bench.inflight=32
func BenchmarkPace(b *testing.B) {
	const perTaker, reserve = 64, 100
	n := *paceInflight
	if n < 1 || n > 256 {
		b.Fatalf("-bench.inflight=%d: want 1 to 256", n)
	}
	ctx := context.Background()
	e := newEnv(b)
	zc := e.session()
	payload := state.State{Start: 1, Next: 123456789, Ceiling: 123556789, End: state.MaxID, ZKEpoch: 7, Marker: "h-0123456789abcdef"}.Encode()
	w := newWriters(b, zc, e.root+"-zkwrites", n, 1, true, payload)
	baseline := func() float64 { return perSecond(b, n, func(g int) error { return w.write(ctx, g) }) }
	tf := newWriters(b, zc, e.root+"-takefloor", n, 1, true, payload)
	for range n {
		tf.via = append(tf.via, e.session())
	}
	// The same writes from as many sessions as the takers have: the
	// higher of the two baselines is the server's ceiling.
	ws := newWriters(b, zc, e.root+"-zkwrites-sessions", n, 1, true, payload)
	ws.via = tf.via
	baselineSessions := func() float64 { return perSecond(b, n, func(g int) error { return ws.write(ctx, g) }) }
	floor := func() float64 {
		return perSecond(b, n, func(g int) error {
			if _, _, err := tf.client(g).Session().Get(ctx, tf.paths[g][0]); err != nil {
				return err
			}
			return tf.write(ctx, g)
		})
	}

	admin := e.admin()
	names := make([]string, n*perTaker)
	for i := range names {
		names[i] = fmt.Sprintf("p%05d", i)
	}
	register(b, admin, names)
	store := openStore(b, testenv.ObjectStore(b))
	var primaryOps requestTimes
	e.observeZK = primaryOps.observe
	p := startPrimary(b, e, store, func(c *config.Primary) {
		c.MinReserve, c.MaxReserve, c.Runway = reserve, reserve, time.Nanosecond
		if *paceStoreRate > 0 {
			c.StoreWriteRate = *paceStoreRate
		}
	})
	e.observeZK = nil
	waitUntil(b, 2*time.Minute, "initialise", func() bool { return p.Stats().Initialised >= int64(len(names)) })
	if *paceSessions == 0 {
		*paceSessions = n
	}
	if *paceSessions < 1 || *paceSessions > n {
		b.Fatalf("-bench.sessions=%d: want 1 to -bench.inflight (%d)", *paceSessions, n)
	}
	sessions := make([]*seqzk.Client, *paceSessions)
	for i := range sessions {
		sessions[i] = e.admin()
	}
	cs := make([]*seqzk.Client, n)
	for i := range cs {
		cs[i] = sessions[i%len(sessions)]
	}

	var floorRaises, floorMultis atomic.Int64
	raiseFloor := raiseFloorOf(b, zc, newWriters(b, zc, e.root+"-raisefloor", n, perTaker, true, payload), tf.via, payload, &floorRaises, &floorMultis, false)
	var watchedRaises, watchedMultis atomic.Int64
	watchedFloor := raiseFloorOf(b, e.session(), newWriters(b, zc, e.root+"-watchedfloor", n, perTaker, true, payload), tf.via, payload, &watchedRaises, &watchedMultis, true)
	before, sessionsBefore, floorBefore, raiseFloorBefore, watchedBefore := baseline(), baselineSessions(), floor(), raiseFloor(), watchedFloor()
	var takerReqs0 int64
	for _, c := range sessions {
		takerReqs0 += c.Stats().Requests
	}
	primaryOps.on.Store(true)
	st0, req0 := p.Stats(), store.Requests()
	var takes, ids atomic.Int64
	deadline := time.Now().Add(*runFor)
	elapsed := goroutines(b, n, func(i int) error {
		mine := names[i*perTaker : (i+1)*perTaker]
		for k := 0; time.Now().Before(deadline); k++ {
			got, err := cs[i].Take(ctx, mine[k%perTaker], 1_000_000)
			if err != nil {
				return err
			}
			takes.Add(1)
			ids.Add(got.Count())
		}
		return nil
	})
	st1, req1 := p.Stats(), store.Requests()
	primaryOps.on.Store(false)
	// forTime resets the benchmark's timer and stops it: started again,
	// the time it keeps is the last baseline's, and one run is enough.
	watchedAfter, raiseFloorAfter, floorAfter, sessionsAfter := watchedFloor(), raiseFloor(), floor(), baselineSessions()
	b.StartTimer()
	after := baseline()

	var waits, takerReqs int64
	for _, c := range sessions {
		waits += c.Stats().Waits
		takerReqs += c.Stats().Requests
	}
	raises := float64(st1.Raises - st0.Raises)
	secs := elapsed.Seconds()
	writes := (before + after) / 2
	b.ReportMetric(raises/secs, "raises/s")
	b.ReportMetric(writes, "zk-writes/s")
	b.ReportMetric(raises/secs/writes, "raises/zk-write")
	writesSessions := (sessionsBefore + sessionsAfter) / 2
	b.ReportMetric(writesSessions, "zk-writes-sessions/s")
	b.ReportMetric(raises/secs/max(writes, writesSessions), "raises/zk-write-max")
	takeFloor := (floorBefore + floorAfter) / 2
	b.ReportMetric(takeFloor, "take-floor/s")
	b.ReportMetric(takeFloor/max(writes, writesSessions), "take-floor/zk-write-max")
	b.ReportMetric(raises/secs/takeFloor, "raises/take-floor")
	rf := (raiseFloorBefore + raiseFloorAfter) / 2
	b.ReportMetric(rf, "raise-floor/s")
	b.ReportMetric(rf/max(writes, writesSessions), "raise-floor/zk-write-max")
	b.ReportMetric(raises/secs/rf, "raises/raise-floor")
	b.ReportMetric(float64(floorRaises.Load())/float64(max(floorMultis.Load(), 1)), "raise-floor-raises/multi")
	wf := (watchedBefore + watchedAfter) / 2
	b.ReportMetric(wf, "watched-floor/s")
	b.ReportMetric(wf/rf, "watched-floor/raise-floor")
	b.ReportMetric(raises/secs/wf, "raises/watched-floor")
	b.ReportMetric(float64(takes.Load())/secs, "takes/s")
	b.ReportMetric(float64(waits)/float64(max(takes.Load(), 1)), "waits/take")
	b.ReportMetric(float64(req1.Puts-req0.Puts)/max(raises, 1), "store-puts/raise")
	b.ReportMetric(raises/float64(max(st1.StorePuts-st0.StorePuts, 1)), "raises/store-write")
	b.ReportMetric(float64(takerReqs-takerReqs0)/float64(max(takes.Load(), 1)), "zk-requests/take")
	var primaryReqs int
	var perRaise strings.Builder
	for _, op := range primaryOps.ops() {
		n := len(primaryOps.of(op))
		primaryReqs += n
		fmt.Fprintf(&perRaise, "%s %.3f; ", op, float64(n)/max(raises, 1))
	}
	b.ReportMetric(float64(primaryReqs)/max(raises, 1), "primary-zk-requests/raise")
	b.ReportMetric(raises/float64(max(len(primaryOps.of("multi")), 1)), "primary-raises/multi")
	b.Logf("primary's ZooKeeper requests per raise: %s", perRaise.String())
	b.Logf("inflight %d: baseline %.0f then %.0f writes/s; from %d sessions %.0f then %.0f writes/s; takers' floor %.0f then %.0f takes/s; with the raises' writes %.0f then %.0f; and their watches %.0f then %.0f; %.0f raises/s over %.1f s; %d IDs", n, before, after, n, sessionsBefore, sessionsAfter, floorBefore, floorAfter, raiseFloorBefore, raiseFloorAfter, watchedBefore, watchedAfter, raises/secs, secs, ids.Load())
}

// register registers names through admin, many at once.
func register(b *testing.B, admin *seqzk.Client, names []string) {
	b.Helper()
	ctx := context.Background()
	sem := make(chan struct{}, 64)
	errs := make(chan error, len(names))
	for _, name := range names {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- admin.Register(ctx, name, seqzk.Registration{})
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkZooKeeperRequestCost is what BenchmarkPace's requests cost the
// server, each measured alone at -bench.inflight in flight on one
// session, each goroutine on its own znode: a marker-checked write (a take,
// a raise), a read, a read that sets a data watch, and a write after a
// watching read (the write fires the watch: a notification).
//
//	go test -run '^$' -bench 'ZooKeeperRequestCost' ./bench/ -bench.dur=3s
func BenchmarkZooKeeperRequestCost(b *testing.B) {
	n := *paceInflight
	ctx := context.Background()
	e := newEnv(b)
	zc := e.session()
	payload := state.State{Start: 1, Next: 123456789, Ceiling: 123556789, End: state.MaxID, ZKEpoch: 7, Marker: "h-0123456789abcdef"}.Encode()
	w := newWriters(b, zc, e.root+"-cost", n, 1, true, payload)
	read := func(g int) error { _, _, err := zc.Session().Get(ctx, w.paths[g][0]); return err }
	readW := func(g int) error { _, _, err := zc.Session().GetQ(ctx, w.paths[g][0]); return err }
	cases := []struct {
		name string
		op   func(g int) error
	}{
		{"write", func(g int) error { return w.write(ctx, g) }},
		{"read", read},
		{"read+watch", readW},
		{"read+watch,write", func(g int) error {
			if err := readW(g); err != nil {
				return err
			}
			return w.write(ctx, g)
		}},
		{"read,write", func(g int) error {
			if err := read(g); err != nil {
				return err
			}
			return w.write(ctx, g)
		}},
	}
	var hundred []string
	for len(hundred) < 100 {
		hundred = append(hundred, w.paths[len(hundred)%n][0])
	}
	cases = append(cases, struct {
		name string
		op   func(g int) error
	}{"multiRead=100", func(g int) error {
		_, err := zc.Session().MultiRead(ctx, hundred...)
		return err
	}})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportMetric(perSecond(b, n, tc.op), "ops/s")
		})
	}
	// Last: a persistent watch on every znode, then writes (each a
	// notification), so that the cases above run without it.
	b.Run("write,persistent-watch", func(b *testing.B) {
		watcher := e.session()
		for g := range n {
			if err := watcher.Session().AddWatch(ctx, w.paths[g][0], false); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(perSecond(b, n, func(g int) error { return w.write(ctx, g) }), "ops/s")
	})
}

// raiseFloorOf returns a measurement of the raise floor: goroutines as
// the takers (w's, one per path set, each through its session of via),
// each cycling over its own znodes as the takers over their sequences:
// it reads one, writes it at the version read with the marker checked (a
// take), and hands it to the raisers. The raisers, on one session (zc, as
// the primary's), write what they are handed as the primary writes
// raises (raiseall.go): per znode a marker check and a set, up to 80
// znodes per multi(), gathered for up to -bench.raiselinger, with
// -bench.raiseflights of them in flight (by default the batches come out
// about as large as the primary's, whose raises wait for a store write;
// the benchmark reports both). No watch, no read, no store: only the
// requests a raise cannot do without. A taker whose znode's raise has not
// landed yet reads again. raises and multis count what the raisers wrote.
//
// watched adds the watches that a primary learning of takes by ZooKeeper's
// notifications cannot do without (the watched floor): the raisers'
// session holds a persistent watch on every znode, as the primary does on
// every sequence, so that every take and every raise is a notification to
// it, and each taker's read sets a data watch, as a taker's read of an
// emptied sequence does to hear of its raise. zc is then a session of the
// raise floor's own, since persistent watches are not removed.
func raiseFloorOf(b *testing.B, zc *zkclient.Client, w *writers, via []*zkclient.Client, payload []byte, raises, multis *atomic.Int64, watched bool) func() float64 {
	w.via = via
	ctx := context.Background()
	read := func(c *zkclient.Client, p string) (*zkclient.Stat, error) {
		_, st, err := c.Session().Get(ctx, p)
		return st, err
	}
	if watched {
		for _, ps := range w.paths {
			for _, p := range ps {
				if err := zc.Session().AddWatch(ctx, p, false); err != nil {
					b.Fatal(err)
				}
			}
		}
		read = func(c *zkclient.Client, p string) (*zkclient.Stat, error) {
			_, st, err := c.Session().GetQ(ctx, p)
			return st, err
		}
	}
	return func() float64 {
		type job struct{ g, k int }
		jobs := make(chan job, 4096)
		done := make(chan struct{})
		var raisers sync.WaitGroup
		for range max(*paceFlights, 1) {
			raisers.Go(func() {
				for {
					var batch []job
					select {
					case j := <-jobs:
						batch = append(batch, j)
					case <-done:
						return
					}
					linger := time.NewTimer(*paceLinger)
				fill:
					for len(batch) < 80 {
						select {
						case j := <-jobs:
							batch = append(batch, j)
						case <-linger.C:
							break fill
						}
					}
					linger.Stop()
					ops := make([]zkclient.Op, 0, 2*len(batch))
					for _, j := range batch {
						ops = append(ops, zkclient.CheckOp(w.marker, 0), zkclient.SetOp(w.paths[j.g][j.k], payload, zkclient.AnyVersion))
					}
					if _, err := zc.Session().Multi(ctx, ops...); err != nil {
						b.Errorf("raise floor: %v", err)
						return
					}
					raises.Add(int64(len(batch)))
					multis.Add(1)
				}
			})
		}
		next := make([]int, len(w.paths))
		rate := perSecond(b, len(w.paths), func(g int) error {
			k := next[g]
			next[g] = (k + 1) % len(w.paths[g])
			p, c := w.paths[g][k], w.client(g)
			for {
				st, err := read(c, p)
				if err != nil {
					return err
				}
				_, err = c.Session().Multi(ctx, zkclient.CheckOp(w.marker, 0), zkclient.SetOp(p, payload, st.Version))
				if zkclient.FailedOp(err) == 1 && errors.Is(err, zkclient.ErrBadVersion) {
					continue
				}
				if err != nil {
					return err
				}
				jobs <- job{g, k}
				return nil
			}
		})
		close(done)
		raisers.Wait()
		return rate
	}
}

// perSecond runs op on g goroutines for -bench.dur (forTime) and returns
// how many it completed a second.
func perSecond(b *testing.B, g int, op func(i int) error) float64 {
	lat, elapsed := forTime(b, g, op)
	return float64(len(lat)) / elapsed.Seconds()
}
