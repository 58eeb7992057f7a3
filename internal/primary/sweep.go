package primary

import (
	"context"
	"errors"
	"time"
)

// newEpoch probes ZooKeeper's epoch and reports whether it changed; the
// caller then revalidates every sequence (decide sees the stale stamps).
func (p *Primary) newEpoch(ctx context.Context) (bool, error) {
	e, err := p.seq.Meta().CurrentEpoch(ctx)
	if err != nil {
		return false, err
	}
	if e == p.zkEpoch {
		return false, nil
	}
	p.log.Warn().Int64("zk_epoch", e).Int64("previous_zk_epoch", p.zkEpoch).
		Msg("primary: ZooKeeper elected a new leader; revalidating every sequence (each skips at most its reserve)")
	// A new era first: what is missing from now on may have been lost.
	era, err := p.seq.Meta().CurrentEra(ctx, e)
	if err != nil {
		return false, err
	}
	p.view.Lock()
	p.zkEpoch = e
	p.view.Unlock()
	p.era = era
	clear(p.handGone)
	p.log = p.term.With().Int64("zk_epoch", e).Logger() // once: it replaces the last
	// Decide from the store as it is now: an operator may have written it
	// (an advance, an import) since this primary last read it whole, in
	// ZooKeeper's history that the election may have thrown away.
	p.audited = time.Time{}
	return true, nil
}

// sweep re-checks every sequence: the epoch, the reserves (rates change
// with time even without events), windows, and anything missing.
func (p *Primary) sweep(ctx context.Context) error {
	// Every sequence is decided below: nothing may be in the air, and
	// nothing waits for a flight.
	landErr := p.land()
	clear(p.recheck)
	if _, err := p.newEpoch(ctx); err != nil {
		return err
	}
	if p.broken != nil || time.Since(p.audited) >= p.cfg.AuditInterval {
		if err := p.audit(ctx); err != nil {
			return err
		}
	}
	var registered []string
	for name, t := range p.seqs {
		if t.state.Registered {
			registered = append(registered, name)
		}
	}
	p.prepareBirths(ctx, registered)
	var plans []plan
	for name, t := range p.seqs {
		if pl, ok := p.decide(name, t); ok {
			plans = append(plans, pl)
		}
	}
	clear(p.births)
	clear(p.held) // decided above
	p.urgent = false
	if err := p.apply(ctx, plans); err != nil {
		return errors.Join(landErr, err)
	}
	p.mu.Lock()
	p.status.LastSweep = time.Now()
	p.mu.Unlock()
	return errors.Join(landErr, p.restore(ctx))
}
