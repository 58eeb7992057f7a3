// Package bench measures seqkeeper against its limits: the in-process
// allocator beside a bare atomic counter, Next latency while ZooKeeper
// writes take milliseconds, ZooKeeper round trips per million IDs,
// compare-and-set contention beside a naive get-then-set loop, the HTTP
// sidecar, and the primary (restore, raises per second, memory per
// sequence). Everything runs against real servers (internal/testenv); the
// figures and how to read them are in docs/performance.md.
//
// The package holds only benchmarks, so 'go test ./...' runs nothing here
// unless -bench is given. Rerun everything with:
//
//	bash scripts/bench.sh            # the full set (about 15 minutes)
//	bash scripts/bench.sh --quick    # a short version
//
// or one row, for example:
//
//	go test -run '^$' -bench 'AllocatorNext' -count 5 ./bench/
package bench
