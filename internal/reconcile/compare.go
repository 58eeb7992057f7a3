package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/persist"
)

// Level says how serious a Finding is.
type Level string

const (
	// OK: ZooKeeper and the store agree.
	OK Level = "ok"
	// Pending: a running primary fixes it by itself (a sequence missing
	// from ZooKeeper, not validated in the current ZooKeeper epoch, or
	// registered and not initialised yet).
	Pending Level = "pending"
	// Unsafe: an ID may be, or may have been, handed out twice or above
	// the durable ceiling.
	Unsafe Level = "unsafe"
)

// Action is what Apply does about a Finding.
type Action int

const (
	// Nothing is done.
	Nothing Action = iota
	// RecreateZnode re-creates a sequence the store knows and ZooKeeper
	// lost, at its stored ceiling + 1 (Recreate).
	RecreateZnode
	// RecordTombstone writes into the store the tombstone that ZooKeeper's
	// deletion record holds and the store lost.
	RecordTombstone
	// MirrorTombstone writes ZooKeeper's copy of a tombstone only the
	// store holds (seqzk.Deletion).
	MirrorTombstone
	// CoverInStore raises the stored ceiling to what ZooKeeper shows: the
	// store lost the record, or never saw the ceiling.
	CoverInStore
	// Revalidate fast-forwards a sequence not validated in the current
	// ZooKeeper epoch to its Floor and stamps the epoch.
	Revalidate
)

// Finding is what Compare found for one sequence name.
type Finding struct {
	Sequence string `json:"sequence"`
	Level    Level  `json:"level"`
	Problem  string `json:"problem,omitempty"`
	Next     int64  `json:"next,omitempty"`
	Ceiling  int64  `json:"ceiling,omitempty"`
	Stored   int64  `json:"stored_ceiling,omitempty"`
	// Description says what Apply does (set by Plan).
	Description string `json:"action,omitempty"`
	// Outcome says what Apply did about it: "done", or why not (set by
	// Apply for the findings with an action).
	Outcome string `json:"outcome,omitempty"`

	// Action is what Apply does about it.
	Action Action `json:"-"`
	// State is what ZooKeeper holds (zero when the znode is missing).
	State state.State `json:"-"`
	// Record is what the store holds (zero when it holds nothing).
	Record persist.Record `json:"-"`
	// Deletion is ZooKeeper's copy of the name's tombstone, as read.
	Deletion seqzk.Deletion `json:"-"`
	// Unexplained is set for a sequence the store holds live and
	// ZooKeeper lacks although ZooKeeper lost no data since it last held
	// it: deleted by hand, or lost in a way the era cannot see. Only an
	// operator can say which (MarkLost).
	Unexplained bool `json:"-"`
}

// Report is the result of Compare.
type Report struct {
	// ZKEpoch is the ZooKeeper epoch the comparison was made in, and Era
	// the root's era as read then.
	ZKEpoch int64
	Era     seqzk.Era
	// Findings has one entry per name, sorted by name.
	Findings []Finding
}

// Unsafe returns how many findings are Unsafe.
func (r *Report) Unsafe() int {
	n := 0
	for _, f := range r.Findings {
		if f.Level == Unsafe {
			n++
		}
	}
	return n
}

// Lost is the number of sequences ZooKeeper lost with its data that no
// one has re-created yet: a primary does within seconds of taking office,
// so a count that stays above 0 means none is running.
func (r *Report) Lost() int {
	n := 0
	for _, f := range r.Findings {
		if f.Action == RecreateZnode {
			n++
		}
	}
	return n
}

// Compare reads every sequence in ZooKeeper and every record in the store
// and classifies each name. It changes nothing.
//
// It reads ZooKeeper first and the store after, so that it can run beside
// a primary: a ceiling reaches the store before ZooKeeper and the store's
// ceilings never fall, so a store read after ZooKeeper covers every
// ceiling ZooKeeper showed. (Read the other way round, a raise landing
// between the two reads looked like a ZooKeeper ceiling above the stored
// one: unsafe, exit 1 from verify, on a healthy system.) For the same
// reason a sequence deleted after ZooKeeper was read shows as deleted in
// the store, never as lost.
//
// A name the store holds live and ZooKeeper lacks is lost (RecreateZnode)
// only when ZooKeeper is known to have lost data since it last held it
// (seqzk.Era.Lost); otherwise it was deleted by hand, and nothing brings
// it back on its own.
func Compare(ctx context.Context, seqs *seqzk.Client, store *persist.Store) (*Report, error) {
	era, err := seqs.Meta().ReadEra(ctx)
	if err != nil {
		return nil, err
	}
	epoch, err := seqs.Meta().CurrentEpoch(ctx)
	if err != nil {
		return nil, err
	}
	names, err := seqs.Names(ctx)
	if err != nil && !errors.Is(err, seqzk.ErrUnknownSequence) {
		return nil, err
	}
	type read struct {
		name string
		st   state.State
		err  error
	}
	reads := make([]read, 0, len(names))
	for _, name := range names {
		st, _, err := seqs.Describe(ctx, name)
		if errors.Is(err, seqzk.ErrUnknownSequence) {
			continue // deleted meanwhile
		}
		reads = append(reads, read{name, st, err})
	}
	deletions, err := seqs.Meta().Deletions(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the store: %w", err)
	}
	byName := make(map[string]persist.Record, len(recs))
	for _, r := range recs {
		byName[r.Name] = r
	}
	inZK := make(map[string]bool, len(names))
	for _, name := range names {
		inZK[name] = true
	}
	var out []Finding
	for _, rd := range reads {
		rec, stored := byName[rd.name]
		f, err := check(rd.name, rd.st, rd.err, rec, stored, epoch)
		if err != nil {
			return nil, err
		}
		f.Deletion = deletions[rd.name]
		out = append(out, f)
	}
	for _, r := range recs {
		if !inZK[r.Name] {
			if f, ok := missing(r, deletions[r.Name], era, epoch); ok {
				out = append(out, f)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return &Report{ZKEpoch: epoch, Era: era, Findings: out}, nil
}

// missing classifies a name the store holds and ZooKeeper lacks, whose
// deletion record in ZooKeeper is d, in era and ZooKeeper epoch epoch.
func missing(r persist.Record, d seqzk.Deletion, era seqzk.Era, epoch int64) (Finding, bool) {
	f := Finding{Sequence: r.Name, Level: Pending, Stored: r.Ceiling, Record: r, Deletion: d}
	switch {
	case r.Deleted() && d.Exists:
		return f, false // deleted, and both sides know it
	case r.Deleted():
		f.Problem, f.Action = "deleted; ZooKeeper has no copy of the tombstone (the primary's audit writes it)", MirrorTombstone
	case d.Exists && d.Ceiling >= r.Live:
		f.Problem, f.Action = fmt.Sprintf("deleted (ZooKeeper's deletion record, up to %d), but the store lost its tombstone", d.Ceiling), RecordTombstone
	case era.Lost(r.Seen, epoch):
		f.Problem, f.Action = "in the store but not in ZooKeeper: lost with ZooKeeper's data", RecreateZnode
	default:
		f.Problem, f.Unexplained = "in the store but not in ZooKeeper, which lost no data since it last held it: deleted by hand? not restored unless you say it was lost (restore --lost NAME)", true
	}
	return f, true
}

// MarkLost records an operator's word that the named sequences, which the
// store holds live and ZooKeeper lacks with no loss ZooKeeper shows
// (Finding.Unexplained), were lost: Apply re-creates them. A name that is
// not such a finding is an error, and nothing is marked.
func (r *Report) MarkLost(names []string) error {
	idx := make(map[string]int, len(r.Findings))
	for i, f := range r.Findings {
		idx[f.Sequence] = i
	}
	for _, name := range names {
		i, ok := idx[name]
		if !ok || !r.Findings[i].Unexplained && r.Findings[i].Action != RecreateZnode {
			return fmt.Errorf("--lost %s: not a sequence that the store holds live and ZooKeeper lacks (see 'seqkeeper verify')", name)
		}
	}
	for _, name := range names {
		f := &r.Findings[idx[name]]
		if f.Unexplained {
			f.Action, f.Unexplained = RecreateZnode, false
			f.Problem += "; lost, says the operator"
		}
	}
	return nil
}

// check classifies one sequence ZooKeeper holds: st as read (readErr the
// error of the read), rec as stored (if stored), in ZooKeeper epoch epoch.
// It returns readErr when it is not about the sequence itself (a
// connection problem).
func check(name string, st state.State, readErr error, rec persist.Record, stored bool, epoch int64) (Finding, error) {
	f := Finding{Sequence: name, Level: OK, State: st, Record: rec, Stored: rec.Ceiling}
	switch {
	case errors.Is(readErr, state.ErrCorrupt):
		f.Level, f.Problem = Unsafe, readErr.Error()
	case errors.Is(readErr, seqzk.ErrInvalidName):
		f.Level, f.Problem = Pending, "not a sequence name; seqkeeper ignores this znode"
	case readErr != nil:
		return Finding{}, readErr
	case st.Registered:
		f.Level, f.Problem = Pending, "registered; the primary has not initialised it yet"
	case st.Legacy:
		f.Next = st.Next
		switch {
		case !stored:
			f.Level, f.Problem, f.Action = Unsafe, "legacy counter with no mark in the store", CoverInStore
		case st.Next > rec.Ceiling:
			f.Level, f.Problem, f.Action = Unsafe, fmt.Sprintf("legacy counter %d is past its stored mark %d", st.Next, rec.Ceiling), CoverInStore
		}
	default:
		f.Next, f.Ceiling = st.Next, st.Ceiling
		switch {
		case !stored:
			f.Level, f.Problem, f.Action = Unsafe, "no record in the store: a ZooKeeper data loss would reissue its IDs", CoverInStore
		case st.Ceiling > rec.Ceiling:
			f.Level, f.Problem, f.Action = Unsafe, fmt.Sprintf("ZooKeeper ceiling %d is above the stored ceiling %d", st.Ceiling, rec.Ceiling), CoverInStore
		case seqzk.Unconfirmed(st):
			f.Level, f.Problem = Pending, "initialised; the primary stamps it once the store has recorded its birth, and clients wait until then (is 'seqkeeper serve' running and can it reach its store?)"
		case rec.Deleted():
			f.Level, f.Problem = Pending, "the store holds a tombstone for this name: the store has not learnt of this incarnation's birth yet (the primary's audit records it), or ZooKeeper was restored from a copy taken before a delete (delete it again)"
		case st.ZKEpoch != epoch:
			f.Level, f.Problem, f.Action = Pending, fmt.Sprintf("validated in ZooKeeper epoch %d, now %d: clients wait until it is revalidated", st.ZKEpoch, epoch), Revalidate
		}
	}
	return f, nil
}

// Plan fills in every finding's Description: what Apply does about it.
func (r *Report) Plan() {
	for i := range r.Findings {
		f := &r.Findings[i]
		switch f.Action {
		case RecreateZnode:
			f.Description = fmt.Sprintf("re-create at %d", state.AddSat(f.Record.Ceiling, 1))
		case RecordTombstone:
			f.Description = fmt.Sprintf("record the tombstone up to %d in the store", f.Deletion.Ceiling)
		case MirrorTombstone:
			f.Description = fmt.Sprintf("record the deletion up to %d in ZooKeeper", f.Record.Ceiling)
		case CoverInStore:
			f.Description = fmt.Sprintf("raise the stored ceiling to %d", cover(f.State, f.Record))
		case Revalidate:
			f.Description = fmt.Sprintf("fast-forward to %d and stamp the current epoch", Floor(f.State, f.Record, true))
		}
	}
}

// cover is the stored ceiling that covers what ZooKeeper shows of st:
// its ceiling, or for a legacy counter the counter (the highest ID it may
// have issued; its State.Ceiling is for display only).
func cover(st state.State, rec persist.Record) int64 {
	if st.Legacy {
		return max(rec.Ceiling, st.Next)
	}
	return max(rec.Ceiling, st.Ceiling, st.Next)
}

// storeRecords returns what Apply writes to the store for r's findings,
// one record each: the re-created sequences' records with their new
// ceilings (and, in recreate, the states to re-create them with, see
// Recreate), the tombstones to record, the ceilings that cover what
// ZooKeeper holds, and the stale sequences' raised ceilings. Tombstones to
// mirror into ZooKeeper and findings without an action write nothing.
func storeRecords(r *Report, minReserve int64) (recs []persist.Record, recreate []seqzk.Restoration) {
	n := Headroom(minReserve)
	for _, f := range r.Findings {
		rec := f.Record
		rec.Name = f.Sequence
		switch f.Action {
		case RecreateZnode:
			var st state.State
			st, rec = Recreate(rec, minReserve)
			recreate = append(recreate, seqzk.Restoration{State: st, Guard: f.Deletion})
		case RecordTombstone:
			rec = persist.Record{Name: f.Sequence, Ceiling: f.Deletion.Ceiling, Dead: f.Deletion.Ceiling}
		case CoverInStore:
			rec.Ceiling = cover(f.State, rec)
			rec.Legacy = f.State.Legacy
			if !rec.Legacy {
				// What the primary records too: a restore after a
				// ZooKeeper data loss brings the sequence back with them.
				rec.Start, rec.End, rec.Windows = f.State.Start, f.State.End, f.State.Windows
			}
		case Revalidate:
			rec.Ceiling = max(rec.Ceiling, Ceiling(Floor(f.State, f.Record, true), n, f.State.End))
		default: // MirrorTombstone: after the store write (see Apply)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, recreate
}

// Apply carries out the report's actions, the store always first: it
// writes every new ceiling to the store (seqzk.PutAtCurrentEpoch), then
// re-creates the missing sequences in ZooKeeper and revalidates the stale
// ones, each with Headroom(minReserve) IDs (see Recreate). Nothing reaches
// ZooKeeper if the store write fails.
func Apply(ctx context.Context, seqs *seqzk.Client, store *persist.Store, r *Report, minReserve int64) error {
	n := Headroom(minReserve)
	recs, recreate := storeRecords(r, minReserve)
	if len(recs) > 0 {
		if err := seqzk.PutAtCurrentEpoch(ctx, store, recs...); err != nil {
			return fmt.Errorf("write %d ceilings to the store (nothing changed in ZooKeeper): %w", len(recs), err)
		}
	}
	for i := range r.Findings {
		if f := &r.Findings[i]; f.Action == RecordTombstone || f.Action == CoverInStore {
			f.Outcome = "done"
		}
	}
	made, _, err := seqs.Keeper().Restore(ctx, recreate, r.ZKEpoch)
	created := make(map[string]bool, len(made))
	for _, name := range made {
		created[name] = true
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		switch {
		case f.Action != RecreateZnode:
		case created[f.Sequence]:
			f.Outcome = "done"
		case err == nil:
			f.Outcome = "not done: it was created or deleted by someone else meanwhile (a running primary restores by itself); run 'seqkeeper verify' to see it now"
		}
	}
	if err != nil {
		return err
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Action != MirrorTombstone {
			continue
		}
		err := seqs.Meta().Bury(ctx, f.Sequence, f.Record.Ceiling)
		if err != nil && !errors.Is(err, seqzk.ErrExists) {
			return err
		}
		f.Outcome = "done"
		if err != nil {
			f.Outcome = "not done: a sequence of the name exists in ZooKeeper (created meanwhile)"
		}
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Action != Revalidate {
			continue
		}
		floor := Floor(f.State, f.Record, true)
		_, err := seqs.Keeper().Revalidate(ctx, f.Sequence, floor, Ceiling(floor, n, f.State.End))
		switch {
		case errors.Is(err, seqzk.ErrChangedMeanwhile):
			f.Outcome = "not done: " + err.Error()
			continue
		case err != nil:
			return err
		}
		f.Outcome = "done"
	}
	return nil
}
