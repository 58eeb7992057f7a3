package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"

	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// opSpec is one kind of operation and its weight in the random choice.
type opSpec struct {
	name   string
	weight int
	// run performs the operation and returns its line for the operation
	// log, or ok false when it is not possible now (nothing was done; the
	// driver takes instead).
	run func(e *env, r *rand.Rand) (line string, ok bool)
}

// opTable lists every operation. Traffic is most of the choices; faults
// are rare but take seconds each, so they take most of the time.
var opTable = []opSpec{
	// Traffic. opTable[0] is the fallback when a choice is not possible.
	{"take", 360, (*env).opTake},
	{"burst", 75, (*env).opBurst},
	{"push", 90, (*env).opPush},
	{"push-invalid", 60, (*env).opPushInvalid},
	{"use-held", 24, (*env).opUseHeld},
	{"window-open", 24, (*env).opOpenWindow},
	{"window-prune", 12, (*env).opPruneWindows},
	{"delete", 12, (*env).opDelete},
	{"recreate", 18, (*env).opRecreate},
	{"delayed-take", 18, (*env).opDelayedTake},
	{"advance", 12, (*env).opAdvance},
	{"export", 4, (*env).opExport},
	{"import-beside", 5, (*env).opImportBeside},
	{"operator-restore", 5, (*env).opOperatorRestore},
	{"verify", 5, (*env).opVerify},
	{"widen", 6, (*env).opWiden},
	{"adopt", 3, (*env).opAdopt},

	// Faults: about one operation in sixty.
	{"handover", 2, (*env).opHandover},
	{"kill-primary", 1, (*env).opKillPrimary},
	{"compaction-crash", 2, (*env).opCompactionCrash},
	{"expire-primary", 1, (*env).opExpirePrimary},
	{"zk-restart", 2, (*env).opRestart},
	{"zk-snapshot", 2, (*env).opSnapshot},
	{"zk-restore", 2, (*env).opRestore},
	{"zk-wipe", 1, (*env).opWipe},
	{"store-fault", 6, (*env).opStoreFault},
	{"move", 1, (*env).opMove},
}

func pickOp(r *rand.Rand) opSpec {
	total := 0
	for _, o := range opTable {
		total += o.weight
	}
	x := r.IntN(total)
	for _, o := range opTable {
		if x < o.weight {
			return o
		}
		x -= o.weight
	}
	panic("unreachable")
}

// runModel is one run: set up, drive operations until the duration, the
// operation limit (0: none) or the first failure, then tear down.
func runModel(t *testing.T, set settings, maxOps int) outcome {
	began := time.Now()
	specs := slices.DeleteFunc(specsFor(set.seed), func(s seqSpec) bool { return set.skip["seq:"+s.name] })
	m := newModel(specs)
	e := setup(t, set.seed, m, specs, set.tls)
	e.skip = set.skip
	var once sync.Once
	closeEnv := func() { once.Do(e.close) }
	t.Cleanup(closeEnv)

	deadline := began.Add(set.duration)
	op := 0
	for !m.failed() && time.Now().Before(deadline) && (maxOps == 0 || op < maxOps) {
		op++
		m.mu.Lock()
		m.op = op
		m.mu.Unlock()
		if s := e.stale; s != nil && (op >= s.resumeAt || time.Now().After(s.deadline)) {
			e.resumeStale()
		}
		e.storeCovers()
		if op%5 == 0 {
			e.archiveStore()
		}
		// Each operation's choices come from the seed and its index alone.
		r := rand.New(rand.NewPCG(set.seed, uint64(op)))
		o := pickOp(r)
		line, ok := "", false
		if !set.skip[o.name] {
			line, ok = o.run(e, r)
		}
		if !ok {
			o = opTable[0]
			line, _ = o.run(e, r)
		}
		m.mu.Lock()
		m.opsByKind[o.name]++
		m.logOp(fmt.Sprintf("#%-5d %s", op, line))
		for _, f := range m.failures[m.logged:] {
			m.logOp("       !! " + firstLine(f))
		}
		m.logged = len(m.failures)
		m.mu.Unlock()
	}
	if !m.failed() {
		e.resumeStale()
		e.settle(20 * time.Second)
		e.checkLatent("end of run")
	}
	closeEnv()

	m.mu.Lock()
	defer m.mu.Unlock()
	return outcome{
		ops:      op,
		failed:   len(m.failures) > 0,
		failOp:   m.failOp,
		failures: m.failures,
		tail:     lastN(m.recent, recentOps),
		faults:   m.faults,
		elapsed:  time.Since(began),
		summary:  m.summary(set.seed, op, time.Since(began)),
	}
}

// classify names the class of a call's error, for the counters.
func classify(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sequence.ErrCeilingReached):
		return "ceiling-reached"
	case errors.Is(err, sequence.ErrUnvalidated):
		return "unvalidated"
	case errors.Is(err, sequence.ErrUnknownSequence):
		return "unknown-sequence"
	case errors.Is(err, sequence.ErrExhausted):
		return "exhausted"
	case errors.Is(err, sequence.ErrRecreated):
		return "recreated"
	case errors.Is(err, sequence.ErrUncertain):
		return "uncertain"
	case errors.Is(err, sequence.ErrBadPush):
		return "bad-push"
	case errors.Is(err, seqzk.ErrAdvanceRefused):
		return "refused"
	case errors.Is(err, persist.ErrFenced):
		return "fenced"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case zkclient.IsTransient(err):
		return "zk-connection"
	case strings.Contains(err.Error(), "already exists"):
		return "exists"
	}
	return "other"
}

// notApplied reports whether a push that failed with err certainly
// changed nothing: refused, or never written.
func notApplied(err error) bool {
	return errors.Is(err, sequence.ErrBadPush) || errors.Is(err, sequence.ErrUnknownSequence) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// count is a take's size: mostly small, sometimes large.
func count(r *rand.Rand) int64 {
	switch x := r.IntN(10); {
	case x < 6:
		return 1 + r.Int64N(10)
	case x < 9:
		return 1 + r.Int64N(100)
	default:
		return 1 + r.Int64N(1000)
	}
}

// subRange returns a random part of r, at most most IDs long.
func subRange(r *rand.Rand, in sequence.Range, most int64) sequence.Range {
	n := 1 + r.Int64N(min(in.Len(), most))
	off := r.Int64N(in.Len() - n + 1)
	return sequence.Range{Start: in.Start + off, End: in.Start + off + n - 1}
}

func (e *env) opTake(r *rand.Rand) (string, bool) {
	w := e.pickWorker(r)
	name := e.pickName(r)
	gone := e.deletedForGood(name)
	line := e.take(w, w.label, name, count(r), callTimeout)
	e.servedAfterDelete(gone, name, line)
	return line, true
}

// deletedForGood reports whether name is deleted and may not come back:
// not created again since, and no restore of ZooKeeper from a copy taken
// before its delete. The driver calls it before a take.
func (e *env) deletedForGood(name string) bool {
	_, gone := e.deleted[name]
	return gone && !e.undeletable[name]
}

// servedAfterDelete fails the run when a take of a name deleted for good
// (gone, read before the take) handed out IDs: a deleted incarnation was
// served again.
func (e *env) servedAfterDelete(gone bool, name, line string) {
	if !gone || strings.Contains(line, "-> error") {
		return
	}
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	e.m.fail(fmt.Sprintf("DELETED SEQUENCE SERVED: %q, deleted at op #%d and not created again, handed out IDs at op #%d: %s", name, e.deleted[name], e.m.op, line))
}

// opBurst runs takes by several workers at once, mostly on one sequence,
// so that their compare-and-sets contend.
func (e *env) opBurst(r *rand.Rand) (string, bool) {
	var ws []*worker
	for _, i := range r.Perm(len(e.workers)) {
		if !e.workers[i].frozen {
			ws = append(ws, e.workers[i])
		}
	}
	ws = ws[:min(len(ws), 2+r.IntN(3))]
	same := r.IntN(10) < 7
	name := e.pickName(r)
	names, counts := make([]string, len(ws)), make([]int64, len(ws))
	for i := range ws {
		names[i], counts[i] = name, count(r)
		if !same {
			names[i] = e.pickName(r)
		}
	}
	lines := make([]string, len(ws))
	gone := make([]bool, len(ws))
	for i := range ws {
		gone[i] = e.deletedForGood(names[i])
	}
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { lines[i] = e.take(w, w.label, names[i], counts[i], callTimeout) })
	}
	wg.Wait()
	for i := range ws {
		e.servedAfterDelete(gone[i], names[i], lines[i])
	}
	return "burst: " + strings.Join(lines, "; "), true
}

// heldChoice picks a worker (not frozen) and a name it holds IDs of; m.mu
// must be held.
func (e *env) heldChoice(r *rand.Rand) (*worker, string, *idSet, bool) {
	type choice struct {
		w    *worker
		name string
	}
	var cs []choice
	for _, w := range e.workers {
		for _, s := range e.specs {
			if h := e.m.held[w.label][s.name]; !w.frozen && h != nil && len(h.rs) > 0 {
				cs = append(cs, choice{w, s.name})
			}
		}
	}
	if len(cs) == 0 {
		return nil, "", nil, false
	}
	c := cs[r.IntN(len(cs))]
	return c.w, c.name, e.m.held[c.w.label][c.name], true
}

// opPush pushes back part of what a worker holds: a valid push.
func (e *env) opPush(r *rand.Rand) (string, bool) {
	m := e.m
	m.mu.Lock()
	w, name, h, ok := e.heldChoice(r)
	if !ok {
		m.mu.Unlock()
		return "", false
	}
	sub := subRange(r, h.rs[r.IntN(len(h.rs))], 50)
	h.remove(sub)
	l := m.ledgers[name]
	// Returned before the push is sent: a take that gets these IDs once
	// the push has landed must find them returned, whichever goroutine
	// records first.
	l.returned.add(sub)
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err := w.seq.Push(ctx, name, sequence.Ranges{sub})
	cancel()

	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("push", err)
	switch {
	case err == nil:
		l.pushed(m.op, w.label, "pushed back", sub)
	case notApplied(err):
		// Still the worker's: if a take got any of them meanwhile, two
		// holders have them.
		for _, d := range l.returned.missing(sub) {
			m.fail(fmt.Sprintf("DUPLICATE: %s's push of %s of %q was not applied (%s), yet %s was handed out meanwhile: %s",
				w.label, sub, name, class, d, l.duplicate(m.op, w.label+" (still holding it)", d)))
		}
		l.returned.remove(sub)
		h.add(sub)
	default:
		l.pushed(m.op, w.label, "pushed back (outcome unknown: "+class+")", sub)
	}
	return fmt.Sprintf("%s push %s %s -> %s", w.label, name, sub, class), true
}

// opUseHeld: a worker uses IDs it holds, so it will never push them.
func (e *env) opUseHeld(r *rand.Rand) (string, bool) {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	w, name, h, ok := e.heldChoice(r)
	if !ok {
		return "", false
	}
	used := h.rs[r.IntN(len(h.rs))]
	h.remove(used)
	return fmt.Sprintf("%s used %s of %s", w.label, used, name), true
}

// invalidPush is a push the sequence must refuse, and how to tell, if it
// is accepted, whether the sequence could have changed between the read
// the push was derived from and the push.
type invalidPush struct {
	kind    string
	r       sequence.Range
	why     string
	confirm func() (bool, string)
}

func always() (bool, string) { return true, "" }

// invalidFor builds a push of the given kind on name, or reports false
// when the sequence's state offers none.
func (e *env) invalidFor(r *rand.Rand, kind, name string) (invalidPush, bool) {
	spec := e.spec(name)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	path := e.admin.Path(name)
	switch kind {
	case "beyond":
		st, _, err := e.admin.Describe(ctx, name)
		if err != nil || st.Registered {
			return invalidPush{}, false
		}
		e.m.mu.Lock()
		hi := max(st.Ceiling, st.Next, e.m.ledgers[name].highest)
		e.m.mu.Unlock()
		if hi > spec.end()-beyondMargin-2000 {
			return invalidPush{}, false
		}
		lo := hi + beyondMargin + r.Int64N(1000)
		return invalidPush{kind: kind, r: sequence.Range{Start: lo, End: lo + r.Int64N(100)},
			why: fmt.Sprintf("never issued: far above the ceiling %d read just before", st.Ceiling), confirm: always}, true
	case "outside":
		var opts []sequence.Range
		if s := spec.start(); s > 1 {
			k := 1 + r.Int64N(min(20, s-1))
			opts = append(opts, sequence.Range{Start: s - k, End: s - 1}, sequence.Range{Start: s - k, End: s + r.Int64N(5)})
		}
		if end := spec.end(); end < state.MaxID {
			k := 1 + r.Int64N(min(20, state.MaxID-end))
			opts = append(opts, sequence.Range{Start: end + 1, End: end + k}, sequence.Range{Start: max(spec.start(), end-r.Int64N(5)), End: end + k})
		}
		if len(opts) == 0 {
			return invalidPush{}, false
		}
		return invalidPush{kind: kind, r: opts[r.IntN(len(opts))],
			why: fmt.Sprintf("outside the space %d:%d", spec.start(), spec.end()), confirm: always}, true
	case "overlap":
		st, stat, err := e.getState(path, name)
		if err != nil || len(st.Recycled) == 0 {
			return invalidPush{}, false
		}
		sub := subRange(r, st.Recycled[r.IntN(len(st.Recycled))], 20)
		return invalidPush{kind: kind, r: sub,
			why: fmt.Sprintf("already in the recycled list at version %d", stat.Version),
			confirm: func() (bool, string) {
				_, now, err := e.getState(path, name)
				if err != nil || now.Czxid != stat.Czxid || now.Version != stat.Version+1 {
					return false, "the sequence changed meanwhile"
				}
				return true, ""
			}}, true
	case "window":
		children, _, err := e.admin.ZK().Children(context.Background(), path)
		if err != nil {
			return invalidPush{}, false
		}
		var windows []string
		for _, c := range children {
			if strings.HasPrefix(c, state.WindowPrefix) {
				windows = append(windows, c)
			}
		}
		if len(windows) == 0 {
			return invalidPush{}, false
		}
		wname := windows[r.IntN(len(windows))]
		wpath := path + "/" + wname
		wst, wstat, err := e.getState(wpath, name+"/"+wname)
		if err != nil || wst.Registered || wst.Legacy || wst.Next > wst.Ceiling {
			return invalidPush{}, false
		}
		sub := subRange(r, sequence.Range{Start: wst.Next, End: wst.Ceiling}, 20)
		return invalidPush{kind: kind, r: sub,
			why: fmt.Sprintf("never issued: carved into window %s (next %d, version %d) and not handed out from it", wname, wst.Next, wstat.Version),
			confirm: func() (bool, string) {
				_, now, err := e.getState(wpath, name+"/"+wname)
				if err != nil || now.Czxid != wstat.Czxid || now.Version != wstat.Version {
					return false, "the window changed meanwhile"
				}
				return true, ""
			}}, true
	}
	panic("unknown invalid push " + kind)
}

// invalidKinds are the kinds of invalid pushes; see invalidFor.
var invalidKinds = []string{"beyond", "outside", "overlap", "window"}

// opPushInvalid pushes IDs the sequence must refuse.
func (e *env) opPushInvalid(r *rand.Rand) (string, bool) {
	w := e.pickWorker(r)
	name := e.pickName(r)
	first := r.IntN(len(invalidKinds))
	var p invalidPush
	found := false
	for i := range invalidKinds {
		kind := invalidKinds[(first+i)%len(invalidKinds)]
		if e.skip["push-invalid:"+kind] {
			continue
		}
		if p, found = e.invalidFor(r, kind, name); found {
			break
		}
	}
	if !found {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err := w.seq.Push(ctx, name, sequence.Ranges{p.r})
	cancel()
	var confirmed bool
	var doubt string
	if err == nil {
		confirmed, doubt = p.confirm()
	}

	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("push-invalid-"+p.kind, err)
	if err == nil {
		m.ledgers[name].pushed(m.op, w.label, "pushed (invalid: "+p.kind+"; accepted)", p.r)
		if confirmed {
			m.fail(fmt.Sprintf("ACCEPTED INVALID PUSH: %s pushed %s into %q at op #%d and it was accepted; those IDs are %s",
				w.label, p.r, name, m.op, p.why))
		} else {
			m.notes["invalid push accepted, inconclusive ("+p.kind+": "+doubt+")"]++
		}
	}
	return fmt.Sprintf("%s push-invalid(%s) %s %s -> %s", w.label, p.kind, name, p.r, class), true
}

func (e *env) windowedLive() []string {
	var out []string
	for _, s := range e.specs {
		if s.reg.Windows > 0 && e.live(s.name) {
			out = append(out, s.name)
		}
	}
	return out
}

// opOpenWindow carves a window as the primary does (any client may).
func (e *env) opOpenWindow(r *rand.Rand) (string, bool) {
	names := e.windowedLive()
	if len(names) == 0 {
		return "", false
	}
	name := names[r.IntN(len(names))]
	w := e.pickWorker(r)
	size := 1 + r.Int64N(200)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	win, err := w.seq.OpenWindow(ctx, name, size)
	cancel()
	e.m.mu.Lock()
	class := e.m.call("window-open", err)
	e.m.mu.Unlock()
	return fmt.Sprintf("%s open-window %s %d -> %s %s", w.label, name, size, class, win), true
}

func (e *env) opPruneWindows(r *rand.Rand) (string, bool) {
	names := e.windowedLive()
	if len(names) == 0 {
		return "", false
	}
	name := names[r.IntN(len(names))]
	w := e.pickWorker(r)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	open, err := w.seq.PruneWindows(ctx, name, state.VersionLimit)
	cancel()
	e.m.mu.Lock()
	class := e.m.call("window-prune", err)
	e.m.mu.Unlock()
	return fmt.Sprintf("%s prune-windows %s -> %s, %d open", w.label, name, class, open), true
}

// opDelete deletes a live sequence (tombstone first).
func (e *env) opDelete(r *rand.Rand) (string, bool) {
	live := e.liveNames()
	if len(live) == 0 {
		return "", false
	}
	return e.deleteName(live[r.IntN(len(live))], r.IntN(2) == 0), true
}

// deleteName deletes name as 'seqkeeper delete' does, or over the HTTP
// API's admin route.
func (e *env) deleteName(name string, overHTTP bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var tomb int64
	var err error
	if overHTTP {
		tomb, err = e.httpDelete(ctx, name)
	} else {
		tomb, err = deleteSequence(ctx, e.admin, e.store, name)
	}
	cancel()
	// A delete that failed deleted the name only if its tombstone reached
	// the store and the znode is gone. One that found no znode, or failed
	// before its tombstone (a connection lost just after ZooKeeper lost its
	// data), deleted nothing: the name may be lost by ZooKeeper and about
	// to be restored.
	gone := err == nil || !errors.Is(err, sequence.ErrUnknownSequence) && e.tombstoned(name) && !e.existsSure(name)
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("delete", err)
	if !gone {
		return fmt.Sprintf("delete %s -> %s (still there)", name, class)
	}
	e.deleted[name] = m.op
	delete(e.undeletable, name)
	l := m.ledgers[name]
	if err == nil && !m.lost[name] && tomb < l.highest {
		m.fail(fmt.Sprintf("TOMBSTONE BELOW ISSUED: deleting %q at op #%d left a tombstone with ceiling %d, but %d was handed out: a re-created %q could hand it out again",
			name, m.op, tomb, l.highest, name))
	}
	via := ""
	if overHTTP {
		via = " over HTTP"
	}
	return fmt.Sprintf("delete %s%s -> %s, tombstone ceiling %d (highest handed out %d)", name, via, class, tomb, l.highest)
}

// tombstoned reports whether the store holds name deleted (false when it
// cannot tell).
func (e *env) tombstoned(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rec, err := e.store.Get(ctx, name)
	return err == nil && rec.Deleted()
}

// existsSure reports whether the znode of name exists, retrying read
// errors for a while; it says true when it cannot tell.
func (e *env) existsSure(name string) bool {
	for range 50 {
		ok, _, err := e.admin.ZK().Exists(context.Background(), e.admin.Path(name))
		if err == nil {
			return ok
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// opRecreate registers a deleted name again, with its registration.
func (e *env) opRecreate(r *rand.Rand) (string, bool) {
	var gone []string
	for _, s := range e.specs {
		if !e.live(s.name) {
			gone = append(gone, s.name)
		}
	}
	if len(gone) == 0 {
		return "", false
	}
	return e.recreateName(gone[r.IntN(len(gone))], r.IntN(2) == 0), true
}

// recreateName registers a deleted name again, as a bare znode (a worker's
// registration) or over the HTTP API's admin route.
func (e *env) recreateName(name string, overHTTP bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	var err error
	if overHTTP {
		err = e.httpCreate(ctx, name)
	} else {
		err = e.admin.Register(ctx, name, e.spec(name).reg)
	}
	cancel()
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("recreate", err)
	switch {
	case err == nil:
	case class == "exists":
		if e.undeletable[name] {
			m.notes["deleted sequence back after a restore of ZooKeeper from a copy taken before its delete"]++
		} else {
			m.fail(fmt.Sprintf("RESURRECTED: %q, deleted at op #%d, exists again at op #%d, with no restore of ZooKeeper from a copy taken before its delete",
				name, e.deleted[name], m.op))
		}
	default:
		return fmt.Sprintf("recreate %s -> %s", name, class)
	}
	delete(e.deleted, name)
	delete(e.undeletable, name)
	return fmt.Sprintf("recreate %s -> %s", name, class)
}

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
// and then checks that ZooKeeper does not offer IDs already handed out.
func (e *env) afterZK(r *rand.Rand, what string) {
	if r.IntN(2) == 0 {
		e.settle(20 * time.Second)
		e.checkLatent("after " + what)
	}
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
	e.rollbackOp = e.m.op
	for name, op := range e.deleted {
		if c.op < op {
			e.undeletable[name] = true // the copy has it: it may be back
		}
	}
	what := fmt.Sprintf("zk-restore copy %d (taken at op #%d)", i, c.op)
	e.fault(what)
	e.afterZK(r, what)
	return what, true
}

// opWipe deletes all of ZooKeeper's data, if the store covers every
// sequence.
func (e *env) opWipe(r *rand.Rand) (string, bool) {
	if !e.storeCovers() {
		return "", false
	}
	e.zkFault(r.IntN(2) == 0, func() error { return e.ens.Wipe(0) })
	e.rollbackOp = e.m.op
	e.fault("zk-wipe")
	e.afterZK(r, "zk-wipe")
	return "zk-wipe", true
}

// checkLatent fails the run if ZooKeeper holds a validated state whose
// next is not above every ID handed out: it would hand those out again.
// It is checked only when nothing else takes (between operations).
func (e *env) checkLatent(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	epoch, err := e.admin.CurrentEpoch(ctx)
	if err != nil {
		return
	}
	for _, s := range e.specs {
		st, _, err := e.admin.Describe(ctx, s.name)
		if err != nil || st.Registered || st.Legacy || st.ZKEpoch != epoch {
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
