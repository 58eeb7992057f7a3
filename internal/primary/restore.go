package primary

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/go-zookeeper/zk"

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
		if !r.Deleted && p.seqs[name] == nil {
			candidates++
		}
	}
	if candidates == 0 {
		return nil
	}
	// The watcher may simply not have reported them yet: list once.
	conn := p.zk.Conn()
	children, _, err := conn.Children(p.seq.Root())
	if errors.Is(err, zk.ErrNoNode) {
		p.log.Warn().Str("root", p.seq.Root()).Msg("primary: the sequences root is gone: ZooKeeper lost its data; restoring")
		acl := p.acl()
		if err := zkclient.EnsurePath(conn, p.seq.Root(), acl); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if err := zkclient.EnsurePath(conn, p.cfg.MarkerPath, acl); err != nil {
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
	lost := func() []persist.Record {
		var out []persist.Record
		for name, r := range p.records {
			if !r.Deleted && !present[name] {
				out = append(out, r)
			}
		}
		return out
	}
	really := lost()
	if len(really) == 0 {
		return nil
	}
	// Read those records again: an operator's tombstone ('seqkeeper
	// delete' writes it, then deletes the znode) is newer than our copy.
	if err := p.refresh(ctx, really); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if really = lost(); len(really) == 0 {
		return nil
	}
	sort.Slice(really, func(i, j int) bool { return really[i].Name < really[j].Name })
	states := make([]sequence.State, 0, len(really))
	recs := make([]persist.Record, 0, len(really))
	reserve := 2 * p.cfg.MinReserve // no traffic seen yet
	for _, r := range really {
		st, r := Recreate(r, reserve)
		states = append(states, st)
		recs = append(recs, r)
	}
	if err := p.put(ctx, recs); err != nil {
		p.count(func(s *Stats) { s.StoreErrors++ })
		return fmt.Errorf("restore: persist %d ceilings: %w", len(recs), err)
	}
	for _, r := range recs {
		p.records[r.Name] = r
	}
	created, stale, err := p.seq.Restore(ctx, states, p.zkEpoch)
	p.count(func(s *Stats) { s.Restored += int64(created) })
	p.log.Warn().Int("restored", created).Int("stale_epoch", len(stale)).
		Msg("primary: restored sequences missing from ZooKeeper at their stored ceiling + 1")
	return err
}

// Recreate returns the state that re-creates in ZooKeeper the sequence of
// record r, lost there, above everything r covers and with reserve IDs
// usable at once, and r with its ceiling moved to cover them. The record
// must reach the store before the state reaches ZooKeeper. A legacy
// counter comes back at its mark, and the mark moves up by reserve.
func Recreate(r persist.Record, reserve int64) (sequence.State, persist.Record) {
	st := sequence.State{Name: r.Name, Start: max(1, r.Start), End: r.End, Windows: r.Windows}
	if st.End == 0 {
		st.End = sequence.MaxID
	}
	if r.Legacy {
		st = sequence.State{Name: r.Name, Legacy: true, Next: r.Ceiling}
		r.Ceiling = min(r.Ceiling, sequence.MaxLegacyCounter-reserve) + reserve
	} else {
		// Above everything r covers. With every ID of the space covered,
		// the sequence comes back exhausted (next one past the last ID
		// it may issue), never at its last ID again.
		last := min(st.End, math.MaxInt64-1) // see sequence.MaxID
		st.Next = max(sequence.AddSat(r.Ceiling, 1), st.Start)
		if st.Next > last {
			st.Next, st.Ceiling = last+1, last
		} else {
			st.Ceiling = ceil(st.Next, reserve, st.End)
		}
		r.Ceiling = max(r.Ceiling, st.Ceiling)
	}
	r.Czxid, r.Mzxid, r.Version = 0, 0, 0 // new znodes: recorded when seen
	return st, r
}
