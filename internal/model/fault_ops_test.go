package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// opDelayedTake freezes a proxied worker's network and starts a take on
// it, then interferes (re-creates the sequence and takes from the new
// incarnation, restarts or rolls back ZooKeeper, hands the primary over,
// or just takes the same sequence elsewhere). The take's requests reach
// ZooKeeper when the driver resumes the worker, a few operations later,
// on the connection and session they were sent on (if the freeze stayed
// short enough; see staleMax).
func (e *env) opDelayedTake(r *rand.Rand) (string, bool) {
	if e.stale != nil {
		return "", false
	}
	var ws []*worker
	for _, w := range e.workers {
		if w.proxy != nil && !w.frozen {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return "", false
	}
	w := ws[r.IntN(len(ws))]
	name := e.pickName(r)
	n := count(r)
	e.m.mu.Lock()
	op := e.m.op
	e.m.mu.Unlock()
	w.proxy.Pause()
	w.frozen = true
	s := &staleTake{w: w, name: name, op: op, resumeAt: op + 1 + r.IntN(4), deadline: time.Now().Add(staleMax), done: make(chan string, 1)}
	who := fmt.Sprintf("%s(delayed since #%d)", w.label, op)
	go func() { s.done <- e.take(w, who, name, n, 30*time.Second) }()
	e.stale = s
	time.Sleep(50 * time.Millisecond) // let the take's first request reach the frozen proxy

	line := fmt.Sprintf("%s frozen; take %s %d in flight until op #%d", w.label, name, n, s.resumeAt)
	takes := func(k int) string {
		var out []string
		for range k {
			o := e.pickWorker(r)
			out = append(out, e.take(o, o.label, name, count(r), callTimeout))
		}
		return strings.Join(out, "; ")
	}
	switch r.IntN(6) {
	case 0:
		if e.live(name) && !e.skip["delete"] && !e.skip["recreate"] {
			line += "; then " + e.deleteName(name, r.IntN(2) == 0) + "; " + e.recreateName(name, r.IntN(2) == 0) + "; " + takes(r.IntN(8))
		}
	case 1:
		if !e.skip["zk-restart"] {
			restart, _ := e.opRestart(r)
			line += "; then " + restart
		}
	case 2:
		if !e.skip["zk-restore"] {
			if restore, ok := e.opRestore(r); ok {
				line += "; then " + restore
			}
		}
	case 3:
		if !e.skip["handover"] {
			handover, _ := e.opHandover(r)
			line += "; then " + handover
		}
	case 4:
		line += "; then " + takes(1+r.IntN(4))
	}
	return line, true
}

// opHandover: the primary resigns gracefully and a new one starts.
func (e *env) opHandover(*rand.Rand) (string, bool) {
	old := e.prim
	e.stopPrimary(old, "handover")
	e.startPrimary()
	e.fault(fmt.Sprintf("handover %s -> %s", old.holder, e.prim.holder))
	return fmt.Sprintf("handover %s -> %s", old.holder, e.prim.holder), true
}

// opKillPrimary: the primary's session is closed abruptly (its process
// died) and a new one starts.
func (e *env) opKillPrimary(*rand.Rand) (string, bool) {
	old := e.prim
	old.zk.Close()
	e.stopPrimary(old, "killed")
	e.startPrimary()
	e.fault(fmt.Sprintf("kill-primary %s -> %s", old.holder, e.prim.holder))
	return fmt.Sprintf("kill-primary %s -> %s", old.holder, e.prim.holder), true
}

// opCompactionCrash kills the primary in the middle of a compaction of the
// store's log: its store stops dead after a random number of requests
// (before, between or after the bucket writes, the checkpoint and the
// deletes) while a compaction runs, then its session closes and a new
// primary takes over. Nothing the store held may be lost, and the next
// compaction finishes the work.
func (e *env) opCompactionCrash(r *rand.Rand) (string, bool) {
	old := e.prim
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	epoch, _, err := old.store.Epoch(ctx)
	if err != nil {
		return "", false
	}
	budget := r.Int64N(24)
	old.crash.left.Store(budget)
	res, err := old.store.Compact(ctx, epoch)
	old.zk.Close()
	e.stopPrimary(old, "crashed while compacting")
	e.startPrimary()
	what := fmt.Sprintf("compaction-crash %s after %d requests (%d segments folded, %d deleted, %v) -> %s",
		old.holder, budget, res.Segments, res.Deleted, err, e.prim.holder)
	e.fault(what)
	return what, true
}

// opExpirePrimary freezes the primary's network until its session
// expires, starts a successor, then lets the old one's held requests
// through before stopping it. Half the time the old primary's term ends
// during the freeze (as its election would end it), half the time only
// after its network is back (a deposed primary that the store must fence).
func (e *env) opExpirePrimary(r *rand.Rand) (string, bool) {
	old := e.prim
	endEarly := r.IntN(2) == 0
	gap := time.Duration(r.IntN(500)) * time.Millisecond
	old.proxy.Pause()
	time.Sleep(primarySession * 2 / 3)
	if endEarly {
		old.cancel()
	}
	time.Sleep(primarySession/3 + time.Second)
	e.startPrimary()
	time.Sleep(gap)
	old.proxy.Resume()
	time.Sleep(gap)
	e.stopPrimary(old, "expired")
	how := "term ended after its network came back"
	if endEarly {
		how = "term ended during the freeze"
	}
	e.fault(fmt.Sprintf("expire-primary %s -> %s (%s)", old.holder, e.prim.holder, how))
	return fmt.Sprintf("expire-primary %s -> %s (%s)", old.holder, e.prim.holder, how), true
}

// afterZK waits, half the time, for the primary to revalidate everything,
// and then checks that ZooKeeper does not offer IDs already handed out;
// over TLS, after ZooKeeper lost its data, a worker's identity must take
// again (workerTakesAgain).
func (e *env) afterZK(r *rand.Rand, what string) {
	if r.IntN(2) == 0 {
		e.settle(20 * time.Second)
		e.checkLatent("after " + what)
	}
	if e.tls && (what == "zk-wipe" || strings.HasPrefix(what, "zk-restore")) {
		e.workerTakesAgain(what)
	}
}

// workerTakesAgain waits up to a minute for a worker's own identity to
// take from one of the sequences after ZooKeeper lost its data (a run over
// TLS, where each role is an identity of its own): the primary brings the
// ACL layout back with the counters. A worker ZooKeeper still refuses
// then fails the run; other errors (every sequence deleted or used up)
// say nothing of the layout.
func (e *env) workerTakesAgain(what string) {
	i := slices.IndexFunc(e.workers, func(w *worker) bool { return w.proxy == nil && !w.frozen })
	if i < 0 {
		return
	}
	w := e.workers[i]
	var refused error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		refused = nil
		for _, s := range e.specs {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			got, err := w.seq.Take(ctx, s.name, 1)
			cancel()
			e.took(w.label, w.label+" (after "+what+")", s.name, 1, got, err)
			if err == nil {
				e.strangerRefused(w.label, s.name, what)
				return
			}
			if errors.Is(err, zkclient.ErrNoAuth) {
				refused = err
			}
		}
	}
	if refused != nil {
		e.m.mu.Lock()
		e.m.fail(fmt.Sprintf("LAYOUT LOST (op #%d, after %s): ZooKeeper still refuses the worker's identity a minute later: %v", e.m.op, what, refused))
		e.m.mu.Unlock()
	}
}

// strangerRefused fails the run unless ZooKeeper refuses a take from name,
// which the worker label just took from after what, to an identity the
// layout does not name (a certificate of the same CA): the layout that came
// back with the counters keeps others out as it did. What it got counts as
// the worker's.
func (e *env) strangerRefused(label, name, what string) {
	zc := e.connect("stranger", e.zkAddr, workerSession, 0)
	defer zc.Close()
	stranger := e.client(zc, time.Second)
	var got state.Ranges
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		got, err = stranger.Take(ctx, name, 1)
		cancel()
		if !zkclient.IsTransient(err) || time.Now().After(deadline) {
			break // an answer (a connection lost says nothing)
		}
	}
	if errors.Is(err, zkclient.ErrNoAuth) {
		return
	}
	e.took(label, "stranger (after "+what+")", name, 1, got, err)
	e.m.mu.Lock()
	e.m.fail(fmt.Sprintf("STRANGER NOT REFUSED (op #%d, after %s): a take from %q by an identity the layout does not name got %v, %v; want ZooKeeper to refuse it", e.m.op, what, name, got, err))
	e.m.mu.Unlock()
}

// opRestart restarts ZooKeeper (SIGTERM or SIGKILL): a new epoch.
func (e *env) opRestart(r *rand.Rand) (string, bool) {
	kill := r.IntN(2) == 0
	e.zkFault(kill, nil)
	what := "zk-restart (SIGTERM)"
	if kill {
		what = "zk-restart (SIGKILL)"
	}
	e.fault(what)
	e.afterZK(r, what)
	return what, true
}

// opSnapshot saves a copy of ZooKeeper's data (stopped, so consistent).
func (e *env) opSnapshot(r *rand.Rand) (string, bool) {
	dir := filepath.Join(e.copyDir, fmt.Sprintf("copy-%03d", len(e.copies)))
	e.zkFault(false, func() error { return e.ens.SaveData(0, dir) })
	e.m.mu.Lock()
	c := zkCopy{dir: dir, op: e.m.op, storeGen: e.m.storeGen}
	e.m.mu.Unlock()
	e.copies = append(e.copies, c)
	what := fmt.Sprintf("zk-snapshot copy %d", len(e.copies)-1)
	e.fault(what)
	e.afterZK(r, what)
	return what, true
}

// opRestore rolls ZooKeeper back to any earlier copy not older than the
// last store loss, if the store covers every sequence.
func (e *env) opRestore(r *rand.Rand) (string, bool) {
	if !e.storeCovers() {
		return "", false
	}
	e.m.mu.Lock()
	gen := e.m.storeGen
	e.m.mu.Unlock()
	var ok []int
	for i, c := range e.copies {
		if c.storeGen == gen {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return "", false
	}
	i := ok[r.IntN(len(ok))]
	c := e.copies[i]
	e.zkFault(r.IntN(2) == 0, func() error { return e.ens.RestoreData(0, c.dir) })
	e.rolledBack(c.op)
	what := fmt.Sprintf("zk-restore copy %d (taken at op #%d)", i, c.op)
	e.fault(what)
	e.afterZK(r, what)
	return what, true
}

// rolledBack brings the model to a ZooKeeper restored from a copy taken
// at op: a name deleted since may be back, and a widen since may be lost.
func (e *env) rolledBack(op int) {
	e.rollbackOp = e.m.op
	for name, deleted := range e.deleted {
		if op < deleted {
			e.undeletable[name] = true // the copy has it: it may be back
		}
	}
	e.forgetWidens()
}

// forgetWidens brings the model to a ZooKeeper that lost data: a space may
// now end below an end a widen set (a copy from before the widen; a
// restore from a store object rolled back to before it), though never
// below its first. The store keeps the widest space, which IDs are still
// checked against.
func (e *env) forgetWidens() {
	first := specsFor(e.seed)
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	for i := range e.specs {
		for _, f := range first {
			if f.name == e.specs[i].name {
				e.specs[i].landedEnd = f.landedEnd
				e.m.ledgers[f.name].spec = e.specs[i]
			}
		}
	}
}

// opWipe deletes all of ZooKeeper's data, if the store covers every
// sequence.
func (e *env) opWipe(r *rand.Rand) (string, bool) {
	if !e.storeCovers() {
		return "", false
	}
	e.zkFault(r.IntN(2) == 0, func() error { return e.ens.Wipe(0) })
	e.rollbackOp = e.m.op
	e.forgetWidens()
	e.fault("zk-wipe")
	e.afterZK(r, "zk-wipe")
	return "zk-wipe", true
}

// checkLatent fails the run if ZooKeeper holds a validated state whose
// next is not above every ID handed out: it would hand those out again.
// It is checked only when nothing else takes (between operations). A
// state used up to its end hands out no fresh ID, whatever its next: a
// widen ZooKeeper lost leaves one so (its revalidation clamps next to the
// old end + 1, below IDs that went out above it), and the one way to hand
// out more, widening it again, starts above the store's ceiling
// (seqzk.Widening.Floor), which this check sees after the widen. Its
// recycled IDs are pushed back ones, which the oracle checks as they are
// taken.
func (e *env) checkLatent(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	epoch, err := e.admin.Meta().CurrentEpoch(ctx)
	if err != nil {
		return
	}
	for _, s := range e.specs {
		st, _, err := e.admin.Describe(ctx, s.name)
		if err != nil || st.Registered || st.Legacy || st.ZKEpoch != epoch || usedUp(st) {
			continue
		}
		e.m.mu.Lock()
		highest := e.m.ledgers[s.name].highest
		if highest >= st.Next {
			e.m.fail(fmt.Sprintf("LATENT DUPLICATE (%s, op #%d): %q is validated in ZooKeeper epoch %d with next %d (ceiling %d), but %d was handed out already: the next takes hand it out again",
				when, e.m.op, s.name, epoch, st.Next, st.Ceiling, highest))
		}
		e.m.mu.Unlock()
		if highest >= st.Next {
			// Show it: take them, and let the oracle name the holders.
			line := e.take(e.adminWorker(), "admin(showing the latent duplicate)", s.name, min(highest-st.Next+1, 1000), callTimeout)
			e.m.mu.Lock()
			e.m.logOp("       " + line)
			e.m.mu.Unlock()
		}
	}
}

// adminWorker is the admin client as a worker, for takes the test makes
// itself.
func (e *env) adminWorker() *worker {
	return &worker{label: "admin", zk: e.admin.ZK(), seq: e.admin}
}

// usedUp reports whether st can hand out no fresh ID: next is past its
// end. It may still hand out IDs pushed back to it.
func usedUp(st state.State) bool {
	return st.End < state.MaxID && st.Next > st.End
}

// opBirthCrash registers a deleted name again while its primary's store
// dies after a few requests: before, between or after the birth's ceiling
// and the store's record of the birth. A worker takes from the name, the
// primary is killed, and half the time ZooKeeper loses its data before a
// successor starts. A name that handed out an ID must exist afterwards
// (the store restores it); one that handed out none may be gone.
func (e *env) opBirthCrash(r *rand.Rand) (string, bool) {
	var gone []string
	for _, s := range e.specs {
		if !e.live(s.name) {
			gone = append(gone, s.name)
		}
	}
	if len(gone) == 0 || !e.storeCovers() {
		return "", false
	}
	name := gone[r.IntN(len(gone))]
	old := e.prim
	budget := r.Int64N(8)
	old.crash.left.Store(budget)
	line := e.recreateName(name, false)
	// Only a registration that landed is a birth: "exists" is a name a
	// restore of ZooKeeper from a copy brought back while the store holds
	// it deleted (a loss then leaves it deleted, as the store says).
	born := strings.HasSuffix(line, "-> ok")
	e.m.mu.Lock()
	before := e.m.ledgers[name].handed
	e.m.mu.Unlock()
	w := e.pickWorker(r)
	line += "; " + e.take(w, w.label, name, 3, 3*time.Second)
	e.m.mu.Lock()
	took := e.m.ledgers[name].handed > before
	e.m.mu.Unlock()
	old.zk.Close()
	e.stopPrimary(old, "crashed at a birth")
	wipe := r.IntN(2) == 0
	if wipe {
		e.zkFault(r.IntN(2) == 0, func() error { return e.ens.Wipe(0) })
		e.rollbackOp = e.m.op
		e.forgetWidens()
	}
	e.startPrimary()
	what := fmt.Sprintf("birth-crash %s after %d store requests (wipe %v) -> %s: %s", old.holder, budget, wipe, e.prim.holder, line)
	e.fault(what)
	e.settle(20 * time.Second)
	exists := e.existsSure(name)
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	switch {
	case born && took && !exists:
		e.m.fail(fmt.Sprintf("NAME LOST: %q handed out IDs at op #%d and does not exist after its primary crashed at its birth and ZooKeeper lost its data: the store did not record the birth", name, e.m.op))
	case born && !exists:
		e.deleted[name] = e.m.op // never born: gone as if deleted
	}
	return fmt.Sprintf("%s -> exists %v", what, exists), true
}
