package integration

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// The chaos suite: many workers (Go library with allocators and plain
// takes, HTTP against every replica) take IDs while faults are injected one
// at a time; a checker reads the complete history and fails the test on
// any ID handed out twice. See docs/guarantees.md for what each scenario
// proves.

// Replica settings that make the interesting cases happen within seconds:
// a 5 s runway so that an S3 outage outlasts the reserve, a 6 s session so
// that failover and pauses past the timeout fit a short scenario, a
// reserve capped at 50 000 IDs (about 10 s of the workload's traffic per
// sequence) so the IDs skipped at each ZooKeeper election stay small, and
// a store audit every 3 s (at least the sweep interval) so that ceilings
// the store lost are persisted again within a scenario
// (lose-store-objects).
var chaosReplicaEnv = map[string]string{
	"SEQKEEPER_RUNWAY":             "5s",
	"SEQKEEPER_MIN_RESERVE":        "200",
	"SEQKEEPER_MAX_RESERVE":        "50000",
	"SEQKEEPER_SWEEP_INTERVAL":     "1s",
	"SEQKEEPER_AUDIT_INTERVAL":     "3s",
	"SEQKEEPER_ZK_SESSION_TIMEOUT": "6s",
	"SEQKEEPER_CEILING_WAIT":       "3s",
	"SEQKEEPER_LOG_FORMAT":         "json",
}

// The sequences the workers share: a plain one and one with two windows.
var chaosSequences = []string{"chaos", "chaos-w"}

// chaosIdleSequences are registered too but never taken from: nothing
// but the primary's store audit persists their ceilings again when the
// store loses them (lose-store-objects).
var chaosIdleSequences = []string{"chaos-idle"}

// chaosCreateArgs are the arguments of seqkeeper create after the name,
// per sequence the suite registers (none for those not listed).
var chaosCreateArgs = map[string][]string{
	"chaos":   nil,
	"chaos-w": {"--windows", "2"},
}

const chaosSessionTimeout = 6 * time.Second

// chaos is a cluster under test with its workload and history.
type chaos struct {
	c     *Cluster
	hist  *History
	w     *Workload
	rng   *rand.Rand
	proxy *ZooKeeperProxy // stable ZooKeeper addresses for the test process

	mu        sync.Mutex
	figures   []Figures
	racesSeen int // worker race reports already failed the test
	logf      func(format string, args ...any)
}

// chaosOptions is the chaos suite's cluster: a 3-server ensemble, MinIO
// and 3 replicas with chaosReplicaEnv.
func chaosOptions() Options {
	return Options{ZooKeepers: 3, MinIO: true, Replicas: 3, ReplicaEnv: maps.Clone(chaosReplicaEnv)}
}

// newChaos starts the cluster opts describes (chaosOptions, or a variant),
// registers the sequences and starts the workload. On failure (or with
// SEQKEEPER_CHAOS_DIR set) the history is written out when the test ends.
func newChaos(ctx context.Context, t *testing.T, seed uint64, opts Options) *chaos {
	if level := os.Getenv("SEQKEEPER_CHAOS_LOG_LEVEL"); level != "" {
		opts.ReplicaEnv["SEQKEEPER_LOG_LEVEL"] = level // "debug" logs every ceiling the primary sets
	}
	c := NewCluster(ctx, t, opts)
	r := c.Replicas()[0]
	for _, name := range slices.Concat(chaosSequences, chaosIdleSequences) {
		args := append([]string{"create", name}, chaosCreateArgs[name]...)
		code, out, err := r.Container.Exec(ctx, append([]string{"/seqkeeper"}, args...), tcexec.Multiplexed())
		if err != nil || code != 0 {
			b, _ := io.ReadAll(out)
			t.Fatalf("seqkeeper %s: exit %d, %v: %s", strings.Join(args, " "), code, err, b)
		}
	}
	ch := &chaos{c: c, hist: NewHistory(), rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), logf: t.Logf}
	ch.proxy = NewZooKeeperProxy(t, c)
	var err error
	ch.w, err = NewWorkload(c, ch.hist, ch.proxy.Addrs(), WorkloadOptions{
		Sequences:      chaosSequences,
		Allocators:     2,
		Takers:         2,
		HTTPPerReplica: 2,
		SessionTimeout: chaosSessionTimeout,
		CeilingWait:    3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch.w.Stop()
		ch.checkRaces(t)
		if t.Failed() || os.Getenv("SEQKEEPER_CHAOS_DIR") != "" {
			dir, err := ch.hist.Dump("", t.Name())
			if err == nil {
				err = c.WriteLogs(context.Background(), dir)
			}
			t.Logf("chaos history and container logs written to %s (%v)", dir, err)
		}
	})
	// Every worker has IDs before the first fault.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ch.w.WaitProgress(wctx, time.Now()); err != nil {
		t.Fatalf("workload does not start: %v", err)
	}
	return ch
}

// fault injects one failure and heals it; it returns when the cluster
// should be able to recover (not when it has).
type fault struct {
	name string
	// cluster names the cluster TestChaos runs the scenario on (see
	// chaosClusters).
	cluster string
	run     func(ch *chaos, ctx context.Context) error
}

// faults are the scenarios, cheapest first within each cluster.
var faults = []fault{
	{"kill-workers-mid-batch", "replicas", (*chaos).killWorkers},
	{"sigkill-primary", "replicas", (*chaos).killPrimary},
	{"sigterm-primary", "replicas", (*chaos).termPrimary},
	{"partition-primary", "replicas", (*chaos).partitionPrimary},
	{"pause-primary", "replicas", (*chaos).pausePrimary},
	{"restart-all-replicas", "replicas", (*chaos).restartReplicas},
	// Before any ZooKeeper election on its cluster: each one inflates the
	// reserve (see docs/guarantees.md), and a reserve larger than the
	// outage's traffic would hide whether clients block at the stored
	// ceiling.
	{"s3-down-past-runway", "store", (*chaos).s3Down},
	{"delete-recreate-sequence", "store", (*chaos).deleteRecreate},
	{"lose-store-objects", "store", (*chaos).loseStoreObjects},
	{"lose-one-zookeeper", "store", (*chaos).loseZooKeeper},
	{"lose-zookeeper-quorum", "store", (*chaos).loseQuorum},
	{"wipe-zookeeper", "zookeeper", (*chaos).wipeZooKeeper},
	{"tinyid-clients-through-kill-and-wipe", "zookeeper", (*chaos).tinyidThroughKillAndWipe},
	{"rollback-zookeeper-before-raise", "zookeeper", (*chaos).rollbackBeforeRaise},
	{"rollback-zookeeper-after-raise", "rollback", (*chaos).rollbackAfterRaise},
	{"rollback-zookeeper-reusing-epoch", "rollback", (*chaos).rollbackReusingEpoch},
}

// chaosClusters returns the names of TestChaos's clusters, in the order of
// their first scenario in faults, and each one's scenarios in the order
// of faults.
func chaosClusters() ([]string, map[string][]fault) {
	var names []string
	of := map[string][]fault{}
	for _, f := range faults {
		if of[f.cluster] == nil {
			names = append(names, f.cluster)
		}
		of[f.cluster] = append(of[f.cluster], f)
	}
	return names, of
}

// run runs f as scenario name: some traffic, the fault, then the wait for
// every worker to make progress again (a hang fails the test), then the
// checker over the whole history so far.
func (ch *chaos) run(t *testing.T, name string, f fault) {
	ch.hist.SetScenario(name)
	from := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sleep(ctx, 3*time.Second)
	ch.hist.Event("fault", name, "")
	if err := f.run(ch, ctx); err != nil {
		t.Fatalf("%s: inject: %v", name, err)
	}
	healed := time.Now()
	ch.hist.Event("heal", name, "")
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	err := ch.w.WaitProgress(wctx, healed)
	wcancel()
	if err != nil {
		t.Errorf("%s: no recovery within 2 minutes of healing (a hang): %v", name, err)
		ch.dumpReplicas(t, ctx)
	} else {
		t.Logf("%s: every worker took IDs again %.1fs after healing", name, time.Since(healed).Seconds())
	}
	sleep(ctx, 2*time.Second)
	to := time.Now()
	snap := ch.hist.Snapshot()
	v := Check(snap)
	fig := v.Figures(snap, name, from, to)
	ch.mu.Lock()
	ch.figures = append(ch.figures, fig)
	ch.mu.Unlock()
	t.Log(fig)
	ch.verdict(t, v)
	ch.checkRaces(t)
}

// dumpReplicas logs every replica's goroutines after a hang, for the
// diagnosis, and starts the replicas again so later scenarios can run.
func (ch *chaos) dumpReplicas(t *testing.T, ctx context.Context) {
	for _, r := range ch.c.Replicas() {
		t.Logf("%s goroutines after the hang:%s", r.Name, r.DumpGoroutines(ctx))
		if err := r.Start(ctx); err != nil {
			t.Logf("restart %s: %v", r.Name, err)
		}
	}
}

// verdict fails the test on duplicates or leadership overlaps, with the
// evidence.
func (ch *chaos) verdict(t *testing.T, v Verdict) {
	v.ReportDuplicates(t)
}

// checkRaces fails the test with every data race report a Go worker
// process wrote since the last check. The test binary itself fails on a
// race under -race; its worker processes, the same binary, must too.
func (ch *chaos) checkRaces(t *testing.T) {
	races := ch.w.Races()
	ch.mu.Lock()
	seen := ch.racesSeen
	ch.racesSeen = len(races)
	ch.mu.Unlock()
	for _, r := range races[seen:] {
		t.Errorf("data race in a Go worker process: %s", r)
	}
}

// summary logs every scenario's figures and the checker's verdict over
// the whole run.
func (ch *chaos) summary(t *testing.T, from time.Time) (Verdict, Figures) {
	snap := ch.hist.Snapshot()
	v := Check(snap)
	all := v.Figures(snap, "", from, time.Now())
	var b strings.Builder
	for _, f := range ch.figures {
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	b.WriteString("\n")
	b.WriteString(all.String())
	t.Logf("chaos figures:%s", b.String())
	ch.verdict(t, v)
	return v, all
}

// TestChaos runs every fault scenario, the workers taking IDs throughout,
// and checks the complete history after each. The scenarios are spread
// over a few clusters that run side by side (a subtest each, named by
// fault.cluster): each cluster runs its scenarios in turn, in the order of
// faults, with one workload and one history from its start to its
// summary. A scenario needs nothing of the scenarios before it but what
// its own fault leaves: sharing a cluster saves its start, and four
// clusters let the suite's slots (slots_test.go) overlap them.
//
//	go test -run 'TestChaos$/<cluster>/<scenario>' .
func TestChaos(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	names, of := chaosClusters()
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			takeClusterSlot(t)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
			defer cancel()
			start := time.Now()
			ch := newChaos(ctx, t, seed+uint64(i), chaosOptions())
			for _, f := range of[name] {
				t.Run(f.name, func(t *testing.T) { ch.run(t, f.name, f) })
			}
			ch.summary(t, start)
		})
	}
}

// TestChaosMixed injects faults drawn at random, with random quiet times
// between them, for SEQKEEPER_CHAOS_DURATION (default 3m); the seed is
// printed and SEQKEEPER_CHAOS_SEED replays it (the same faults in the same
// order; timings differ). SEQKEEPER_CHAOS_FAULTS, a regular expression,
// draws only from the faults whose names it matches (a replay needs the
// same value).
func TestChaosMixed(t *testing.T) {
	takeClusterSlot(t)
	duration := envDuration(t, "SEQKEEPER_CHAOS_DURATION", 3*time.Minute)
	seed, eligible := mixedSeed(t), mixedFaults(t, faults)
	ctx, cancel := context.WithTimeout(context.Background(), duration+15*time.Minute)
	defer cancel()
	start := time.Now()
	ch := newChaos(ctx, t, seed, chaosOptions())
	ch.mixed(ctx, t, seed, eligible, start.Add(duration), time.Second)
}

// envDuration reads the duration in the environment variable name, or
// returns def when it is not set.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 90s or 1h (%v)", name, s, err)
	}
	return d
}

// mixedSeed is SEQKEEPER_CHAOS_SEED, or a fresh seed.
func mixedSeed(t *testing.T) uint64 {
	s := os.Getenv("SEQKEEPER_CHAOS_SEED")
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("SEQKEEPER_CHAOS_SEED=%q: %v", s, err)
	}
	return v
}

// mixedFaults is the part of from whose names SEQKEEPER_CHAOS_FAULTS
// matches, or all of from when it is not set.
func mixedFaults(t *testing.T, from []fault) []fault {
	s := os.Getenv("SEQKEEPER_CHAOS_FAULTS")
	if s == "" {
		return from
	}
	re, err := regexp.Compile(s)
	if err != nil {
		t.Fatalf("SEQKEEPER_CHAOS_FAULTS=%q: %v", s, err)
	}
	var eligible []fault
	for _, f := range from {
		if re.MatchString(f.name) {
			eligible = append(eligible, f)
		}
	}
	if len(eligible) == 0 {
		t.Fatalf("SEQKEEPER_CHAOS_FAULTS=%q matches no fault", s)
	}
	return eligible
}

// mixed injects faults drawn from eligible by ch's random source, each
// after a quiet time of 2 to 9 times quiet, until deadline or the first
// scenario that fails, then logs the verdict over the whole run.
func (ch *chaos) mixed(ctx context.Context, t *testing.T, seed uint64, eligible []fault, deadline time.Time, quiet time.Duration) {
	start := time.Now()
	t.Logf("chaos mixed run: SEQKEEPER_CHAOS_SEED=%d until %s, SEQKEEPER_CHAOS_FAULTS=%q (%d faults eligible)",
		seed, deadline.Format(time.TimeOnly), os.Getenv("SEQKEEPER_CHAOS_FAULTS"), len(eligible))
	n := 0
	for time.Now().Before(deadline) {
		f := eligible[ch.rng.IntN(len(eligible))]
		n++
		name := fmt.Sprintf("mixed/%03d-%s", n, f.name)
		ch.hist.SetScenario("mixed/quiet")
		sleep(ctx, time.Duration(2+ch.rng.IntN(8))*quiet)
		ok := t.Run(name, func(t *testing.T) { ch.run(t, name, f) })
		if !ok {
			break
		}
	}
	v, all := ch.summary(t, start)
	t.Logf("chaos mixed run, seed %d: %d faults injected in %s; IDs checked %d in %d ranges; duplicates %d; IDs lost %d in %d gaps %v; longest time without a primary %.1fs (total %.1fs)",
		seed, n, time.Since(start).Round(time.Second), v.IDs, v.Records, v.Duplicates, v.Lost, len(v.Gaps), all.LostBy,
		all.NoPrimaryMax.Seconds(), all.NoPrimaryTotal.Seconds())
}
