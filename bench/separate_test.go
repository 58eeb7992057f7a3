package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// BenchmarkSeparateZnodes is the separate-znode limit that windows are
// measured against: each client compare-and-sets a znode of its
// own with its cached version, so there is no contention and every ID
// costs exactly one round trip. "set" is a bare setData; "marker" is the
// transaction a window take sends (a check of the validation marker and
// the setData). Single-ID takes, -bench.dur each:
//
//	go test -run '^$' -bench 'SeparateZnodes' ./bench/ -bench.dur=5s
//
// SEQKEEPER_TEST_ZK points it at a running ZooKeeper (bench/windows-cold.sh
// does, to measure it in the same run as seqkeeper and Curator).
func BenchmarkSeparateZnodes(b *testing.B) {
	for _, kind := range []string{"set", "marker"} {
		b.Run(fmt.Sprintf("%s/clients=8", kind), func(b *testing.B) {
			const clients = 8
			e := newEnv(b)
			ctx := context.Background()
			conns := make([]*zkclient.Client, clients)
			marker := e.root + "/h-marker"
			if _, err := e.session().Session().Create(ctx, marker, nil, 0); err != nil {
				b.Fatal(err)
			}
			versions := make([]int32, clients)
			for i := range conns {
				conns[i] = e.session()
				if _, err := conns[i].Session().Create(ctx, fmt.Sprintf("%s/own-%d", e.root, i), make([]byte, 8), 0); err != nil {
					b.Fatal(err)
				}
			}
			data := make([]byte, 8)
			all, elapsed := forTime(b, clients, func(i int) error {
				path := fmt.Sprintf("%s/own-%d", e.root, i)
				if kind == "set" {
					stat, err := conns[i].Session().Set(ctx, path, data, versions[i])
					if err != nil {
						return err
					}
					versions[i] = stat.Version
					return nil
				}
				res, err := conns[i].Session().Multi(ctx, zkclient.CheckOp(marker, 0), zkclient.SetOp(path, data, versions[i]))
				if err != nil {
					return err
				}
				versions[i] = res[1].Stat.Version
				return nil
			})
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "takes/s")
			b.ReportMetric(millis(all.quantile(0.5)), "p50-ms")
			b.ReportMetric(millis(all.quantile(0.99)), "p99-ms")
			b.ReportMetric(millis(all.quantile(0.999)), "p99.9-ms")
		})
	}
}
