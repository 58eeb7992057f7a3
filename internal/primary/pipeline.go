package primary

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// The store write of one batch overlaps the ZooKeeper raises of the one
// before it. Once the store holds a batch's ceilings, its plain raises
// (validated sequences without windows, the bulk of the work at scale) go
// out to ZooKeeper in the background, a flight, while the loop goes on to
// decide and persist the next batch. At most one flight is in the air: a
// batch waits for the previous flight to land before it sends its own, so
// ZooKeeper sees the raises in the order the store accepted them.
//
// The loop's rules still hold: a flight carries only ceilings the store
// accepted (invariant 2), and a sequence in flight is not decided again
// until its flight lands (its tracked state is about to change); the
// events it had meanwhile are decided then (recheck). Everything that
// reads or rewrites many sequences at once (a sweep, a restore, an audit)
// lands the flight first. A flight touches none of the loop's state: it
// reports what it raised, and the loop merges it when it lands.

// flight is a batch of plain raises on its way to ZooKeeper.
type flight struct {
	names  map[string]struct{}
	done   chan struct{}
	raised map[string]seqzk.Raised // set before done is closed; Version -1: not known
	err    error
}

// pipelined reports whether pl can go out in a flight: a plain raise of a
// validated sequence without windows, whose result needs nothing of the
// loop's but its new state.
func (p *Primary) pipelined(pl plan) bool {
	t := p.seqs[pl.name]
	return pl.kind == planRaise && t != nil && t.corrupt == nil && t.state.Windows == 0 && t.state.Validated()
}

// flying reports whether name's raise is in the air.
func (p *Primary) flying(name string) bool {
	if p.flight == nil {
		return false
	}
	_, ok := p.flight.names[name]
	return ok
}

// inFlight reports whether name's raise is in the air; if so, the caller's
// decision about it is put off until the flight lands.
func (p *Primary) inFlight(name string) bool {
	if !p.flying(name) {
		return false
	}
	p.recheck[name] = struct{}{}
	p.count(func(s *Stats) { s.Deferred++ })
	return true
}

// launch sends plans (all pipelined, their ceilings in the store) to
// ZooKeeper in the background, after the previous flight landed.
//
// Performance: a raise of a sequence whose reserve is empty goes out from
// the state the primary last read (tracked.fresh), without reading it
// again: no take can move a state with nothing left to take, so its
// compare-and-set rarely fails, and when it does (a push, an operator) the
// raise is read and retried one by one. Under a load that empties
// reserves this is one ZooKeeper read fewer per raise (docs/performance.md,
// "Raises and the pace of ZooKeeper"); a reserve with IDs left is read
// first, as a take may move it at any moment.
func (p *Primary) launch(ctx context.Context, plans []plan) {
	if len(plans) == 0 {
		return
	}
	f := &flight{names: make(map[string]struct{}, len(plans)), done: make(chan struct{})}
	reqs := make([]seqzk.RaiseReq, len(plans))
	for i, pl := range plans {
		f.names[pl.name] = struct{}{}
		reqs[i] = seqzk.RaiseReq{Name: pl.name, Ceiling: pl.rec.Ceiling}
		if t := p.seqs[pl.name]; t != nil && t.fresh && t.state.Available() == 0 {
			base := t.state
			reqs[i].Base, reqs[i].Version = &base, t.version
		}
	}
	p.flight = f
	log := p.log // the loop may replace p.log meanwhile
	go func() {
		defer close(f.done)
		f.raised, f.err = p.raise(ctx, log, plans, reqs)
		if p.landGate != nil {
			<-p.landGate
		}
	}()
}

// raise makes the raises in ZooKeeper (reqs[i] is plans[i]'s): many per
// transaction, and one by one those a transaction could not take
// (seqzk.Keeper.RaiseAll). It returns what it raised, by name.
func (p *Primary) raise(ctx context.Context, log zerolog.Logger, plans []plan, reqs []seqzk.RaiseReq) (map[string]seqzk.Raised, error) {
	raised := make(map[string]seqzk.Raised, len(plans))
	rest := []int{0} // one raise that must be read gains nothing from a transaction
	if len(plans) > 1 || reqs[0].Base != nil {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		done, left := p.seq.Keeper().RaiseAll(octx, reqs)
		cancel()
		for i, r := range done {
			raised[reqs[i].Name] = r
			if p.watch != nil {
				// Its state is r.State, which land takes: the watch's
				// notification of it need not be read.
				p.watch.Wrote(reqs[i].Name, r.Data, r.Result)
			}
		}
		rest = left
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	parallel.Each(len(rest), p.cfg.Parallelism, func(j int) {
		i := rest[j]
		// Safe to abandon (the store holds the ceiling); retried at the
		// sequence's next event or sweep.
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		st, err := p.raiseOne(octx, log, plans[i])
		cancel()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(err, seqzk.ErrUnknownSequence), errors.Is(err, seqzk.ErrChangedMeanwhile):
			// deleted (and perhaps registered again) meanwhile; the
			// watcher reports it
		case err != nil:
			errs = append(errs, err)
		default:
			raised[plans[i].name] = seqzk.Raised{State: st, Version: -1}
		}
	})
	p.count(func(s *Stats) { s.Raises += int64(len(raised)) })
	return raised, errors.Join(errs...)
}

// raiseOne raises one sequence's ceiling in ZooKeeper, after the store
// holds it.
func (p *Primary) raiseOne(ctx context.Context, log zerolog.Logger, pl plan) (state.State, error) {
	st, err := p.seq.Keeper().Raise(ctx, pl.name, pl.rec.Ceiling)
	if errors.Is(err, seqzk.ErrMarkerGone) {
		// The znode's state names a marker it does not have: written in
		// another history, or re-created with old data. Stamp it again,
		// only up to the ceiling the store just accepted: the next raise
		// follows from the next decision.
		log.Warn().Str("sequence", pl.name).Msg("primary: sequence state names a missing marker; fast-forwarding past the stored ceiling")
		st, err = p.seq.Keeper().Restamp(ctx, pl.name, pl.rec.Czxid, pl.floor, pl.rec.Ceiling, true)
		p.count(func(s *Stats) { s.Revalidated++ })
	}
	return st, err
}

// flightDone is closed when the flight in the air lands; nil (never ready)
// when there is none.
func (p *Primary) flightDone() <-chan struct{} {
	if p.flight == nil {
		return nil
	}
	return p.flight.done
}

// land waits for the flight in the air, if any, and takes what it raised
// as the sequences' state. It returns the flight's error.
func (p *Primary) land() error {
	f := p.flight
	if f == nil {
		return nil
	}
	<-f.done
	p.flight = nil
	p.view.Lock()
	defer p.view.Unlock()
	for name, r := range f.raised {
		// An event the loop saw meanwhile may be newer than what the
		// raise wrote (a take after it): ceilings only rise, so the
		// higher one is the later state.
		if t := p.seqs[name]; t != nil && r.State.Ceiling > t.state.Ceiling {
			t.state, t.fresh = r.State, r.Version >= 0
			if t.fresh {
				t.version = r.Version
			}
		}
	}
	if f.err != nil {
		return fmt.Errorf("raise ceilings: %w", f.err)
	}
	return nil
}

// due takes the put-off decisions that can be made now: those of
// sequences no longer in the air.
func (p *Primary) due() []string {
	var names []string
	for name := range p.recheck {
		if p.flying(name) {
			continue
		}
		names = append(names, name)
		delete(p.recheck, name)
	}
	return names
}

// hasDue reports whether due would return anything.
func (p *Primary) hasDue() bool {
	for name := range p.recheck {
		if !p.flying(name) {
			return true
		}
	}
	return false
}

// ready is a channel that is always ready, for a select case that must
// fire at once.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
