package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Exported counts what Export wrote.
type Exported struct {
	// Sequences are the live sequences, StoreOnly those of them that only
	// the store knows (ZooKeeper lost them; a primary would restore them),
	// Tombstones the deleted names.
	Sequences, StoreOnly, Tombstones int
}

// Export writes every sequence of the root that seqs serves, and every
// tombstone of store, to w as JSON lines: a Header, then one Entry per
// name, sorted by name. Each sequence's ceiling is the higher of
// ZooKeeper's and the store's; a sequence only the store knows is exported
// at its stored ceiling. An export is a snapshot of a live system: to move
// a root, stop its primary and its takers first, or they hand out IDs the
// export does not cover (docs/cli.md).
//
// A name is exported deleted when the store holds its tombstone or
// ZooKeeper's deletion record covers the incarnation the store knows (the
// store lost the tombstone).
//
// Export fails, rather than write an incomplete export, when the store
// cannot be read completely or a sequence cannot be parsed.
func Export(ctx context.Context, seqs *seqzk.Client, store *persist.Store, w io.Writer) (Exported, error) {
	var n Exported
	deletions, err := seqs.Meta().Deletions(ctx)
	if err != nil {
		return n, err
	}
	recs, stored, err := load(ctx, store)
	if err != nil {
		return n, fmt.Errorf("read the store: %w; an export without it could miss tombstones and ceilings", err)
	}
	names, err := seqs.Names(ctx)
	if errors.Is(err, seqzk.ErrUnknownSequence) {
		names = nil // no root: only the store's records
	} else if err != nil {
		return n, err
	}
	var entries []Entry
	live := make(map[string]bool, len(names))
	for _, name := range names {
		if seqzk.ValidateName(name) != nil {
			continue // not a sequence znode
		}
		st, _, err := seqs.Describe(ctx, name)
		if errors.Is(err, seqzk.ErrUnknownSequence) {
			continue // deleted meanwhile: its tombstone is in recs
		}
		if err != nil {
			return n, fmt.Errorf("%w; repair it (or delete it) and export again", err)
		}
		live[name] = true
		entries = append(entries, entryOf(st, stored[name].Ceiling))
		n.Sequences++
	}
	for name, d := range deletions {
		if _, ok := stored[name]; !ok && !live[name] && seqzk.ValidateName(name) == nil {
			recs = append(recs, persist.Record{Name: name, Ceiling: d.Ceiling, Dead: d.Ceiling})
		}
	}
	for _, r := range recs {
		if live[r.Name] || seqzk.ValidateName(r.Name) != nil {
			continue
		}
		if d := deletions[r.Name]; r.Deleted() || d.Exists && d.Ceiling >= r.Live {
			entries = append(entries, Entry{Name: r.Name, Deleted: true, Ceiling: max(r.Ceiling, d.Ceiling), Recycled: [][2]int64{}})
			n.Tombstones++
			continue
		}
		entries = append(entries, storeOnly(r))
		n.Sequences++
		n.StoreOnly++
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })

	bw := bufio.NewWriter(w)
	line, _ := marshalLine(Header{SeqkeeperExport: Version, Root: seqs.Root(), ExportedAt: time.Now().UTC().Format(time.RFC3339)})
	if _, err := bw.Write(line); err != nil {
		return n, err
	}
	for _, e := range entries {
		line, err := marshalLine(e)
		if err != nil {
			return n, err
		}
		if _, err := bw.Write(line); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

// load reads every record of store, as a list sorted by name and by name.
// An incomplete read is an error: a missing record could be a tombstone.
func load(ctx context.Context, store *persist.Store) ([]persist.Record, map[string]persist.Record, error) {
	recs, err := store.Load(ctx)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		byName[r.Name] = r
	}
	return recs, byName, nil
}

// storeOnly is the entry of a sequence that only the store knows: the
// state a restore would give it, above its stored ceiling.
func storeOnly(r persist.Record) Entry {
	if r.Legacy {
		return Entry{Name: r.Name, Legacy: true, Next: r.Ceiling, Ceiling: r.Ceiling, Recycled: [][2]int64{}}
	}
	e := Entry{Name: r.Name, Ceiling: r.Ceiling, Start: max(r.Start, state.DefaultStart), End: r.End, Windows: r.Windows, Recycled: [][2]int64{}}
	if e.End == 0 {
		e.End = state.MaxID
	}
	e.Next = min(max(state.AddSat(r.Ceiling, 1), e.Start), min(e.End, state.MaxID-1)+1)
	e.Ceiling = max(e.Ceiling, e.Next-1)
	return e
}
