package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// besideNames are the operations that run while a deposed primary and its
// successor both work (opDeposePrimary): traffic that makes the primaries
// raise, initialise, bury and repair, and nothing that replaces a primary
// or touches ZooKeeper's or the store's data.
var besideNames = []string{
	"take", "burst", "push", "push-invalid", "use-held", "window-open", "window-prune",
	"delete", "recreate", "advance", "widen", "adopt",
}

// besideOps are opTable's entries of besideNames, with their weights (set
// at init: opTable refers to opDeposePrimary, which runs them).
var besideOps []opSpec

func init() {
	for _, o := range opTable {
		if slices.Contains(besideNames, o.name) {
			besideOps = append(besideOps, o)
		}
	}
}

// deposeOverlap is how long a deposed primary runs on beside the successor
// that leads, before it sees that its candidate node is gone: up to 2 s,
// one time in five up to 5 s.
func deposeOverlap(r *rand.Rand) time.Duration {
	if r.IntN(5) == 0 {
		return 2*time.Second + time.Duration(r.IntN(3000))*time.Millisecond
	}
	return time.Duration(r.IntN(2000)) * time.Millisecond
}

// deposedLag is how long, at most, each of a deposed primary's store
// requests waits before it goes: none half the time, else up to 300 ms (a
// slow network or store), so that its writes decided before its
// successor's seal more often reach the store after it.
func deposedLag(r *rand.Rand) time.Duration {
	if r.IntN(2) == 0 {
		return 0
	}
	return time.Duration(1+r.IntN(300)) * time.Millisecond
}

// leading returns a channel that receives the time at which every one of
// prims leads (its Run has advanced the store's leader epoch, sealed the
// store and started: Status.Leading), and is closed without a value if
// that has not happened within limit.
func leading(prims []*primaryRun, limit time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		defer close(ch)
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			if !slices.ContainsFunc(prims, func(pr *primaryRun) bool { return !pr.p.Status().Leading }) {
				ch <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ch
}

// termEnd says how a deposed primary's term ended (read after its done),
// against led, when its successor led (zero: it never did).
func termEnd(pr *primaryRun, led time.Time) string {
	if pr.endedAt.IsZero() {
		return "ran until stopped"
	}
	how := "stopped itself (" + classify(pr.ended) + ")"
	switch d := pr.endedAt.Sub(led); {
	case led.IsZero():
		return how
	case d < 0:
		return fmt.Sprintf("%s %s before its successor led", how, (-d).Round(10*time.Millisecond))
	default:
		return fmt.Sprintf("%s %s after its successor led", how, d.Round(10*time.Millisecond))
	}
}

// opDeposePrimary: a standby deposes the primary while it lives (it saw
// the primary's API port refuse connections, wrongly, and deleted its
// candidate node). The successor starts on its own session and takes the
// store (advances the leader epoch and seals every bucket) while the old
// primary works on, on a live session and an open network, so that its
// ZooKeeper writes go through and only its store writes are fenced (half
// the time they are slow: deposedLag). The test drives traffic meanwhile (both primaries raise, initialise, bury),
// and, once the successor leads, for a random overlap more, sometimes
// after a ZooKeeper restart (both revalidate); then the old primary's
// term ends, as when it sees its node gone. A deposed primary whose Run
// fails (fenced) is not run again: its election rejoins behind the new
// leader.
func (e *env) opDeposePrimary(r *rand.Rand) (string, bool) {
	old := e.prim
	wasLeading := old.p.Status().Leading
	overlap := deposeOverlap(r)
	restart := r.IntN(5) == 0 && !e.skip["zk-restart"]
	lag := deposedLag(r)
	old.crash.lag.Store(int64(lag))
	old.deposed.Store(true)
	e.startPrimary()
	nw := e.prim
	e.m.mu.Lock()
	e.m.logOp(fmt.Sprintf("#%-5d depose-primary: %s starts beside %s (leading: %v, store lag %s); then an overlap of %s", e.m.op, nw.holder, old.holder, wasLeading, lag, overlap))
	e.m.mu.Unlock()

	ledCh := leading([]*primaryRun{nw}, faultTimeout)
	var led time.Time
	n := e.traffic(r, func() bool {
		select {
		case t, ok := <-ledCh:
			led = t
			return !ok || !led.IsZero()
		default:
			return false
		}
	})
	if led.IsZero() {
		e.m.note("depose-primary: the successor did not lead within " + faultTimeout.String())
	}
	took := ""
	if !led.IsZero() {
		took = fmt.Sprintf(" led after %d operations", n)
	}
	extra := ""
	if restart {
		what, _ := e.opRestart(r)
		extra = "; " + what + " during the overlap"
	}
	end := time.Now().Add(overlap)
	n = e.traffic(r, func() bool { return time.Now().After(end) })
	e.stopPrimary(old, "deposed")
	what := fmt.Sprintf("depose-primary %s -> %s (%s%s; overlap %s with %d operations%s; %s was leading: %v, store lag %s, %s)",
		old.holder, nw.holder, nw.holder, took, overlap, n, extra, old.holder, wasLeading, lag, termEnd(old, led))
	e.fault(what)
	return what, true
}

// traffic runs operations of besideOps, by their weights (a take when one
// is skipped or not possible), until stop reports true (checked before
// each), logs each, and returns how many ran.
func (e *env) traffic(r *rand.Rand, stop func() bool) int {
	total := 0
	for _, o := range besideOps {
		total += o.weight
	}
	n := 0
	for ; !stop(); n++ {
		x := r.IntN(total)
		o := besideOps[0]
		for _, b := range besideOps {
			if x < b.weight {
				o = b
				break
			}
			x -= b.weight
		}
		line, ok := "", false
		if !e.skip[o.name] {
			line, ok = o.run(e, r)
		}
		if !ok {
			line, _ = e.opTake(r)
		}
		e.m.mu.Lock()
		e.m.logOp("       beside: " + line)
		e.m.mu.Unlock()
	}
	return n
}

// deposeProcess: every root's standby deposes the process while it lives
// (its API port, the process's, refused connections), as opDeposePrimary
// for one root. A new process starts a primary of every root beside the
// old one's, whose session and network stay up; once every new primary
// leads, each old primary runs on for an overlap of its own (each root's
// election sees its node gone in its own time) while the root drivers go
// on, and its term ends.
func (rr *rootsRun) deposeProcess(r *rand.Rand) (string, bool) {
	old := rr.proc
	lag := deposedLag(r)
	for _, pr := range old.prims {
		pr.crash.lag.Store(int64(lag))
		pr.deposed.Store(true)
	}
	rr.startProcess()
	t, ok := <-leading(rr.proc.prims, faultTimeout)
	if !ok {
		for _, e := range rr.roots {
			e.m.note("depose-primary: the successors did not all lead within " + faultTimeout.String())
		}
	}
	var wg sync.WaitGroup
	var ran atomic.Int32
	var overlaps []string
	for _, pr := range old.prims {
		d := deposeOverlap(r)
		overlaps = append(overlaps, d.Round(10*time.Millisecond).String())
		wg.Go(func() {
			time.Sleep(d)
			select {
			case <-pr.done:
			default:
				ran.Add(1)
			}
			pr.cancel()
		})
	}
	wg.Wait()
	rr.stopProcess(old, "deposed")
	var ends []string
	for i, pr := range old.prims {
		ends = append(ends, rr.names[i]+": "+termEnd(pr, t))
	}
	return rr.record(fmt.Sprintf("depose-primary %s -> %s (store lag %s; overlaps %s; %d of %d still ran when stopped; %s)",
		old.holder, rr.proc.holder, lag, strings.Join(overlaps, ", "), ran.Load(), len(old.prims), strings.Join(ends, "; "))), true
}
