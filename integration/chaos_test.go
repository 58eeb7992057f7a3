package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

const chaosSessionTimeout = 6 * time.Second

// chaos is a cluster under test with its workload and history.
type chaos struct {
	c     *Cluster
	hist  *History
	w     *Workload
	rng   *rand.Rand
	proxy *ZooKeeperProxy // stable ZooKeeper addresses for the test process

	mu      sync.Mutex
	figures []Figures
	logf    func(format string, args ...any)
}

// newChaos starts a 3-server ensemble, MinIO and 3 replicas, registers the
// sequences and starts the workload. On failure (or with
// SEQKEEPER_CHAOS_DIR set) the history is written out when the test ends.
func newChaos(ctx context.Context, t *testing.T, seed uint64) *chaos {
	env := maps.Clone(chaosReplicaEnv)
	if level := os.Getenv("SEQKEEPER_CHAOS_LOG_LEVEL"); level != "" {
		env["SEQKEEPER_LOG_LEVEL"] = level // "debug" logs every ceiling the primary sets
	}
	c := NewCluster(ctx, t, Options{ZooKeepers: 3, MinIO: true, Replicas: 3, ReplicaEnv: env})
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
	run  func(ch *chaos, ctx context.Context) error
}

// faults are the scenarios, cheapest first.
var faults = []fault{
	{"kill-workers-mid-batch", (*chaos).killWorkers},
	{"sigkill-primary", (*chaos).killPrimary},
	{"sigterm-primary", (*chaos).termPrimary},
	{"partition-primary", (*chaos).partitionPrimary},
	{"pause-primary", (*chaos).pausePrimary},
	{"restart-all-replicas", (*chaos).restartReplicas},
	// Before any ZooKeeper election: each one inflates the reserve (see
	// docs/guarantees.md), and a reserve larger than the outage's traffic
	// would hide whether clients block at the stored ceiling.
	{"s3-down-past-runway", (*chaos).s3Down},
	{"delete-recreate-sequence", (*chaos).deleteRecreate},
	{"lose-store-objects", (*chaos).loseStoreObjects},
	{"lose-one-zookeeper", (*chaos).loseZooKeeper},
	{"lose-zookeeper-quorum", (*chaos).loseQuorum},
	{"wipe-zookeeper", (*chaos).wipeZooKeeper},
	{"rollback-zookeeper-before-raise", (*chaos).rollbackBeforeRaise},
	{"rollback-zookeeper-after-raise", (*chaos).rollbackAfterRaise},
	{"rollback-zookeeper-reusing-epoch", (*chaos).rollbackReusingEpoch},
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
	if v.Duplicates > 0 {
		var b strings.Builder
		for _, d := range v.Examples {
			b.WriteString("\n")
			b.WriteString(d.String())
		}
		t.Errorf("%d IDs handed out twice (of %d checked):%s", v.Duplicates, v.IDs, b.String())
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

// TestChaos runs every fault scenario in turn on one cluster, the workers
// taking IDs throughout, and checks the complete history after each.
func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	ch := newChaos(ctx, t, uint64(time.Now().UnixNano()))
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) { ch.run(t, f.name, f) })
	}
	ch.summary(t, start)
}

// TestChaosMixed injects faults drawn at random, with random quiet times
// between them, for SEQKEEPER_CHAOS_DURATION (default 3m); the seed is
// printed and SEQKEEPER_CHAOS_SEED replays it (the same faults in the same
// order; timings differ). SEQKEEPER_CHAOS_FAULTS, a regular expression,
// draws only from the faults whose names it matches (a replay needs the
// same value).
func TestChaosMixed(t *testing.T) {
	duration := 3 * time.Minute
	if s := os.Getenv("SEQKEEPER_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SEQKEEPER_CHAOS_DURATION=%q: %v", s, err)
		}
		duration = d
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEQKEEPER_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEQKEEPER_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	eligible := faults
	if s := os.Getenv("SEQKEEPER_CHAOS_FAULTS"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			t.Fatalf("SEQKEEPER_CHAOS_FAULTS=%q: %v", s, err)
		}
		eligible = nil
		for _, f := range faults {
			if re.MatchString(f.name) {
				eligible = append(eligible, f)
			}
		}
		if len(eligible) == 0 {
			t.Fatalf("SEQKEEPER_CHAOS_FAULTS=%q matches no fault", s)
		}
	}
	t.Logf("chaos mixed run: SEQKEEPER_CHAOS_SEED=%d SEQKEEPER_CHAOS_DURATION=%s SEQKEEPER_CHAOS_FAULTS=%q (%d faults eligible)",
		seed, duration, os.Getenv("SEQKEEPER_CHAOS_FAULTS"), len(eligible))
	ctx, cancel := context.WithTimeout(context.Background(), duration+15*time.Minute)
	defer cancel()
	start := time.Now()
	ch := newChaos(ctx, t, seed)
	deadline := start.Add(duration)
	n := 0
	for time.Now().Before(deadline) {
		f := eligible[ch.rng.IntN(len(eligible))]
		n++
		name := fmt.Sprintf("mixed/%03d-%s", n, f.name)
		ch.hist.SetScenario("mixed/quiet")
		sleep(ctx, time.Duration(2+ch.rng.IntN(8))*time.Second)
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

// TestChaosWorkerProcess is not a test: it is the body of the Go worker
// processes the chaos suite starts (the test binary, run again with
// SEQKEEPER_CHAOS_WORKER set). SIGTERM ends it cleanly.
func TestChaosWorkerProcess(t *testing.T) {
	if os.Getenv(envWorker) == "" {
		t.Skip("the body of the chaos suite's worker processes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunWorkerProcess(ctx, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// killWorkers kills a Go worker process (SIGKILL) every few seconds, six
// times, and starts a fresh one of the same kind in its place.
func (ch *chaos) killWorkers(ctx context.Context) error {
	for range 6 {
		sleep(ctx, time.Duration(1000+ch.rng.IntN(3000))*time.Millisecond)
		_, kind := ch.w.CrashGoWorker(ch.rng, "")
		if kind != "" {
			if _, err := ch.w.StartGoWorker(kind); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// killPrimary sends SIGKILL to the primary; a successor must take over once
// its session expires. The old primary starts again after 12 s.
func (ch *chaos) killPrimary(ctx context.Context) error {
	return ch.disturbPrimary(ctx, (*Node).Kill, "SIGKILL", 12*time.Second, (*Node).Start)
}

// termPrimary stops the primary gracefully (it resigns, pushes back its
// buffers) and starts it again after 5 s.
func (ch *chaos) termPrimary(ctx context.Context) error {
	return ch.disturbPrimary(ctx, (*Node).Stop, "", 5*time.Second, (*Node).Start)
}

// partitionPrimary cuts the primary off the network for 20 s while it
// believes it leads; a successor takes over; then the partition heals.
func (ch *chaos) partitionPrimary(ctx context.Context) error {
	return ch.disturbPrimary(ctx, (*Node).Disconnect, "", 20*time.Second, (*Node).Reconnect)
}

// pausePrimary freezes the primary for 15 s, well past its session
// timeout (the GC pause case): when it thaws it must not act as primary.
func (ch *chaos) pausePrimary(ctx context.Context) error {
	return ch.disturbPrimary(ctx, (*Node).Pause, "", 15*time.Second, (*Node).Unpause)
}

// disturbPrimary applies fault to the current primary, records it as a
// crash when crash is set (the checker explains IDs buffered at a crash),
// waits for d, and heals it.
func (ch *chaos) disturbPrimary(ctx context.Context, fault func(*Node, context.Context) error, crash string,
	d time.Duration, heal func(*Node, context.Context) error) error {
	p, err := ch.w.Primary(ctx)
	if err != nil {
		return err
	}
	if err := fault(p, ctx); err != nil {
		return err
	}
	if crash != "" {
		ch.hist.Event("crash", p.Name, crash)
	}
	sleep(ctx, d)
	return heal(p, ctx)
}

// restartReplicas stops every replica at once (gracefully) and starts them
// all again.
func (ch *chaos) restartReplicas(ctx context.Context) error {
	replicas := ch.c.Replicas()
	if err := parallel(replicas, func(n *Node) error { return n.Stop(ctx) }); err != nil {
		return err
	}
	sleep(ctx, 2*time.Second)
	return parallel(replicas, func(n *Node) error { return n.Start(ctx) })
}

// loseZooKeeper kills the ensemble's leader for 10 s: the other two elect
// a new leader, a new ZooKeeper epoch begins, and the primary must
// revalidate every sequence.
func (ch *chaos) loseZooKeeper(ctx context.Context) error {
	leader, _, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return err
	}
	if err := leader.Kill(ctx); err != nil {
		return err
	}
	sleep(ctx, 10*time.Second)
	return ch.startZooKeepers(ctx, leader)
}

// loseQuorum kills the leader and a follower for 15 s: nothing can be
// written, then the ensemble comes back in a new epoch.
func (ch *chaos) loseQuorum(ctx context.Context) error {
	leader, followers, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return err
	}
	down := []*Node{leader, followers[0]}
	if err := parallel(down, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	sleep(ctx, 15*time.Second)
	return ch.startZooKeepers(ctx, down...)
}

// s3Down stops MinIO for longer than the runway: until takes have been
// blocking at the ceiling for 5 s (at most 60 s; the reserve is sized for
// the runway at the recent rate, so how long depends on the traffic).
// Clients must use up the reserve and then block, never taking an ID above
// the ceiling the store held; when MinIO is back they resume.
func (ch *chaos) s3Down(ctx context.Context) error {
	if err := ch.c.MinIO.Stop(ctx); err != nil {
		return err
	}
	down := time.Now()
	sleep(ctx, 3*time.Second)
	// The store cannot change now: what the primary last stored is final.
	stored, err := ch.w.StoredCeilings(ctx)
	if err != nil {
		return err
	}
	var firstBlock time.Time
	for time.Since(down) < 60*time.Second && ctx.Err() == nil {
		if firstBlock.IsZero() {
			for _, e := range ch.hist.Snapshot().Events {
				if e.Kind == "error" && e.T.After(down) && strings.Contains(e.Detail, "ceiling_reached") {
					firstBlock = e.T
					break
				}
			}
		}
		if !firstBlock.IsZero() && time.Since(firstBlock) > 5*time.Second {
			break
		}
		sleep(ctx, time.Second)
	}
	up := time.Now()
	ch.hist.Event("note", "minio", fmt.Sprintf("stored ceilings during the outage: %v", stored))
	if err := ch.c.MinIO.Start(ctx); err != nil {
		return err
	}
	// Invariant 2: nothing handed out while the store was down lies above
	// the ceiling it held. Only calls that returned before the restart
	// certainly got their IDs during the outage: a take blocked at the
	// ceiling returns as soon as the store is back and the primary raises.
	snap := ch.hist.Snapshot()
	var above []string
	maxID := map[string]int64{}
	for _, r := range snap.Records {
		if r.T1.Before(down) || !r.T1.Before(up) {
			continue
		}
		maxID[r.Seq] = max(maxID[r.Seq], r.End)
		if c, ok := stored[r.Seq]; ok && r.End > c && len(above) < 10 {
			above = append(above, describeRecord(r))
		}
	}
	ch.hist.Event("note", "minio", fmt.Sprintf("highest IDs issued during the outage: %v", maxID))
	blocked := 0
	for _, e := range snap.Events {
		if e.Kind == "error" && e.T.After(down) && e.T.Before(up) && strings.Contains(e.Detail, "ceiling_reached") {
			blocked++
		}
	}
	if blocked == 0 {
		// Not a failure of the product's promise, but the scenario did
		// not exercise the block: the reserve outlasted the outage.
		ch.hist.Event("note", "minio", "no worker reached the stored ceiling during the outage")
	}
	ch.logf("S3 down %.0fs: stored ceilings %v, highest IDs issued %v, %d takes blocked at the ceiling",
		up.Sub(down).Seconds(), stored, maxID, blocked)
	if len(above) > 0 {
		return fmt.Errorf("IDs above the stored ceilings %v issued while S3 was down:\n\t%s", stored, strings.Join(above, "\n\t"))
	}
	return nil
}

// wipeZooKeeper kills the whole ensemble, deletes every server's data and
// starts it empty: the primary must restore every sequence from the store.
func (ch *chaos) wipeZooKeeper(ctx context.Context) error {
	zks := ch.c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	if err := parallel(zks, func(n *Node) error { return n.WipeZooKeeperData(ctx) }); err != nil {
		return err
	}
	return ch.startZooKeepers(ctx, zks...)
}

// rollbackBeforeRaise copies a follower's data, lets 15 s of traffic (and
// raises) go by, then rolls the whole ensemble back to the copy.
func (ch *chaos) rollbackBeforeRaise(ctx context.Context) error {
	snap, err := ch.snapshotFollower(ctx)
	if err != nil {
		return err
	}
	sleep(ctx, 15*time.Second)
	return ch.restoreEnsemble(ctx, snap)
}

// rollbackAfterRaise is the rollback the versions cannot see: with no
// primary running (so no raise after the copy), a follower's data is
// copied, clients keep taking IDs from the reserve for 3 s, and the ensemble
// is rolled back to the copy. Only the ZooKeeper epoch tells.
func (ch *chaos) rollbackAfterRaise(ctx context.Context) error {
	replicas := ch.c.Replicas()
	if err := parallel(replicas, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	for _, r := range replicas {
		ch.hist.Event("crash", r.Name, "SIGKILL (rollback after raise)")
	}
	snap, err := ch.snapshotFollower(ctx)
	if err != nil {
		return err
	}
	sleep(ctx, 3*time.Second)
	if err := ch.restoreEnsemble(ctx, snap); err != nil {
		return err
	}
	return parallel(replicas, func(n *Node) error { return n.Start(ctx) })
}

// snapshotFollower stops a follower, copies its data, and starts it again.
func (ch *chaos) snapshotFollower(ctx context.Context) (ZooKeeperData, error) {
	_, followers, err := ch.c.ZooKeeperLeader(ctx)
	if err != nil {
		return ZooKeeperData{}, err
	}
	f := followers[0]
	if err := f.Stop(ctx); err != nil {
		return ZooKeeperData{}, err
	}
	snap, err := f.SnapshotZooKeeperData(ctx)
	if err != nil {
		return snap, err
	}
	ch.hist.Event("note", f.Name, "data copied for a rollback")
	return snap, ch.startZooKeepers(ctx, f)
}

// restoreEnsemble kills every server, gives each the copy's data, and
// starts them.
func (ch *chaos) restoreEnsemble(ctx context.Context, snap ZooKeeperData) error {
	zks := ch.c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		return err
	}
	if err := parallel(zks, func(n *Node) error { return n.RestoreZooKeeperData(ctx, snap) }); err != nil {
		return err
	}
	return ch.startZooKeepers(ctx, zks...)
}

// startZooKeepers starts servers and waits until the ensemble serves.
func (ch *chaos) startZooKeepers(ctx context.Context, servers ...*Node) error {
	if err := parallel(servers, func(n *Node) error { return n.Start(ctx) }); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return ch.c.WaitZooKeeperServing(wctx)
}

// parallel runs f on every node at once and joins the errors.
func parallel(nodes []*Node, f func(*Node) error) error {
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { errs <- f(n) })
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}
