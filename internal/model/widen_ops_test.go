package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// maxAdoptions bounds the legacy counters a run adopts (each becomes one
// more sequence of the run).
const maxAdoptions = 3

// opWiden widens a live sequence as 'seqkeeper widen' does, beside
// takers and the primary: the end of a bounded space up, windows up, or
// (refused) the end down. The oracle's space follows the end asked for,
// whatever the outcome: the store may hold it, and a restore bring it.
func (e *env) opWiden(r *rand.Rand) (string, bool) {
	live := e.liveNames()
	if len(live) == 0 {
		return "", false
	}
	name := live[r.IntN(len(live))]
	spec := e.spec(name)
	var w seqzk.Widening
	kind := ""
	switch x := r.IntN(4); {
	case x < 2 && spec.reg.End != 0:
		w.End, kind = spec.end()+1+r.Int64N(3000), "end"
	case x == 2 && spec.reg.End != 0:
		// Below an end that landed: a widen that failed may have left
		// the space narrower than the widest asked for.
		w.End, kind = spec.endLanded()-1-r.Int64N(10), "narrow"
	case spec.reg.Windows < 4:
		w.Windows, kind = spec.reg.Windows+1, "windows"
	default:
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := primary.Widen(ctx, e.admin, e.store, name, w)

	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("widen", err)
	line := fmt.Sprintf("widen %s %s (end %d, windows %d) -> %s", name, kind, w.End, w.Windows, class)
	if kind == "narrow" {
		if err == nil && st.End < spec.endLanded() {
			m.fail(fmt.Sprintf("SPACE NARROWED: widen of %q to %d from %d was not refused: %+v", name, w.End, spec.endLanded(), st))
		}
		return line, true
	}
	e.widenSpec(name, w)
	if err == nil {
		e.landedSpec(name, st.End)
	}
	if err == nil {
		line += fmt.Sprintf(": now end %d, %d windows", st.End, st.Windows)
	}
	return line, true
}

// opAdopt brings a Curator counter into the run as 'seqkeeper adopt'
// does: the counter appears under the root (its IDs up to its value count
// as handed out by the old system), two workers take from it as a legacy
// counter, and it is adopted while they take. From then on it is one more
// sequence of the run, under every fault. It runs only when no take is
// frozen and the store covers everything, so that no fault meets the
// counter before it is adopted (a legacy counter's IDs may be handed out
// twice after a ZooKeeper loss: the weaker guarantee adopt ends).
func (e *env) opAdopt(r *rand.Rand) (string, bool) {
	if e.adoptions >= maxAdoptions || e.stale != nil || !e.storeCovers() {
		return "", false
	}
	e.adoptions++
	name := fmt.Sprintf("legacy-%d", e.adoptions)
	value := int64(e.adoptions)*10_000_000 + r.Int64N(1000)
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	// The admin session redials at once after a loss, and a request in
	// flight then fails with its connection: retry it; one that applied
	// before the failure left the counter there. After a wipe the root
	// is gone until the primary restores it: wait for it.
	// Under a layout (TLS) the counter has the ACL 'acl apply' gives a
	// sequence, as one that a Curator writer created before it ran.
	counter := binary.BigEndian.AppendUint64(nil, uint64(value))
	acl := e.admin.ZK().ACL()
	if l := e.layout.ACL(seqzk.KindSequence); l != nil {
		acl = l
	}
	for {
		_, err := e.admin.ZK().Session().CreateWithACL(ctx, e.admin.Path(name), counter, 0, acl)
		if err == nil {
			break
		}
		if errors.Is(err, zkclient.ErrNodeExists) {
			if data, _, gerr := e.admin.ZK().Session().Get(ctx, e.admin.Path(name)); gerr == nil && bytes.Equal(data, counter) {
				break
			}
		}
		if !zkclient.IsTransient(err) && !errors.Is(err, zkclient.ErrNoNode) || ctx.Err() != nil {
			e.fatalf("create the legacy counter %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	spec := seqSpec{name: name, kind: "adopted"}
	m := e.m
	m.mu.Lock()
	e.specs = append(e.specs, spec)
	l := newLedger(spec)
	l.issued.add(sequence.Range{Start: state.DefaultStart, End: value}) // by the old system
	l.highest = value
	l.events = append(l.events, event{op: m.op, who: "curator", what: "took", r: sequence.Range{Start: state.DefaultStart, End: value}})
	m.ledgers[name] = l
	m.mu.Unlock()

	// Two workers take from the counter until the adoption is done.
	var takers []*worker
	for _, i := range r.Perm(len(e.workers)) {
		if w := e.workers[i]; !w.frozen && len(takers) < 2 {
			takers = append(takers, w)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var legacyTakes sync.Map
	for _, w := range takers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				tctx, cancel := context.WithTimeout(ctx, callTimeout)
				got, err := w.seq.Take(tctx, name, 1+int64(n%13))
				cancel()
				// Not checked against the store: a legacy counter has
				// no stored ceiling (takes that land after the adoption
				// are checked by the oracle all the same).
				e.record(w.label, w.label, name, 1+int64(n%13), got, err)
				if err == nil {
					legacyTakes.Store(w.label+fmt.Sprint(n), got)
				}
			}
		})
	}
	time.Sleep(time.Duration(50+r.IntN(200)) * time.Millisecond)
	var a primary.Adopted
	var err error
	var tries []string // every failed attempt's error, for the failure's message
	for attempt := 0; attempt < 5; attempt++ {
		if a, err = primary.Adopt(ctx, e.admin, e.store, name, operatorReserve); err == nil {
			break
		}
		tries = append(tries, fmt.Sprintf("attempt %d at %s: %v", attempt+1, time.Now().Format("15:04:05.000"), err))
		time.Sleep(200 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	taken := 0
	legacyTakes.Range(func(_, _ any) bool { taken++; return true })

	m.mu.Lock()
	m.call("adopt", err)
	if err != nil {
		m.fail(fmt.Sprintf("ADOPT FAILED: the legacy counter %q (at %d) was not adopted with nothing else going on: %s", name, value, strings.Join(tries, "; ")))
		m.mu.Unlock()
		return "adopt " + name + " -> failed", true
	}
	m.mu.Unlock()
	rec, gerr := e.store.Get(ctx, name)
	m.mu.Lock()
	switch {
	case gerr != nil:
		m.fail(fmt.Sprintf("DURABLE BEFORE USABLE: %q adopted at next %d, and the store cannot give its record: %v", name, a.State.Next, gerr))
	case rec.Legacy || rec.Ceiling < a.State.Ceiling:
		m.fail(fmt.Sprintf("DURABLE BEFORE USABLE: %q adopted with ceiling %d, and the store holds %+v", name, a.State.Ceiling, rec))
	}
	m.mu.Unlock()
	line := fmt.Sprintf("adopt %s (curator counter at %d, %d legacy takes beside it) -> counter %d adopted at next %d, ceiling %d",
		name, value, taken, a.Counter.Value, a.State.Next, a.State.Ceiling)
	for _, w := range takers {
		line += "; " + e.take(w, w.label, name, 5, callTimeout)
	}
	return line, true
}
