package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// severalRoots is the number of roots TestModelSeveralRoots serves from
// one process.
const severalRoots = 4

// TestModelSeveralRoots is TestModel for one process that serves several
// roots ('seqkeeper serve' with a roots: list): one ZooKeeper ensemble
// holds four roots (<run>/r0 .. <run>/r3, each with its own sequences
// root, marker and store directory), and the four roots' primaries run in
// one "process": on one ZooKeeper session, through one proxy, with one
// holder name. Each root has its own model and oracle, its own workers
// and its own sequences, with the same names in every root (the same
// name in two roots is two independent sequences), and its own driver
// goroutine running TestModel's operations on it, all four at once.
//
// The faults that hit a whole process or the whole ensemble are not a
// root's to choose: one fault driver (the test goroutine) injects them
// between pauses, for every root at once.
//
//   - Process faults hit the four primaries together, as they would in
//     one process, while the root drivers go on: handover (the process
//     stops its four primaries and exits; a new process starts four),
//     kill-primary (its session closes abruptly), compaction-crash (one
//     root's store dies in the middle of a compaction, then the process),
//     expire-primary (the process's network freezes until its session
//     expires), depose-primary (a new process takes over while the old one
//     lives on, its session and network up, each root's old primary for
//     an overlap of its own) and process-stall (a freeze shorter than the
//     session).
//   - Ensemble faults (zk-restart, zk-snapshot, zk-restore, zk-wipe) need
//     every root's bookkeeping to hold still: the fault driver holds off
//     every root driver (hold: a driver holds it for reading during each
//     operation, the fault driver for writing), checks every root's
//     preconditions (a restore or wipe only while every root's store
//     covers its sequences, a restore only to a copy taken after every
//     root's last store fault), and applies the consequences (rollbacks,
//     deleted names a restore may bring back) to every root.
//
// Left out, and covered by TestModel: move (it wipes the whole ensemble
// and replaces one root's store while the process keeps serving the
// others; moving one root of several is not what docs/cli.md describes).
// The delayed takes of a root do not run ZooKeeper or process faults
// themselves (they are the fault driver's), but a fault of the fault
// driver may strike while one is in flight.
//
// Every root's oracle checks what TestModel's does; a failure names its
// root. Settings are TestModel's (SEQKEEPER_MODEL_SEED, SEQKEEPER_MODEL_SKIP,
// SEQKEEPER_MODEL_TLS), except its length: SEQKEEPER_MODEL_ROOTS_DURATION
// (default 30s, 10s with -short). A seed picks the same operations for each root and the
// same faults, but four drivers and a fault driver interleave as the
// scheduler lets them, so a replay takes another path more often than
// TestModel's; there is no operation limit and no shrinking.
func TestModelSeveralRoots(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	set := loadSettings(t)
	set.duration = 30 * time.Second
	if v := os.Getenv("SEQKEEPER_MODEL_ROOTS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SEQKEEPER_MODEL_ROOTS_DURATION=%q: want a positive Go duration", v)
		}
		set.duration = d
	}
	t.Logf("seed %#x (SEQKEEPER_MODEL_SEED=%d), %d roots in one process, duration %s, skipping %v",
		set.seed, set.seed, severalRoots, set.duration, slices.Sorted(maps.Keys(set.skip)))
	outs, summary := runRoots(t, set)
	t.Log(summary)
	for _, out := range outs {
		if out.failed {
			t.Errorf("%s", out.report(set.seed))
		}
	}
}

// processWide are the operations of opTable that no root driver runs:
// the fault driver injects them for every root (see rootFaults), or, for
// move and birth-crash, nobody does: each replaces its root's primary
// with one of its own, outside the process that serves every root.
var processWide = []string{
	"handover", "kill-primary", "compaction-crash", "expire-primary", "depose-primary",
	"zk-restart", "zk-snapshot", "zk-restore", "zk-wipe", "move", "birth-crash",
}

// rootSeed is root i's seed: root 0's is the run's.
func rootSeed(seed uint64, i int) uint64 { return seed + uint64(i)*0x9e3779b97f4a7c15 }

// rootsRun is a run of several roots served by one process.
type rootsRun struct {
	t     *testing.T
	seed  uint64
	ens   *testenv.Ensemble
	roots []*env
	names []string // r0, r1, ...

	// hold keeps the root drivers off while the fault driver injects an
	// ensemble fault: a driver holds it for reading during each operation.
	hold    sync.RWMutex
	stop    atomic.Bool
	drivers sync.WaitGroup
	ops     []atomic.Int64 // operations started, per root

	// The fault driver's (the test goroutine's).
	proc    *process
	nproc   int
	copyDir string
	copies  []rootsCopy
	faults  []string
	closers []func()
	closed  sync.Once
}

// rootsCopy is a saved ZooKeeper data directory, with each root's
// operation index and store fault count when it was taken.
type rootsCopy struct {
	dir  string
	ops  []int
	gens []int
}

// runRoots is one run of several roots: set up, run the root drivers and
// the fault driver until the duration or the first failure, check, tear
// down. It returns each root's outcome and the summary.
func runRoots(t *testing.T, set settings) ([]outcome, string) {
	began := time.Now()
	rr := &rootsRun{t: t, seed: set.seed, ops: make([]atomic.Int64, severalRoots)}
	if set.tls {
		rr.ens = testenv.StartTLSEnsemble(t, 1)
	} else {
		rr.ens = testenv.StartEnsemble(t, 1)
	}
	rr.copyDir = t.TempDir()
	t.Cleanup(rr.close)
	run := fmt.Sprintf("/model-%08x", uint32(set.seed))
	skip := maps.Clone(set.skip)
	for _, name := range processWide {
		skip[name] = true
	}
	for i := range severalRoots {
		seed := rootSeed(set.seed, i)
		specs := slices.DeleteFunc(specsFor(seed), func(s seqSpec) bool { return set.skip["seq:"+s.name] })
		e := prepare(t, seed, newModel(specs), specs, rr.ens, set.tls, fmt.Sprintf("%s/r%d", run, i))
		e.skip = skip
		e.label = fmt.Sprintf(" root r%d (%s)", i, e.root)
		rr.roots = append(rr.roots, e)
		rr.names = append(rr.names, fmt.Sprintf("r%d", i))
	}
	rr.startProcess()
	for _, e := range rr.roots {
		e.populate()
	}

	deadline := runDeadline(began, set.duration)
	for i, e := range rr.roots {
		rr.drivers.Go(func() { rr.drive(i, e, deadline) })
	}
	rr.faultDriver(set, deadline)
	rr.stop.Store(true)
	rr.drivers.Wait()
	if !rr.failed() {
		for _, e := range rr.roots {
			e.resumeStale()
		}
		rr.settle(20 * time.Second)
		for _, e := range rr.roots {
			e.checkLatent("end of run")
		}
	}
	rr.close()
	return rr.outcomes(time.Since(began))
}

// drive is root i's driver: TestModel's operations on its env, one at a
// time, each holding hold for reading.
func (rr *rootsRun) drive(i int, e *env, deadline time.Time) {
	seed := rootSeed(rr.seed, i)
	for op := 1; !rr.done(deadline); op++ {
		rr.ops[i].Store(int64(op))
		// A fatalf of the environment ends this goroutine (and fails the
		// test): the deferred unlock keeps the fault driver going.
		func() {
			rr.hold.RLock()
			defer rr.hold.RUnlock()
			e.step(seed, op)
		}()
	}
}

// done reports whether the drivers should stop: the deadline passed, the
// run is being torn down, or a root (or the environment) failed.
func (rr *rootsRun) done(deadline time.Time) bool {
	if rr.stop.Load() || rr.t.Failed() || time.Now().After(deadline) {
		return true
	}
	if rr.failed() {
		rr.stop.Store(true)
		return true
	}
	return false
}

func (rr *rootsRun) failed() bool {
	for _, e := range rr.roots {
		if e.m.failed() {
			return true
		}
	}
	return false
}

// close stops the drivers, the process, every root's clients and the
// ensemble; it runs once (at the end of the run, or as the test's
// clean-up when the environment failed).
func (rr *rootsRun) close() {
	rr.closed.Do(func() {
		rr.stop.Store(true)
		rr.drivers.Wait()
		if rr.proc != nil {
			rr.stopProcess(rr.proc, "end of run")
		}
		// A primary still running now was started by a root's operation
		// that replaced the process's (one processWide should name), and
		// nothing stops it: stop it before the test's directories go (it
		// writes its root's store), and say so.
		for i, e := range rr.roots {
			e.primMu.Lock()
			runs := slices.Clone(e.runs)
			e.primMu.Unlock()
			for _, pr := range runs {
				select {
				case <-pr.done:
				default:
					rr.t.Errorf("root %s: primary %s still runs after its process stopped: an operation started it beside the process (add it to processWide)", rr.names[i], pr.holder)
					e.stopPrimary(pr, "end of run")
				}
			}
		}
		for _, e := range rr.roots {
			e.closeClients()
		}
		for i := len(rr.closers) - 1; i >= 0; i-- {
			rr.closers[i]()
		}
		rr.ens.StopAll()
	})
}

// outcomes returns each root's outcome, labelled with its root, and the
// run's summary: a line per root, the faults, then each root's totals.
func (rr *rootsRun) outcomes(elapsed time.Duration) ([]outcome, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %#x: %d roots in one process, %d processes, %d faults in %s\n",
		rr.seed, len(rr.roots), rr.nproc, len(rr.faults), elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  %-4s %-24s %7s %7s %10s %8s\n", "root", "path", "ops", "takes", "IDs", "failures")
	var outs []outcome
	var details []string
	for i, e := range rr.roots {
		m := e.m
		ops := int(rr.ops[i].Load())
		m.mu.Lock()
		fmt.Fprintf(&b, "  %-4s %-24s %7d %7d %10d %8d\n", rr.names[i], e.root, ops, m.takesOK, m.handed, len(m.failures))
		label := fmt.Sprintf("root %s (%s)", rr.names[i], e.root)
		details = append(details, label+": "+m.summary(e.seed, ops, elapsed))
		outs = append(outs, outcome{
			ops:      ops,
			failed:   len(m.failures) > 0,
			failOp:   m.failOp,
			failures: m.failures,
			tail:     lastN(m.recent, recentOps),
			plog:     m.plog.tail(),
			faults:   m.faults,
			elapsed:  elapsed,
			label:    label,
			replay:   fmt.Sprintf("SEQKEEPER_MODEL_SEED=%d go test -count=1 -run 'TestModelSeveralRoots$' -v ./internal/model", rr.seed),
		})
		m.mu.Unlock()
	}
	fmt.Fprintf(&b, "process and ensemble faults (elapsed: fault):")
	for _, f := range rr.faults {
		fmt.Fprintf(&b, "\n  %s", f)
	}
	for _, d := range details {
		fmt.Fprintf(&b, "\n%s", d)
	}
	return outs, b.String()
}

// pause sleeps for d, or less when the run is over.
func (rr *rootsRun) pause(d time.Duration, deadline time.Time) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && !rr.done(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// faultStream keeps the fault driver's random choices apart from the
// root drivers' (which use the operation index as the stream).
const faultStream = 1 << 62

// faultDriver injects process and ensemble faults, one at a time, with
// pauses of 0.5 to 2.5 s between them, until the deadline or a failure.
func (rr *rootsRun) faultDriver(set settings, deadline time.Time) {
	began := time.Now()
	for n := 1; ; n++ {
		r := rand.New(rand.NewPCG(set.seed, faultStream+uint64(n)))
		rr.pause(500*time.Millisecond+time.Duration(r.IntN(2000))*time.Millisecond, deadline)
		if rr.done(deadline) {
			return
		}
		f := pickRootFault(r)
		if set.skip[f.name] {
			continue
		}
		what, ok := f.run(rr, r)
		if !ok {
			continue
		}
		rr.faults = append(rr.faults, fmt.Sprintf("%6s: %s", time.Since(began).Round(100*time.Millisecond), what))
	}
}
