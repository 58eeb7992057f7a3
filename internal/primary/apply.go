package primary

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/persist"
)

// opTimeout bounds one planned ZooKeeper operation (a raise, a
// revalidation, windows).
const opTimeout = 30 * time.Second

// apply persists the plans' ceilings in one store write, then carries them
// out in ZooKeeper. Nothing is raised in ZooKeeper if the store write
// failed: invariant 2.
func (p *Primary) apply(ctx context.Context, plans []plan) error {
	if len(plans) == 0 {
		return nil
	}
	recs := make([]persist.Record, 0, len(plans))
	for _, pl := range plans {
		recs = append(recs, pl.rec)
	}
	putErr := p.put(ctx, recs)
	if errors.Is(putErr, persist.ErrFenced) {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return putErr
	}
	if putErr != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		p.log.Warn().Err(putErr).Int("ceilings", len(recs)).Msg("primary: store write failed; those ceilings stay where they are")
	} else {
		p.count(func(s *Stats) { s.StorePuts++ })
	}
	// Only what the store accepted may reach ZooKeeper: a store write is
	// one log segment, all or nothing.
	written := plans[:0:0]
	p.view.Lock()
	for i, pl := range plans {
		t := p.seqs[pl.name]
		if putErr != nil {
			if t != nil {
				p.storeErrs[pl.name] = putErr
			}
			continue
		}
		delete(p.storeErrs, pl.name)
		if kept, ok := p.record(pl.name); ok {
			p.setRecord(pl.name, kept.join(recs[i]))
		} else {
			p.setRecord(pl.name, storedOf(recs[i]))
		}
		written = append(written, pl)
	}
	p.view.Unlock()
	// The plain raises go out in the background, after the previous
	// batch's (pipeline.go); the rest one by one, now.
	var raises []plan
	plans = written[:0:0]
	for _, pl := range written {
		if p.pipelined(pl) {
			raises = append(raises, pl)
		} else {
			plans = append(plans, pl)
		}
	}
	landErr := p.land()
	p.launch(ctx, raises)
	errs := []error{landErr, p.carryOutAll(ctx, plans)}
	if putErr != nil {
		errs = append(errs, fmt.Errorf("persist ceilings: %w", putErr))
	}
	return errors.Join(errs...)
}
