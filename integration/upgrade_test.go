package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The rolling upgrade test: three replicas of an earlier release (v0.1.0,
// or the commit SEQKEEPER_UPGRADE_FROM names; scripts/upgrade-from.sh
// builds it) serve library workers of both releases and HTTP takers; they
// are replaced one at a time by this tree's (seqkeeper:dev), standbys
// first and the primary last, the mixed cluster is held for 45 s, and
// then rolled back the same way. docs/operations.md ("Upgrade") says
// what it proves.
//
// What "within the runway" means here. Both releases run the default
// runway R (60 s) and ceiling_wait W = 5 s (the workers too): the primary
// keeps every ceiling a runway of demand ahead and raises it again when
// half is left, so a take never waits at a ceiling unless no primary has
// raised it for R/2. A graceful replacement hands leadership over at once.
// So in every phase where some replica can write the store, the test
// asserts what the chaos suite measures: no duplicate; the longest time
// without a primary (replicas polled four times a second) under R/2; no
// call of any worker failing (a take that waits W at a ceiling fails with
// ceiling_reached); and no call lasting longer than W.
//
// Where the earlier release cannot read what this one wrote (a newer store
// format), the rollback must be refused with a message naming the format
// version it needs, and no ID may be handed out twice. The test then goes
// on through the primary, as a rollback would, holds the cluster that can
// no longer write (takes fail once the reserves are used up: counted, not
// failed), and rolls forward again; from then on the assertions above
// hold again.

// upgradeScenario is what a rolling upgrade varies besides the releases.
type upgradeScenario struct {
	// Root is the sequences' root: SEQKEEPER_ROOT of the replicas and the
	// Go workers' root. "" is the default root, served on the default
	// election and marker paths by every release. With another root,
	// the earlier release's library workers run only if its worker
	// binary reads the worker's root (SEQKEEPER_CHAOS_WORKER_ROOT);
	// 0.1.0's does not, and then the workload is this release's library
	// workers and the HTTP takers (which reach the earlier release's
	// replicas all the same), rather than workers taking from the
	// default root.
	Root string
	// OldEnv is added to the environment of the earlier release's
	// replicas only (the settings it needed that this release derives).
	OldEnv map[string]string
	// Election is the election path every replica of both releases must
	// be a candidate under while they run side by side (checked in
	// ZooKeeper, checkElection); "": not checked.
	Election string
	// UpgradeOnly leaves out the rollback (TestRollingUpgrade covers it).
	UpgradeOnly bool
}

const (
	upgradeCeilingWait = 5 * time.Second
	upgradeRunway      = config.DefaultRunway
	// upgradeMixedHold is how long the cluster runs with the standbys
	// replaced and the primary not yet. What a mixed cluster can get
	// wrong shows within seconds (two elections, a standby of one release
	// rewriting the store the other's primary writes, HTTP takes through
	// both); a raise by its primary is not what the hold waits for: at
	// this workload the reserves last several runways (448 s left in one
	// run), so no hold of minutes would be sure to see one. It spans two
	// of the primary's sweeps (sweep_interval, 10 s) and a margin.
	upgradeMixedHold = 25 * time.Second
	// upgradeStepHold bounds the traffic after every other replacement:
	// until every worker has taken IDs since, the HTTP workers through
	// the new replica too (settle), and at least upgradeStepMin.
	upgradeStepHold = 20 * time.Second
	upgradeStepMin  = 5 * time.Second
	// upgradeRefusedHold is how long a refused rollback is left running
	// with none of the replicas able to write, before rolling forward:
	// two sweeps of a primary that cannot raise.
	upgradeRefusedHold = 20 * time.Second
)

// upgradeSequences are a plain sequence and one of two windows.
var upgradeSequences = map[string][]string{"upg": nil, "upg-w": {"--windows", "2"}}

// newerFormat matches a store refused by a release older than its format.
var newerFormat = regexp.MustCompile(`(?i)newer (seqkeeper )?format`)

// TestRollingUpgrade upgrades three replicas of the earlier release to
// this one and rolls them back, under load, on the default root.
func TestRollingUpgrade(t *testing.T) {
	takeClusterSlot(t)
	runRollingUpgrade(t, upgradeScenario{})
}

// upgrade is one run: the cluster, its workload and what the run saw.
type upgrade struct {
	t        *testing.T
	sc       upgradeScenario
	c        *Cluster
	hist     *History
	w        *Workload
	rot      *rotation
	old, cur release

	proxy *ZooKeeperProxy // the test process's ZooKeeper addresses
	// oldLibrary: the earlier release's library workers run (see
	// upgradeScenario.Root).
	oldLibrary bool

	mu       sync.Mutex
	version  map[string]string // replica name -> version it runs
	phases   []phase
	refusals []string    // messages of the earlier release refusing the store
	epoch    int64       // the highest leader epoch a primary reported
	formats  string      // the store's formats as last read (storeFormats)
	raise    *raiseCheck // the last primary's first raise, not seen yet
}

// phase is a stretch of the run, its records and errors tagged with its
// name; failures are expected only where no replica can write the store.
type phase struct {
	name          string
	from, to      time.Time
	allowFailures bool
}

func runRollingUpgrade(t *testing.T, sc upgradeScenario) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	old, cur := findReleases(ctx, t)
	oldLibrary := sc.Root == "" || knowsWorkerRoot(t, old)
	if !oldLibrary {
		t.Logf("the library worker of %s takes from the default root only (it has no %s): root %q is taken from by library workers of %s and HTTP takers through replicas of both",
			old, envWorkerRoot, sc.Root, cur)
	}
	t.Logf("rolling upgrade from %s to %s, root %q", old, cur, sc.Root)
	env := map[string]string{
		"SEQKEEPER_RUNWAY":       upgradeRunway.String(),
		"SEQKEEPER_CEILING_WAIT": upgradeCeilingWait.String(),
	}
	if sc.Root != "" {
		env["SEQKEEPER_ROOT"] = sc.Root
	}
	u := &upgrade{t: t, sc: sc, c: NewCluster(ctx, t, Options{ZooKeepers: 3, MinIO: true, ReplicaEnv: env}),
		hist: NewHistory(), rot: newRotation(), old: old, cur: cur, oldLibrary: oldLibrary, version: map[string]string{}}
	u.begin("start: " + old.Version)
	for range 3 {
		n := u.addReplica(ctx, old)
		u.rot.add(n)
	}
	u.createSequences(ctx, u.rot.in()[0])
	u.startWorkload(ctx)
	u.noteFormats(ctx, "the workload started")

	u.begin("all " + old.Version)
	u.settle(ctx, nil)
	u.roll(ctx, "upgrade", 1, old, cur, upgradeMixedHold)
	if !sc.UpgradeOnly && u.roll(ctx, "rollback", 1, cur, old, upgradeMixedHold) {
		u.rollForward(ctx)
	}
	u.begin("end")
	u.settle(ctx, nil)
	u.checkElection(ctx, "at the end")
	u.checkRaise(ctx)
	u.verify(ctx)
	u.end()
	u.w.Stop()
	u.verdict(time.Since(start))
}

// begin ends the current phase and starts the next: everything recorded
// from now on is tagged with name.
func (u *upgrade) begin(name string) {
	u.beginPhase(name, false)
}

func (u *upgrade) beginPhase(name string, allowFailures bool) {
	now := time.Now()
	u.mu.Lock()
	if n := len(u.phases); n > 0 && u.phases[n-1].to.IsZero() {
		u.phases[n-1].to = now
	}
	u.phases = append(u.phases, phase{name: name, from: now, allowFailures: allowFailures})
	u.mu.Unlock()
	u.hist.SetScenario(name)
	u.t.Logf("phase %q", name)
}

func (u *upgrade) end() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n := len(u.phases); n > 0 && u.phases[n-1].to.IsZero() {
		u.phases[n-1].to = time.Now()
	}
}

// addReplica starts a replica of rel and checks that it reports rel's
// version.
func (u *upgrade) addReplica(ctx context.Context, rel release) *Node {
	opts := []testcontainers.ContainerCustomizer{testcontainers.WithImage(rel.Image)}
	if rel.Name == u.old.Name && len(u.sc.OldEnv) > 0 {
		opts = append(opts, testcontainers.WithEnv(u.sc.OldEnv))
	}
	n, err := u.c.AddReplicaWith(ctx, nil, opts...)
	if err != nil {
		u.t.Fatalf("start a replica of %s: %v", rel, err)
	}
	if rel.Name == u.old.Name {
		// Its answers are checked against this tree's OpenAPI document
		// apart: the verdict reports how they differ.
		apitest.Predates(n.Addr(ReplicaPort))
	}
	st, err := getStatus(ctx, &http.Client{Timeout: 5 * time.Second}, n)
	if err != nil {
		u.t.Fatalf("%s: status: %v", n.Name, err)
	}
	if st.Replica.Version != rel.Version {
		u.t.Errorf("%s runs version %q, want %q (%s)", n.Name, st.Replica.Version, rel.Version, rel.Image)
	}
	u.mu.Lock()
	u.version[n.Name] = rel.Version
	u.mu.Unlock()
	u.hist.Event("note", n.Name, "started "+rel.Version)
	return n
}

func (u *upgrade) createSequences(ctx context.Context, n *Node) {
	for name, extra := range upgradeSequences {
		args := append([]string{"/seqkeeper", "create", name}, extra...)
		code, out, err := n.Container.Exec(ctx, args, tcexec.Multiplexed())
		if err != nil || code != 0 {
			b, _ := io.ReadAll(out)
			u.t.Fatalf("%s: exit %d, %v: %s", strings.Join(args, " "), code, err, b)
		}
	}
}

// noteFormats logs the store's formats when they changed, and after what.
func (u *upgrade) noteFormats(ctx context.Context, after string) {
	f := storeFormats(ctx, u.c)
	if f == u.formats {
		return
	}
	u.t.Logf("store formats: %s (after %s)", f, after)
	u.hist.Event("note", "store", "formats "+f+" after "+after)
	u.formats = f
}

// verify runs 'seqkeeper verify' in a replica of this tree: the store
// covers every sequence in ZooKeeper (exit 0) after everything the run did.
func (u *upgrade) verify(ctx context.Context) {
	for _, n := range u.rot.in() {
		if !u.runs(n, u.cur) {
			continue
		}
		code, out, err := n.Container.Exec(ctx, []string{"/seqkeeper", "verify"}, tcexec.Multiplexed())
		b, _ := io.ReadAll(out)
		if err != nil || code != 0 {
			u.t.Errorf("seqkeeper verify in %s: exit %d, %v:\n%s", n.Name, code, err, b)
			return
		}
		u.t.Logf("seqkeeper verify in %s: %s", n.Name, strings.TrimSpace(string(b)))
		return
	}
	u.t.Errorf("no replica of %s to run seqkeeper verify in", u.cur.Version)
}

// startWorkload starts an allocator and a taker of each release's library
// and four HTTP workers over the replicas in service, and waits until each
// has taken IDs.
func (u *upgrade) startWorkload(ctx context.Context) {
	proxy := NewZooKeeperProxy(u.t, u.c)
	u.proxy = proxy
	seqs := make([]string, 0, len(upgradeSequences))
	for name := range upgradeSequences {
		seqs = append(seqs, name)
	}
	w, err := NewWorkload(u.c, u.hist, proxy.Addrs(), WorkloadOptions{
		Sequences: seqs, SessionTimeout: zkclient.DefaultSessionTimeout, CeilingWait: upgradeCeilingWait, Root: u.sc.Root,
	})
	if err != nil {
		u.t.Fatal(err)
	}
	u.w = w
	u.t.Cleanup(func() {
		w.Stop()
		if u.t.Failed() || os.Getenv("SEQKEEPER_CHAOS_DIR") != "" {
			dir, err := u.hist.Dump("", u.t.Name())
			if err == nil {
				err = u.c.WriteLogs(context.Background(), dir)
			}
			u.t.Logf("history and container logs written to %s (%v)", dir, err)
		}
	})
	for _, rel := range []release{u.old, u.cur} {
		if rel.Name == u.old.Name && !u.oldLibrary {
			continue
		}
		for _, kind := range []string{"alloc", "take"} {
			if _, err := w.StartGoWorkerFrom(rel.Worker, "go-"+rel.Name, kind); err != nil {
				u.t.Fatal(err)
			}
		}
	}
	for i := range 4 {
		w.StartHTTPWorker(fmt.Sprintf("http-%d", i), u.rot)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := w.WaitProgress(wctx, time.Now()); err != nil {
		u.t.Fatalf("workload does not start: %v", err)
	}
}

// roll replaces every replica of from with one of to, one at a time
// (phases name+" "+step, from step on): standbys first, the primary last,
// each after its predecessor's replacement is ready. The cluster is held
// for mixedHold before the last replica of from goes; after the primary,
// one of to must advance the leader epoch, and store a raise once one is
// due (checkRaise, before it is replaced or at the end). It reports
// whether to refused the store: then no replica can write it, and the
// cluster was held so for upgradeRefusedHold.
func (u *upgrade) roll(ctx context.Context, name string, step int, from, to release, mixedHold time.Duration) (refused bool) {
	for ; ; step++ {
		n, primary, left := u.nextToReplace(ctx, from)
		if n == nil {
			return false
		}
		role := "standby"
		if primary {
			role = "primary"
		}
		u.begin(fmt.Sprintf("%s %d: %s (%s, %s) -> %s", name, step, n.Name, role, from.Version, to.Version))
		if primary {
			u.checkRaise(ctx)
			u.leaderEpoch(ctx)
		}
		m := u.replace(ctx, n, to)
		u.checkStore(ctx, m, to)
		u.noteFormats(ctx, m.Name+" of "+to.Version+" started")
		switch {
		case primary:
			msg := u.awaitTakeover(ctx, to)
			u.noteFormats(ctx, "a primary of "+to.Version+" took over")
			if msg != "" {
				u.beginPhase(fmt.Sprintf("%s refused: no replica of %s can write the store", name, to.Version), true)
				u.t.Logf("%s: every replica runs %s, which refused the store: none can raise a ceiling; holding %s", name, to.Version, upgradeRefusedHold)
				sleep(ctx, upgradeRefusedHold)
				return true
			}
			u.settle(ctx, m)
		case left == 2:
			u.t.Logf("%s: %d replicas run %s, one %s (the primary: %v): holding the mixed cluster for %s",
				name, u.countIn(to), to.Version, from.Version, !primary && u.primaryRuns(ctx, from), mixedHold)
			u.holdMixed(ctx, m, mixedHold)
			u.checkElection(ctx, "in the mixed cluster")
		default:
			u.settle(ctx, m)
		}
		u.noteFormats(ctx, "the hold after "+m.Name+" started")
	}
}

// settle holds the cluster after a change until every worker has taken
// IDs since, every HTTP worker through m too (nil: through any replica),
// and for at least upgradeStepMin; at most upgradeStepHold. The verdict
// judges the calls: a worker that takes nothing for that long has a call
// longer than ceiling_wait, or a failed one.
func (u *upgrade) settle(ctx context.Context, m *Node) {
	since := time.Now()
	wctx, cancel := context.WithTimeout(ctx, upgradeStepHold)
	defer cancel()
	if err := u.w.WaitProgressThrough(wctx, since, m); err != nil {
		u.t.Logf("not every worker took IDs within %s of the change: %v", upgradeStepHold, err)
	}
	sleep(ctx, time.Until(since.Add(upgradeStepMin)))
}

// holdMixed holds the mixed cluster for hold once the workers settled on
// m, the replica that just joined.
func (u *upgrade) holdMixed(ctx context.Context, m *Node, hold time.Duration) {
	since := time.Now()
	u.settle(ctx, m)
	sleep(ctx, time.Until(since.Add(hold)))
}

// rollForward replaces the replicas of the earlier release that refused
// the store with this tree's again, as the operator of a refused rollback
// would: the first one takes over (the others keep failing as primary),
// then every worker must take IDs again, and the rest follow.
func (u *upgrade) rollForward(ctx context.Context) {
	var n *Node // they take turns at leading and failing: any one
	for _, m := range u.rot.in() {
		if u.runs(m, u.old) {
			n = m
			break
		}
	}
	if n == nil {
		u.t.Fatalf("no replica of %s left to roll forward", u.old.Version)
	}
	u.beginPhase(fmt.Sprintf("roll forward 1: %s (%s) -> %s, the first replica that can write", n.Name, u.old.Version, u.cur.Version), true)
	since := time.Now()
	u.checkStore(ctx, u.replace(ctx, n, u.cur), u.cur)
	if msg := u.awaitTakeover(ctx, u.cur); msg != "" {
		u.t.Fatalf("%s refused the store when rolling forward: %s", u.cur.Version, msg)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := u.w.WaitProgress(wctx, time.Now())
	cancel()
	if err != nil {
		u.t.Fatalf("no recovery within 2 minutes of a primary of %s taking over: %v", u.cur.Version, err)
	}
	u.t.Logf("roll forward: every worker took IDs again %.1fs after a replica of %s started", time.Since(since).Seconds(), u.cur.Version)
	u.roll(ctx, "roll forward", 2, u.old, u.cur, upgradeStepHold)
}

// nextToReplace returns a replica in service of rel that is not the
// primary, else the primary if it runs rel (primary true); left counts the
// replicas of rel in service. nil when none runs rel.
func (u *upgrade) nextToReplace(ctx context.Context, rel release) (n *Node, primary bool, left int) {
	var p *Node
	if u.countIn(rel) > 0 {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		var err error
		p, err = u.w.Primary(pctx)
		cancel()
		if err != nil {
			u.t.Logf("no single primary before the next replacement: %v", err)
		}
	}
	var standby *Node
	for _, m := range u.rot.in() {
		if u.runs(m, rel) {
			left++
			if m != p && standby == nil {
				standby = m
			}
		}
	}
	if standby != nil {
		return standby, false, left
	}
	if p != nil && u.runs(p, rel) {
		return p, true, left
	}
	// No single primary now: the last replica of rel is taken as it.
	for _, m := range u.rot.in() {
		if u.runs(m, rel) {
			return m, true, left
		}
	}
	return nil, false, left
}

func (u *upgrade) runs(n *Node, rel release) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.version[n.Name] == rel.Version
}

func (u *upgrade) countIn(rel release) int {
	k := 0
	for _, n := range u.rot.in() {
		if u.runs(n, rel) {
			k++
		}
	}
	return k
}

// replace takes n out of the HTTP rotation, stops it gracefully (it pushes
// its buffered IDs back and leaves the election), starts a replica of rel
// in its place and puts that in the rotation once ready.
func (u *upgrade) replace(ctx context.Context, n *Node, rel release) *Node {
	if err := u.rot.remove(ctx, n); err != nil {
		u.t.Fatal(err)
	}
	t0 := time.Now()
	if err := n.Stop(ctx); err != nil {
		u.t.Fatal(err)
	}
	u.hist.Event("note", n.Name, "stopped")
	m := u.addReplica(ctx, rel)
	u.rot.add(m)
	u.t.Logf("%s (%s) replaced by %s (%s) in %.1fs", n.Name, u.versionOf(n), m.Name, rel.Version, time.Since(t0).Seconds())
	return m
}

func (u *upgrade) versionOf(n *Node) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.version[n.Name]
}

// knowsWorkerRoot says whether rel's worker binary reads the worker's root
// setting (binaries of v0.1.0 do not).
func knowsWorkerRoot(t *testing.T, rel release) bool {
	b, err := os.ReadFile(rel.Worker)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), envWorkerRoot)
}
