package transfer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/strictjson"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// What Import did with a line.
const (
	Created    = "created"    // the sequence did not exist: created above the export
	Advanced   = "advanced"   // it existed below the export: moved forward
	Tombstoned = "tombstoned" // the tombstone was recorded (ZooKeeper, then the store)
	Unchanged  = "unchanged"  // the root already covers the line (an import run again)
	Refused    = "refused"    // the line would break the root: see Reason
)

// ErrNotExport reports input that is not an export this seqkeeper reads;
// nothing was imported.
var ErrNotExport = errors.New("not a seqkeeper export")

// maxLine bounds one line of an export (a sequence with the most recycled
// ranges is about 1 MB).
const maxLine = 8 << 20

// Outcome is what Import did with one line.
type Outcome struct {
	Line   int    `json:"line"`
	Name   string `json:"name"`
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// ImportOptions configure Import.
type ImportOptions struct {
	// MinReserve sizes the headroom of a created or advanced sequence
	// (reconcile.Headroom), as the primary gives an idle one.
	MinReserve int64
	// DryRun decides every line and changes nothing.
	DryRun bool
}

// Import reads an export from r into the root seqs serves and its store,
// and returns what it did with every line. It never moves a counter
// backwards and never brings back a name deleted in the target:
//
//   - a sequence the target lacks is created at the export's ceiling + 1
//     (above every ID the source may have handed out), with headroom, its
//     ceiling written to the store before ZooKeeper, as a restore does;
//     recycled IDs are not restored (they are below that point);
//   - a sequence the target has with the same settings is advanced to that
//     point (primary.Advance) if it is below it, and left alone otherwise;
//   - a tombstone is recorded in ZooKeeper's deletion record of the name
//     and then in the store, unless the target has the name live;
//   - a line whose settings differ from the target's, that would revive a
//     deleted name or delete a live one, or that cannot be read, is
//     refused (and the other lines still imported).
//
// Running it again changes nothing: every line is then unchanged. It
// returns an error (and changes nothing) when r is not an export, and when
// the target's store cannot be read completely.
//
// Import may run beside the target's primary, busy workers and other
// operators: every change it makes follows the lifecycle protocol
// (seqzk.Keeper.Lifecycle). It reads ZooKeeper before the store; it
// writes a created sequence's ceiling to the store, creates it in a
// transaction that fails if the name was created or deleted since it was
// read (seqzk.Restoration), and only then records its birth in the store;
// it records tombstones in ZooKeeper, while the name is absent, before
// the store. A line that such a change overtook is refused, saying so,
// with nothing imported for it.
func Import(ctx context.Context, seqs *seqzk.Client, store *persist.Store, r io.Reader, opts ImportOptions) ([]Outcome, error) {
	lines, out, err := parse(r)
	if err != nil {
		return nil, err
	}
	reads, err := describe(ctx, seqs, lines)
	if err != nil {
		return out, err
	}
	deletions, err := seqs.Meta().Deletions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the target's deletion records: %w; nothing was imported", err)
	}
	_, stored, err := load(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("read the target's store: %w; nothing was imported", err)
	}
	var (
		puts    []persist.Record // ceilings, before ZooKeeper
		births  []persist.Record // incarnations, once ZooKeeper holds them
		creates []seqzk.Restoration
		tombs   []int // indexes into out
		created []int
		advance []int
	)
	for i, l := range lines {
		o := Outcome{Line: l.n, Name: l.e.Name}
		rec, hasRec := stored[l.e.Name]
		d := deletions[l.e.Name]
		if d.Exists && (!hasRec || d.Ceiling >= rec.Live) {
			// ZooKeeper's copy of a tombstone the store lacks.
			rec, hasRec = persist.Merge(rec, persist.Record{Name: l.e.Name, Ceiling: d.Ceiling, Dead: d.Ceiling}), true
		}
		st, live := reads[i].st, reads[i].live
		switch {
		case l.e.Deleted:
			o.Action, o.Reason = tombstone(l.e, live, rec, hasRec)
			if o.Action == Tombstoned {
				tombs = append(tombs, len(out))
			}
		case live:
			o.Action, o.Reason = existing(l.e, st)
			if o.Action == Advanced {
				advance = append(advance, len(out))
			}
		case hasRec && rec.Deleted():
			o.Action, o.Reason = Refused, "the name is deleted in the target (it holds a tombstone): importing it would bring it back"
		case hasRec && !sameSettings(l.e, rec):
			o.Action, o.Reason = Refused, fmt.Sprintf("the target's store holds it with other settings (IDs %d:%d, %d windows)", rec.Start, rec.End, rec.Windows)
		default:
			merged := persist.Record{Name: l.e.Name, Ceiling: max(l.e.from()-1, rec.Ceiling), Legacy: l.e.Legacy,
				Start: l.e.Start, End: l.e.End, Windows: l.e.Windows}
			st, rec := reconcile.Recreate(merged, opts.MinReserve)
			// A new incarnation in the target, born above everything the
			// export and the target's store cover: the store holds its
			// ceiling first, and learns its birth once ZooKeeper holds it.
			born := rec
			born.Live = max(state.AddSat(merged.Ceiling, 1), merged.Start, 1)
			puts, births = append(puts, rec), append(births, born)
			creates = append(creates, seqzk.Restoration{State: st, Guard: d})
			o.Action = Created
			created = append(created, len(out))
		}
		out = append(out, o)
	}
	if !opts.DryRun {
		err = apply(ctx, seqs, store, opts, out, puts, births, creates, created, advance, lines)
		if err == nil {
			err = recordTombstones(ctx, seqs, store, out, tombs, lines)
		}
	}
	slices.SortStableFunc(out, func(a, b Outcome) int { return cmp.Compare(a.Line, b.Line) })
	return out, err
}

// zkRead is what ZooKeeper held for a line's name when Import read it.
type zkRead struct {
	st   state.State
	live bool // the name is a sequence in ZooKeeper (st is its state)
}

// describe reads every line's name in ZooKeeper, one read per line, in
// order. Import reads ZooKeeper before the store: the lifecycle protocol's
// order (see Import). An unknown name is no error (not live); any other
// failure is, naming its line.
func describe(ctx context.Context, seqs *seqzk.Client, lines []line) ([]zkRead, error) {
	reads := make([]zkRead, len(lines))
	for i, l := range lines {
		st, _, err := seqs.Describe(ctx, l.e.Name)
		if err != nil && !errors.Is(err, seqzk.ErrUnknownSequence) {
			return nil, fmt.Errorf("line %d: %w", l.n, err)
		}
		reads[i] = zkRead{st: st, live: err == nil}
	}
	return reads, nil
}

// apply creates by the lifecycle protocol, in bulk (the ceilings into the
// store, the guarded creates, the births into the store), then advances.
func apply(ctx context.Context, seqs *seqzk.Client, store *persist.Store, opts ImportOptions, out []Outcome,
	puts, births []persist.Record, creates []seqzk.Restoration, created, advance []int, lines []line) error {
	byLine := make(map[int]Entry, len(lines))
	for _, l := range lines {
		byLine[l.n] = l.e
	}
	// ZooKeeper's epoch is learnt by a write to the root (created first
	// when missing, with the configured ACL layout), the first write the
	// creates need: before the store is written, so that an identity
	// ZooKeeper refuses writes nothing. (A leader election after it only
	// makes the primary stamp what was created again.)
	var epoch int64
	if len(creates) > 0 {
		var err error
		if epoch, err = seqs.Meta().CurrentEpoch(ctx); err != nil {
			return fmt.Errorf("learn ZooKeeper's epoch: %w; nothing was written", err)
		}
	}
	if err := seqzk.PutAtCurrentEpoch(ctx, store, puts...); err != nil {
		return fmt.Errorf("write %d ceilings to the store: %w; run import again", len(puts), err)
	}
	if len(creates) > 0 {
		made, _, err := seqs.Keeper().Restore(ctx, creates, epoch)
		if err != nil {
			return fmt.Errorf("create sequences in ZooKeeper (the store holds their ceilings): %w; run import again", err)
		}
		done := make(map[string]bool, len(made))
		for _, name := range made {
			done[name] = true
		}
		born := slices.DeleteFunc(births, func(r persist.Record) bool { return !done[r.Name] })
		for _, i := range created {
			if !done[out[i].Name] {
				// Created (a primary restoring it from the store, an
				// operator) or deleted meanwhile: nothing of it imported.
				out[i].Action, out[i].Reason = Refused, "it was created or deleted by someone else while the import ran; nothing was imported for it (run import again to decide it anew)"
			}
		}
		if err := seqzk.PutAtCurrentEpoch(ctx, store, born...); err != nil {
			return fmt.Errorf("record the births of %d new sequences in the store (ZooKeeper holds them, and the store their ceilings): %w", len(born), err)
		}
	}
	for _, i := range advance {
		e := byLine[out[i].Line]
		a, err := primary.Advance(ctx, seqs, store, e.Name, e.from(), opts.MinReserve)
		switch {
		case err != nil:
			out[i].Action, out[i].Reason = Refused, err.Error()
		case !a.Changed():
			out[i].Action = Unchanged
		}
	}
	return nil
}

// tombstone decides a tombstone line.
func tombstone(e Entry, live bool, rec persist.Record, hasRec bool) (action, reason string) {
	switch {
	case live:
		return Refused, "the name is live in the target: importing its tombstone would delete it ('seqkeeper delete' it there first if that is what you want)"
	case hasRec && !rec.Deleted():
		return Refused, "the target's store holds the name as a live sequence (ZooKeeper lost it; a primary restores it): importing its tombstone would delete it"
	case hasRec && rec.Ceiling >= e.Ceiling:
		return Unchanged, ""
	}
	return Tombstoned, ""
}

// recordTombstones records each tombstone line by the lifecycle protocol:
// ZooKeeper's deletion record first, guarded by the name's absence
// (seqzk.Meta.Bury), then, for those ZooKeeper holds, the store's
// tombstones, so that a name created in the target meanwhile is never
// buried, and one created later starts above it.
func recordTombstones(ctx context.Context, seqs *seqzk.Client, store *persist.Store, out []Outcome, tombs []int, lines []line) error {
	byLine := make(map[int]Entry, len(lines))
	for _, l := range lines {
		byLine[l.n] = l.e
	}
	var recs []persist.Record
	for _, i := range tombs {
		e := byLine[out[i].Line]
		err := seqs.Meta().Bury(ctx, e.Name, e.Ceiling)
		switch {
		case errors.Is(err, seqzk.ErrExists):
			out[i].Action, out[i].Reason = Refused, "the name was created in the target while the import ran (it is live there): its tombstone was not imported"
		case err != nil:
			return fmt.Errorf("line %d: record the deletion of %q in ZooKeeper: %w; run import again", out[i].Line, e.Name, err)
		default:
			dead := max(e.Ceiling, 1)
			recs = append(recs, persist.Record{Name: e.Name, Ceiling: dead, Dead: dead})
		}
	}
	if err := seqzk.PutAtCurrentEpoch(ctx, store, recs...); err != nil {
		return fmt.Errorf("write %d tombstones to the store (ZooKeeper holds them; a primary's audit copies them): %w", len(recs), err)
	}
	return nil
}

// existing decides a sequence line for a sequence the target has, in
// state st.
func existing(e Entry, st state.State) (action, reason string) {
	switch {
	case e.Legacy != st.Legacy:
		return Refused, "one side is a legacy 8-byte counter and the other is not"
	case st.Legacy:
		if st.Next >= e.Ceiling {
			return Unchanged, ""
		}
		return Refused, fmt.Sprintf("the target's legacy counter (%d) is below the export's (%d); import does not move legacy counters", st.Next, e.Ceiling)
	case st.Start != e.Start || st.End != e.End || st.Windows != e.Windows:
		return Refused, fmt.Sprintf("settings differ: the target has IDs %d:%d and %d windows, the export %d:%d and %d windows",
			st.Start, st.End, st.Windows, e.Start, e.End, e.Windows)
	case st.Registered:
		return Refused, "the target has not initialised it yet: start 'seqkeeper serve' there and import again"
	case st.Next >= e.from() || st.Next > min(st.End, state.MaxID-1):
		// At or past the export, or exhausted: it hands out nothing
		// below the export's ceiling (a stored ceiling may lie past the
		// end of the space: a tombstone of an exhausted sequence).
		return Unchanged, ""
	}
	if err := seqzk.CheckAdvance(st, e.from()); err != nil {
		return Refused, err.Error()
	}
	return Advanced, ""
}

// sameSettings reports whether a store record of a sequence agrees with
// e (a zero field of the record is unknown and agrees).
func sameSettings(e Entry, r persist.Record) bool {
	return r.Legacy == e.Legacy && (r.Start == 0 || r.Start == e.Start) && (r.End == 0 || r.End == e.End) && r.Windows == e.Windows
}

// line is one parsed entry and its line number.
type line struct {
	n int
	e Entry
}

// parse reads the header and every entry; lines that cannot be read are
// returned as refused outcomes.
func parse(r io.Reader) ([]line, []Outcome, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var (
		lines  []line
		out    []Outcome
		header bool
		seen   = map[string]int{}
	)
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if !header {
			var h Header
			if err := json.Unmarshal(b, &h); err != nil || h.SeqkeeperExport == 0 {
				return nil, nil, fmt.Errorf("line %d: %w (its first line must be the header {\"seqkeeper_export\":%d,...})", n, ErrNotExport, Version)
			}
			if h.SeqkeeperExport != Version {
				return nil, nil, fmt.Errorf("line %d: %w: format %d; this seqkeeper reads format %d", n, ErrNotExport, h.SeqkeeperExport, Version)
			}
			header = true
			continue
		}
		// Strictly: encoding/json alone reads a line with more after the
		// object, a key given twice or in another case, or a range of
		// three numbers, as an entry the line does not spell
		// (FuzzParseExport holds it).
		var e Entry
		err := strictjson.Decode(b, &e)
		if err == nil {
			err = e.check()
		}
		if err == nil && seen[e.Name] != 0 {
			err = fmt.Errorf("the name is already on line %d", seen[e.Name])
		}
		if err != nil {
			out = append(out, Outcome{Line: n, Name: e.Name, Action: Refused, Reason: err.Error()})
			continue
		}
		seen[e.Name] = n
		lines = append(lines, line{n: n, e: e})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: read it: %w", ErrNotExport, err)
	}
	if !header {
		return nil, nil, fmt.Errorf("%w: it is empty (not even its header line)", ErrNotExport)
	}
	return lines, out, nil
}
