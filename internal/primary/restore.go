package primary

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// restore re-creates every live sequence the store knows and ZooKeeper
// lacks, above its stored ceiling. Sequences are deleted only by 'seqkeeper
// delete', which writes a tombstone first; a sequence znode that disappears
// any other way comes back.
func (p *Primary) restore(ctx context.Context) error {
	candidates := 0
	for name, r := range p.records {
		if !r.deleted && p.seqs[name] == nil {
			candidates++
		}
	}
	if candidates == 0 {
		return nil
	}
	// The watcher may simply not have reported them yet: list once.
	children, _, err := p.zk.Children(ctx, p.seq.Root())
	if errors.Is(err, zkclient.ErrNoNode) {
		p.log.Warn().Str("root", p.seq.Root()).Msg("primary: the sequences root is gone: ZooKeeper lost its data; restoring")
		if err := p.zk.EnsurePath(ctx, p.seq.Root()); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if err := p.zk.EnsurePath(ctx, p.cfg.MarkerPath); err != nil {
			return fmt.Errorf("restore: cluster marker: %w", err)
		}
		children = nil
	} else if err != nil {
		return fmt.Errorf("restore: list %s: %w", p.seq.Root(), err)
	}
	present := make(map[string]bool, len(children))
	for _, c := range children {
		present[c] = true
	}
	lost := func() []string {
		var out []string
		for name, r := range p.records {
			if !r.deleted && !present[name] {
				out = append(out, name)
			}
		}
		return out
	}
	names := lost()
	if len(names) == 0 {
		return nil
	}
	// Read those records again: an operator's tombstone ('seqkeeper
	// delete' writes it, then deletes the znode) is newer than our copy,
	// and p.records does not keep the configuration a restore needs.
	fresh, err := p.refresh(ctx, names)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	var really []persist.Record
	for _, name := range lost() {
		if r, ok := fresh[name]; ok {
			really = append(really, r)
		}
	}
	if len(really) == 0 {
		return nil
	}
	sort.Slice(really, func(i, j int) bool { return really[i].Name < really[j].Name })
	states := make([]sequence.State, 0, len(really))
	recs := make([]persist.Record, 0, len(really))
	for _, r := range really {
		st, r := reconcile.Recreate(r, p.cfg.MinReserve) // no traffic seen yet
		states = append(states, st)
		recs = append(recs, r)
	}
	if err := p.put(ctx, recs); err != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return fmt.Errorf("restore: persist %d ceilings: %w", len(recs), err)
	}
	p.view.Lock()
	for _, r := range recs {
		p.records[r.Name] = storedOf(r)
	}
	p.view.Unlock()
	created, stale, err := p.seq.Restore(ctx, states, p.zkEpoch)
	p.count(func(s *Stats) { s.Restored += int64(created) })
	p.log.Warn().Int("restored", created).Int("stale_epoch", len(stale)).
		Msg("primary: restored sequences missing from ZooKeeper at their stored ceiling + 1")
	return err
}
