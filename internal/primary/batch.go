package primary

import (
	"time"
)

// Routine raises wait to share a store write. A raise that tops up a
// reserve with at least half of it left (at the default runway, 15
// seconds or more of IDs at a steady rate) gains nothing from going out at
// once, and every store write is a billed object: the primary holds such a
// raise back for up to StoreBatchDelay and sends it with the next store
// write, whichever comes first (an urgent plan, a sweep, or the delay
// running out). Everything else goes out at once: a reserve running low,
// a ceiling the store does not cover yet, initialisations and
// revalidations.

// routine reports whether pl may wait: a top-up of a reserve that still
// holds at least half of what the primary wants it to.
func (p *Primary) routine(pl plan, t *tracked) bool {
	if p.cfg.StoreBatchDelay <= 0 || pl.kind != planRaise || pl.rec.Ceiling <= t.state.Ceiling {
		return false
	}
	left := t.state.Ceiling - t.state.Next + 1
	return left >= p.reserve(t)/2
}

// holdBack holds name's routine raise back, from now unless it already waits.
func (p *Primary) holdBack(name string) {
	if _, ok := p.held[name]; !ok {
		p.held[name] = time.Now()
	}
}

// heldDue reports whether the oldest held-back raise has waited long
// enough, and when it will have otherwise.
func (p *Primary) heldDue() (bool, time.Duration) {
	if len(p.held) == 0 {
		return false, 0
	}
	oldest := time.Now()
	for _, at := range p.held {
		if at.Before(oldest) {
			oldest = at
		}
	}
	wait := p.cfg.StoreBatchDelay - time.Since(oldest)
	return wait <= 0, wait
}

// releaseHeld decides again every held-back sequence (its state may have
// moved meanwhile) and returns the plans, emptying the set.
func (p *Primary) releaseHeld() []plan {
	var plans []plan
	for name := range p.held {
		if t := p.seqs[name]; t != nil && !p.inFlight(name) {
			if pl, ok := p.decide(name, t); ok {
				plans = append(plans, pl)
			}
		}
	}
	clear(p.held)
	return plans
}

// Store writes are paced (config.Primary.StoreWriteRate): an urgent plan
// that finds no write allowed now is held back like a routine one, until
// the pace allows the next write, and goes then with everything held
// meanwhile. Performance: under a load in which every take empties a
// reserve, unpaced writes went out as fast as the events came, about 27
// raises each; paced, a write carries what a fraction of a second brings
// (docs/performance.md, "Issue 29").

// mayWrite reports whether a store write may go now, and takes its turn
// if so; if not, paceUntil is when it may.
func (p *Primary) mayWrite() bool {
	now := time.Now()
	r := p.pace.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		p.paceUntil = now.Add(d)
		return false
	}
	p.paceUntil = time.Time{}
	return true
}

// holdUrgent holds back plans that must wait for the store's pace.
func (p *Primary) holdUrgent(plans []plan) {
	for _, pl := range plans {
		p.holdBack(pl.name)
	}
	p.urgent = true
}

// batchWait is how long the loop waits before it writes what is held
// back, and whether anything is.
func (p *Primary) batchWait() (time.Duration, bool) {
	if len(p.held) == 0 {
		return 0, false
	}
	_, wait := p.heldDue()
	if p.urgent {
		wait = 0
	}
	if !p.paceUntil.IsZero() {
		wait = max(wait, time.Until(p.paceUntil))
	}
	return max(wait, 0), true
}
