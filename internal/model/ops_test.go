package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

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
	{"operators-race", 10, (*env).opOperatorRace},

	// Faults: about one operation in sixty.
	{"handover", 2, (*env).opHandover},
	{"kill-primary", 1, (*env).opKillPrimary},
	{"compaction-crash", 2, (*env).opCompactionCrash},
	{"birth-crash", 1, (*env).opBirthCrash},
	{"expire-primary", 1, (*env).opExpirePrimary},
	{"depose-primary", 1, (*env).opDeposePrimary},
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
	case errors.Is(err, seqzk.ErrAdvanceRefused), errors.Is(err, seqzk.ErrWidenRefused):
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
		children, _, err := e.admin.ZK().Session().Children(context.Background(), path)
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
	win, err := w.seq.Keeper().OpenWindow(ctx, name, size)
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
	open, err := w.seq.Keeper().PruneWindows(ctx, name, state.VersionLimit)
	cancel()
	e.m.mu.Lock()
	class := e.m.call("window-prune", err)
	e.m.mu.Unlock()
	return fmt.Sprintf("%s prune-windows %s -> %s, %d open", w.label, name, class, open), true
}
