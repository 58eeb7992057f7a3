package primary

import (
	"context"
	"errors"
	"time"

	"github.com/seqkeeper/seqkeeper/persist"
)

// compactor folds the store's log into its bucket objects in the
// background (persist.Store.Compact) at the start of a term when the log
// holds segments, then every CompactInterval, or sooner once
// CompactSegments segments wait, so that store writes stay one object each
// and a successor reads a short log. The compaction at the start matters
// when terms are shorter than CompactInterval (frequent handovers): without
// it the log grows by every term's segments until CompactSegments wait. It
// stops with ctx; fenced receives the error when a newer primary holds the
// store.
type compactor struct {
	kick   chan struct{}
	fenced chan error
	done   chan struct{}
}

func (p *Primary) startCompactor(ctx context.Context) *compactor {
	c := &compactor{kick: make(chan struct{}, 1), fenced: make(chan error, 1), done: make(chan struct{})}
	if p.deps.Store.Pending() > 0 {
		c.kick <- struct{}{}
	}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(p.cfg.CompactInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-c.kick:
			}
			if err := p.compact(ctx); errors.Is(err, persist.ErrFenced) {
				c.fenced <- err
				return
			}
		}
	}()
	return c
}

// nudge starts a compaction soon if enough segments wait.
func (p *Primary) nudge(c *compactor) {
	if p.deps.Store.Pending() < p.cfg.CompactSegments {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (p *Primary) compact(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*p.cfg.StoreTimeout)
	defer cancel()
	res, err := p.deps.Store.Compact(cctx, p.epoch)
	switch {
	case errors.Is(err, persist.ErrFenced):
		return err
	case err != nil && ctx.Err() == nil:
		p.count(func(s *Stats) { s.CompactErrors++ })
		p.log.Warn().Err(err).Msg("primary: compacting the store's log failed; it is tried again (the log keeps every record meanwhile)")
	case err == nil && res.Segments > 0:
		p.count(func(s *Stats) {
			s.Compactions++
			s.Compacted += int64(res.Segments)
		})
	}
	return err
}
