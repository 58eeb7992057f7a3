package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// process is one 'seqkeeper serve' process of several roots: one
// ZooKeeper session, reached through one proxy (so its network can be
// frozen), one holder name, and a primary per root on that session.
type process struct {
	holder string
	zk     *zkclient.Client
	proxy  *testenv.Proxy
	prims  []*primaryRun // one per root, in the order of rootsRun.roots
}

// startProcess starts a new process: a new session, and on it a primary
// of every root, each the current primary of its root.
func (rr *rootsRun) startProcess() {
	rr.nproc++
	e0 := rr.roots[0]
	proxy := testenv.NewProxy(rr.t, e0.zkAddr)
	rr.closers = append(rr.closers, proxy.Close)
	zc := e0.connect(asReplica, proxy.Addr(), primarySession, 0)
	rr.closers = append(rr.closers, zc.Close)
	pc := &process{holder: fmt.Sprintf("p%d", rr.nproc), zk: zc, proxy: proxy}
	for _, e := range rr.roots {
		pr := e.runPrimary(pc.holder, zc, proxy)
		pc.prims = append(pc.prims, pr)
		e.setPrimary(pr)
	}
	rr.proc = pc
}

// stopProcess ends the term of every primary of pc at once, as a process
// that shuts down does, and waits for them.
func (rr *rootsRun) stopProcess(pc *process, why string) {
	for _, pr := range pc.prims {
		pr.cancel()
	}
	for i, pr := range pc.prims {
		rr.roots[i].stopPrimary(pr, why)
	}
}

// rootFault is a fault of the process or of the ensemble, and its weight
// in the fault driver's choice.
type rootFault struct {
	name   string
	weight int
	// run injects the fault and returns its description, or ok false
	// when it is not possible now (nothing was done).
	run func(rr *rootsRun, r *rand.Rand) (what string, ok bool)
}

// rootFaults are the fault driver's faults. The names are opTable's where
// the fault is TestModel's for one root (SEQKEEPER_MODEL_SKIP skips them
// here too).
var rootFaults = []rootFault{
	{"handover", 2, (*rootsRun).handover},
	{"kill-primary", 1, (*rootsRun).killProcess},
	{"compaction-crash", 2, (*rootsRun).compactionCrash},
	{"expire-primary", 1, (*rootsRun).expireProcess},
	{"depose-primary", 1, (*rootsRun).deposeProcess},
	{"process-stall", 2, (*rootsRun).stallProcess},
	{"zk-restart", 2, (*rootsRun).restartZK},
	{"zk-snapshot", 2, (*rootsRun).snapshotZK},
	{"zk-restore", 2, (*rootsRun).restoreZK},
	{"zk-wipe", 1, (*rootsRun).wipeZK},
}

func pickRootFault(r *rand.Rand) rootFault {
	total := 0
	for _, f := range rootFaults {
		total += f.weight
	}
	x := r.IntN(total)
	for _, f := range rootFaults {
		if x < f.weight {
			return f
		}
		x -= f.weight
	}
	panic("unreachable")
}

// record notes a fault in every root's model (its report lists it at the
// root's current operation) and returns it.
func (rr *rootsRun) record(what string) string {
	for _, e := range rr.roots {
		e.fault(what)
	}
	return what
}

// handover: the process stops its primaries gracefully and exits; a new
// process starts a primary of every root.
func (rr *rootsRun) handover(*rand.Rand) (string, bool) {
	old := rr.proc
	rr.stopProcess(old, "handover")
	old.zk.Close()
	rr.startProcess()
	return rr.record(fmt.Sprintf("handover %s -> %s", old.holder, rr.proc.holder)), true
}

// killProcess: the process dies (its session closes abruptly, under
// every root's primary) and a new one starts.
func (rr *rootsRun) killProcess(*rand.Rand) (string, bool) {
	old := rr.proc
	old.zk.Close()
	rr.stopProcess(old, "killed")
	rr.startProcess()
	return rr.record(fmt.Sprintf("kill-primary %s -> %s", old.holder, rr.proc.holder)), true
}

// compactionCrash: the process dies while one root's primary compacts
// its store's log (that store stops dead after a random number of
// requests), as opCompactionCrash for one root; every root's primary dies
// with it.
func (rr *rootsRun) compactionCrash(r *rand.Rand) (string, bool) {
	old := rr.proc
	i := r.IntN(len(rr.roots))
	pr := old.prims[i]
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	epoch, _, err := pr.store.Epoch(ctx)
	if err != nil {
		return "", false
	}
	budget := r.Int64N(24)
	pr.crash.left.Store(budget)
	res, err := pr.store.Compact(ctx, epoch)
	old.zk.Close()
	rr.stopProcess(old, "crashed while compacting")
	rr.startProcess()
	return rr.record(fmt.Sprintf("compaction-crash %s, root %s's store after %d requests (%d segments folded, %d deleted, %v) -> %s",
		old.holder, rr.names[i], budget, res.Segments, res.Deleted, err, rr.proc.holder)), true
}

// expireProcess freezes the process's network until its session expires,
// starts a successor, then lets the old process's held requests through
// (every root's) before stopping it: half the time its primaries' terms
// end during the freeze, half the time only after (deposed primaries the
// stores must fence).
func (rr *rootsRun) expireProcess(r *rand.Rand) (string, bool) {
	old := rr.proc
	endEarly := r.IntN(2) == 0
	gap := time.Duration(r.IntN(500)) * time.Millisecond
	old.proxy.Pause()
	time.Sleep(primarySession * 2 / 3)
	if endEarly {
		for _, pr := range old.prims {
			pr.cancel()
		}
	}
	time.Sleep(primarySession/3 + time.Second)
	rr.startProcess()
	time.Sleep(gap)
	old.proxy.Resume()
	time.Sleep(gap)
	rr.stopProcess(old, "expired")
	old.zk.Close()
	how := "terms ended after its network came back"
	if endEarly {
		how = "terms ended during the freeze"
	}
	return rr.record(fmt.Sprintf("expire-primary %s -> %s (%s)", old.holder, rr.proc.holder, how)), true
}

// stallProcess freezes the process's network for less than its session
// timeout: every root's primary stalls at once, and its session
// survives.
func (rr *rootsRun) stallProcess(r *rand.Rand) (string, bool) {
	d := 200*time.Millisecond + time.Duration(r.IntN(1300))*time.Millisecond
	rr.proc.proxy.Pause()
	time.Sleep(d)
	rr.proc.proxy.Resume()
	return rr.record(fmt.Sprintf("process-stall %s for %s", rr.proc.holder, d)), true
}

// holdAll keeps every root driver off until the returned function runs:
// each is between two operations meanwhile.
func (rr *rootsRun) holdAll() func() {
	rr.hold.Lock()
	return rr.hold.Unlock
}

// afterZK waits, half the time, for every root's primary to revalidate
// everything, and then checks that ZooKeeper offers no root IDs already
// handed out.
func (rr *rootsRun) afterZK(r *rand.Rand, what string) {
	if r.IntN(2) != 0 {
		return
	}
	rr.settle(20 * time.Second)
	for _, e := range rr.roots {
		e.checkLatent("after " + what)
	}
}

// settle waits, up to limit in all, until ZooKeeper serves and every
// root's primary has revalidated every live sequence of its root.
func (rr *rootsRun) settle(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, e := range rr.roots {
		e.settle(max(time.Until(deadline), 0))
	}
}

// restartZK restarts ZooKeeper (SIGTERM or SIGKILL): a new epoch for
// every root.
func (rr *rootsRun) restartZK(r *rand.Rand) (string, bool) {
	defer rr.holdAll()()
	kill := r.IntN(2) == 0
	rr.roots[0].zkFault(kill, nil)
	what := "zk-restart (SIGTERM)"
	if kill {
		what = "zk-restart (SIGKILL)"
	}
	rr.record(what)
	rr.afterZK(r, what)
	return what, true
}

// snapshotZK saves a copy of ZooKeeper's data.
func (rr *rootsRun) snapshotZK(r *rand.Rand) (string, bool) {
	defer rr.holdAll()()
	what := rr.snapshot()
	rr.afterZK(r, what)
	return what, true
}

// snapshot saves a copy of ZooKeeper's data (stopped, so consistent),
// with every root's operation and store fault count; every driver must
// be held off.
func (rr *rootsRun) snapshot() string {
	dir := filepath.Join(rr.copyDir, fmt.Sprintf("copy-%03d", len(rr.copies)))
	rr.roots[0].zkFault(false, func() error { return rr.ens.SaveData(0, dir) })
	c := rootsCopy{dir: dir}
	for _, e := range rr.roots {
		e.m.mu.Lock()
		c.ops, c.gens = append(c.ops, e.m.op), append(c.gens, e.m.storeGen)
		e.m.mu.Unlock()
	}
	rr.copies = append(rr.copies, c)
	return rr.record(fmt.Sprintf("zk-snapshot copy %d (ops %v)", len(rr.copies)-1, c.ops))
}

// storesCover waits, up to limit, until every root's store covers every
// sequence of its root (see env.storeCovers), and reports whether they
// do. Every driver must be held off: no store fault happens meanwhile,
// and the primaries' audits repair what earlier ones cost.
func (rr *rootsRun) storesCover(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		all := true
		for _, e := range rr.roots {
			all = e.storeCovers() && all
		}
		if all || time.Now().After(deadline) {
			return all
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// validCopies returns the copies that a restore may go back to: taken
// after every root's last store fault.
func (rr *rootsRun) validCopies() []int {
	var ok []int
	for i, c := range rr.copies {
		same := true
		for j, e := range rr.roots {
			e.m.mu.Lock()
			same = same && c.gens[j] == e.m.storeGen
			e.m.mu.Unlock()
		}
		if same {
			ok = append(ok, i)
		}
	}
	return ok
}

// restoreZK rolls ZooKeeper back to an earlier copy taken after every
// root's last store fault, once every root's store covers its sequences;
// in every root, a name deleted after the copy may be back. With four
// roots a store fault strikes somewhere every second or two, so a copy
// rarely stays valid: when none is (and a third of the time anyway), the
// copy is taken now, the roots run for 1 to 3 s without store faults (the
// takes, deletes and advances the restore will undo), and ZooKeeper goes
// back to it.
func (rr *rootsRun) restoreZK(r *rand.Rand) (string, bool) {
	release := rr.holdAll()
	valid := rr.validCopies()
	fresh := len(valid) == 0 || r.IntN(3) == 0
	if fresh {
		for _, e := range rr.roots {
			e.noStoreFaults.Store(true)
		}
		defer func() {
			for _, e := range rr.roots {
				e.noStoreFaults.Store(false)
			}
		}()
		rr.snapshot()
		release()
		time.Sleep(time.Second + time.Duration(r.IntN(2000))*time.Millisecond)
		release = rr.holdAll()
		valid = []int{len(rr.copies) - 1}
	}
	defer release()
	if !rr.storesCover(10 * time.Second) {
		return rr.record("zk-restore abandoned: the stores do not cover every sequence"), true
	}
	if valid = slices.DeleteFunc(valid, func(i int) bool { return !slices.Contains(rr.validCopies(), i) }); len(valid) == 0 {
		return rr.record("zk-restore abandoned: no copy taken after the last store fault"), true
	}
	i := valid[r.IntN(len(valid))]
	c := rr.copies[i]
	rr.roots[0].zkFault(r.IntN(2) == 0, func() error { return rr.ens.RestoreData(0, c.dir) })
	for j, e := range rr.roots {
		e.rolledBack(c.ops[j])
	}
	what := rr.record(fmt.Sprintf("zk-restore copy %d (taken at ops %v)", i, c.ops))
	rr.afterZK(r, what)
	return what, true
}

// wipeZK deletes all of ZooKeeper's data (every root's), once every
// root's store covers its sequences.
func (rr *rootsRun) wipeZK(r *rand.Rand) (string, bool) {
	defer rr.holdAll()()
	if !rr.storesCover(10 * time.Second) {
		return rr.record("zk-wipe abandoned: the stores do not cover every sequence"), true
	}
	rr.roots[0].zkFault(r.IntN(2) == 0, func() error { return rr.ens.Wipe(0) })
	for _, e := range rr.roots {
		e.rollbackOp = e.m.op
		e.forgetWidens()
	}
	what := rr.record("zk-wipe")
	rr.afterZK(r, what)
	return what, true
}
