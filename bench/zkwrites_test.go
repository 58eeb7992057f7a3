package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// BenchmarkZooKeeperWrites is the limit after one primary (see "When
// one primary is not enough" in docs/architecture.md): how many writes a
// second one ZooKeeper 3.8 server sustains in quorum mode with its
// transaction log fsynced (forceSync, the default), on a server of its own.
// Every take by a worker is one ZooKeeper write, and so is every raise the
// primary sends, so this bounds takes plus raises per second per ensemble,
// however many primaries (roots) share it.
//
//   - set/inflight=N: N single setData requests in flight on one session,
//     each on a znode of its own at its version (a compare-and-set, as a
//     take or raise is, without the marker check).
//   - multi/sets=K/inflight=N: transactions of K setData operations on K
//     znodes, N in flight: the shape of raises batched into multi().
//   - multi/raises=K/inflight=N: transactions of K raises as seqzk writes
//     them, a check of the sequence's marker and the setData (2K ops).
//     raises=1 is the write of every take and of every raise today.
//
// Every write carries a real encoded sequence state. Metrics: writes/s
// (transactions committed), ops/s (operations inside them), sets/s
// (znodes written: sequences updated), the latency of one write, and from
// the server's own counters (mntr) how many writes shared one fsync of the
// transaction log (ZooKeeper commits a batch per fsync) and how long an
// fsync took.
//
//	go test -run '^$' -bench 'ZooKeeperWrites' ./bench/ -bench.dur=5s
//
// Read ratios within one run: client and server share the machine's cores,
// and the test server's JVM is tuned to start fast, not to run fast (C1
// only, serial GC, 256 MB heap).
func BenchmarkZooKeeperWrites(b *testing.B) {
	ens := testenv.StartEnsemble(b, 1)
	ctx := context.Background()
	if mode, err := ens.Mode(ctx, 0); err != nil || mode == "standalone" {
		b.Fatalf("ZooKeeper mode %q (%v); want quorum mode (leader)", mode, err)
	}
	payload := state.State{Start: 1, Next: 123456789, Ceiling: 123556789, End: state.MaxID, ZKEpoch: 7, Marker: "h-0123456789abcdef"}.Encode()
	cases := []struct {
		name           string
		sets, inflight int
		checks         bool
	}{
		{"set/inflight=1", 1, 1, false},
		{"set/inflight=16", 1, 16, false},
		{"set/inflight=64", 1, 64, false},
		{"multi/raises=1/inflight=1", 1, 1, true},
		{"multi/raises=1/inflight=16", 1, 16, true},
		{"multi/sets=10/inflight=1", 10, 1, false},
		{"multi/sets=100/inflight=1", 100, 1, false},
		{"multi/sets=10/inflight=16", 10, 16, false},
		{"multi/sets=100/inflight=16", 100, 16, false},
		{"multi/raises=10/inflight=16", 10, 16, true},
		{"multi/raises=100/inflight=16", 100, 16, true},
	}
	runs := 0 // -count repeats each case on the same server: a root per run
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			runs++
			zc, err := zkclient.Dial(ctx, ens.Servers(), zkclient.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(zc.Close)
			w := newWriters(b, zc, fmt.Sprintf("/zkwrites-%d", runs), tc.inflight, tc.sets, tc.checks, payload)
			before := fsyncs(b, ens.Addr(0))
			lat, elapsed := forTime(b, tc.inflight, func(g int) error { return w.write(ctx, g) })
			synced := fsyncs(b, ens.Addr(0)).minus(before)
			n := float64(len(lat))
			b.ReportMetric(n/elapsed.Seconds(), "writes/s")
			b.ReportMetric(n*float64(w.opsPerWrite())/elapsed.Seconds(), "ops/s")
			b.ReportMetric(n*float64(tc.sets)/elapsed.Seconds(), "sets/s")
			b.ReportMetric(millis(lat.quantile(0.5)), "p50-ms")
			b.ReportMetric(millis(lat.quantile(0.99)), "p99-ms")
			b.ReportMetric(n/max(synced.count, 1), "writes/fsync")
			b.ReportMetric(synced.millis/max(synced.count, 1), "fsync-ms")
		})
	}
}

// writers holds, for each goroutine, the znodes it alone writes and their
// versions, so no write ever conflicts with another.
type writers struct {
	zc       *zkclient.Client
	via      []*zkclient.Client // when set, goroutine g writes through via[g%len(via)] instead of zc
	paths    [][]string         // [goroutine][set]
	versions [][]int32
	marker   string // checked at version 0 before each set when checks is set
	checks   bool
	data     []byte
}

func newWriters(b *testing.B, zc *zkclient.Client, root string, goroutines, sets int, checks bool, data []byte) *writers {
	b.Helper()
	ctx := context.Background()
	w := &writers{zc: zc, marker: root + "/h-marker", checks: checks, data: data}
	if err := zc.EnsurePath(ctx, w.marker); err != nil {
		b.Fatal(err)
	}
	for g := range goroutines {
		paths := make([]string, sets)
		ops := make([]zkclient.Op, sets)
		for s := range paths {
			paths[s] = fmt.Sprintf("%s/g%d-s%d", root, g, s)
			ops[s] = zkclient.CreateOp(paths[s], data, 0)
		}
		if _, err := zc.Session().Multi(ctx, ops...); err != nil {
			b.Fatal(err)
		}
		w.paths = append(w.paths, paths)
		w.versions = append(w.versions, make([]int32, sets))
	}
	return w
}

// opsPerWrite is the number of operations in one write.
func (w *writers) opsPerWrite() int {
	if w.checks {
		return 2 * len(w.paths[0])
	}
	return len(w.paths[0])
}

// write sends goroutine g's next write: a single setData, or a multi() of
// setData operations (each after a marker check with checks).
func (w *writers) write(ctx context.Context, g int) error {
	paths, versions := w.paths[g], w.versions[g]
	if len(paths) == 1 && !w.checks {
		stat, err := w.client(g).Session().Set(ctx, paths[0], w.data, versions[0])
		if err != nil {
			return err
		}
		versions[0] = stat.Version
		return nil
	}
	per := w.opsPerWrite() / len(paths) // 1, or 2 with the marker check first
	ops := make([]zkclient.Op, 0, w.opsPerWrite())
	for i, p := range paths {
		if w.checks {
			ops = append(ops, zkclient.CheckOp(w.marker, 0))
		}
		ops = append(ops, zkclient.SetOp(p, w.data, versions[i]))
	}
	res, err := w.client(g).Session().Multi(ctx, ops...)
	if err != nil {
		return err
	}
	for i := range paths {
		versions[i] = res[i*per+per-1].Stat.Version
	}
	return nil
}

// client is goroutine g's client.
func (w *writers) client(g int) *zkclient.Client {
	if len(w.via) > 0 {
		return w.via[g%len(w.via)]
	}
	return w.zc
}

// fsyncTotals are the server's counts of transaction log fsyncs.
type fsyncTotals struct{ count, millis float64 }

func (f fsyncTotals) minus(o fsyncTotals) fsyncTotals {
	return fsyncTotals{f.count - o.count, f.millis - o.millis}
}

// fsyncs reads the fsync counters from the server's mntr.
func fsyncs(b *testing.B, addr string) fsyncTotals {
	b.Helper()
	out, err := zkclient.FourLetterWord(context.Background(), addr, "mntr")
	if err != nil {
		b.Fatal(err)
	}
	var f fsyncTotals
	found := 0
	for line := range strings.Lines(out) {
		key, val, _ := strings.Cut(strings.TrimSpace(line), "\t")
		v, err := strconv.ParseFloat(val, 64)
		switch {
		case err != nil:
		case key == "zk_cnt_fsynctime":
			f.count, found = v, found+1
		case key == "zk_sum_fsynctime":
			f.millis, found = v, found+1
		}
	}
	if found != 2 {
		b.Fatalf("mntr of %s lacks zk_cnt_fsynctime or zk_sum_fsynctime:\n%s", addr, out)
	}
	return f
}
