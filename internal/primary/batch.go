package primary

import (
	"math"
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
// holds at least half of what the primary wants it to, and that lasts at
// the sequence's demand at least twice StoreBatchDelay (a capped reserve
// can hold half of its cap and last milliseconds).
func (p *Primary) routine(pl plan, t *tracked) bool {
	if p.cfg.StoreBatchDelay <= 0 || pl.kind != planRaise || pl.rec.Ceiling <= t.state.Ceiling {
		return false
	}
	left := t.state.Ceiling - t.state.Next + 1
	return left >= p.reserve(t)/2 && p.lasts(t) >= 2*p.cfg.StoreBatchDelay
}

// lasts is how long what is left of t's reserve lasts at its smoothed
// demand (a lone burst is not demand: the headroom covers it). Nothing
// left: 0, whatever the demand.
//
// A legacy counter has no ceiling for takers to wait at: it lasts for
// ever.
func (p *Primary) lasts(t *tracked) time.Duration {
	st := t.state
	left := st.Available()
	switch {
	case st.Legacy:
		return math.MaxInt64
	case left == 0:
		return 0
	}
	secs := float64(left) / p.rateOf(t) // +Inf with no demand yet
	if secs >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(secs * float64(time.Second))
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
// meanwhile. Performance: a paced write carries the raises of a fraction
// of a second, not of the few events since the last write, so a store
// write's cost is shared by many raises (docs/performance.md, "Raises and
// the pace of ZooKeeper").

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

// pressing reports whether any of plans is for a sequence whose takers
// would wait for the pace, so the write goes at once: its IDs left do not
// last until the pace allows the next store write at its demand, or (a
// raise) it has none left and its demand takes a reserve's worth before
// then, or is not known yet. The pace is for raises that can wait a
// moment; a reserve that demand empties between two paced writes (a capped
// max_reserve, a small bounded space) would otherwise get at most one
// raise per 1/StoreWriteRate.
//
// Performance: a reserve with nothing left is most often one a single
// take emptied whole (the raise at the low-water mark comes first
// otherwise), and a taker that takes a reserve's worth at once comes back,
// at the sequence's demand, no sooner than a reserve lasts. So an emptied
// reserve alone does not press: a store write for each loop's emptied
// reserves would carry a fraction of a paced write's raises, and the
// store's work would then cost raises a second (docs/performance.md,
// "Raises and the pace of ZooKeeper").
func (p *Primary) pressing(plans []plan) bool {
	every := time.Duration(float64(time.Second) / p.cfg.StoreWriteRate)
	for _, pl := range plans {
		t := p.seqs[pl.name]
		if t == nil {
			continue
		}
		if pl.kind != planRaise || t.state.Available() > 0 || t.state.Legacy {
			if p.lasts(t) < every {
				return true
			}
			continue
		}
		if d := p.demand(t); d <= 0 || float64(p.reserve(t)) < d*every.Seconds() {
			return true
		}
	}
	return false
}

// demand is t's demand in IDs a second as far as it is known, erring
// high: the most of its smoothed rate, of its recent burst and of what the
// sample in progress took, each over at least rateWindow (a burst shows
// before its sample closes, and the smoothed rate of a sequence that
// became busy lags its demand by up to a runway); 0 before a first sample
// closed.
func (p *Primary) demand(t *tracked) float64 {
	d := max(p.rateOf(t), float64(t.burst)/rateWindow.Seconds())
	if d <= 0 || t.lastAt == 0 || t.state.Next <= t.lastNext {
		return d
	}
	dt := max(time.Since(clockBase)-t.lastAt, rateWindow)
	return max(d, float64(t.state.Next-t.lastNext)/dt.Seconds())
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
