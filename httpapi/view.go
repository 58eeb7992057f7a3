package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// IDRanges is a list of inclusive ID ranges in the JSON form of the API and
// the CLI: [[start,end],...], a single ID as [id,id]. Unmarshalling also
// accepts [id] for a single ID.
type IDRanges sequence.Ranges

// MarshalJSON writes [[start,end],...]; an empty list is [].
func (rs IDRanges) MarshalJSON() ([]byte, error) {
	out := make([][2]int64, len(rs))
	for i, r := range rs {
		out[i] = [2]int64{r.Start, r.End}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads [[start,end] or [id], ...]. It checks the shape
// only; sequence.Client.Push checks the ranges themselves.
func (rs *IDRanges) UnmarshalJSON(data []byte) error {
	var raw [][]int64
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("ranges: want [[start,end],...] of whole numbers: %v", err)
	}
	out := make(IDRanges, 0, len(raw))
	for i, r := range raw {
		switch len(r) {
		case 1:
			out = append(out, sequence.Range{Start: r[0], End: r[0]})
		case 2:
			out = append(out, sequence.Range{Start: r[0], End: r[1]})
		default:
			return fmt.Errorf("ranges[%d]: want [start,end] or [id], found %d numbers", i, len(r))
		}
	}
	*rs = out
	return nil
}

// IDsResponse is the answer of POST /v1/sequences/{name}/ids and the JSON
// output of "seqkeeper take"; it is also the body of POST
// /v1/sequences/{name}/recycle (where sequence may be omitted).
type IDsResponse struct {
	Sequence string   `json:"sequence"`
	Ranges   IDRanges `json:"ranges"`
}

// RecycleResponse is the answer of POST /v1/sequences/{name}/recycle.
type RecycleResponse struct {
	Sequence string `json:"sequence"`
	// Recycled is the number of IDs returned to the sequence, by this
	// request or, when AlreadyApplied, by an earlier one with the same
	// Idempotency-Key.
	Recycled int64 `json:"recycled"`
	// AlreadyApplied is set when the request's Idempotency-Key names a push
	// applied before (a retry whose first attempt landed): nothing was
	// changed now. Always false without a key.
	AlreadyApplied bool `json:"already_applied"`
}

// Kinds of sequence znode, as SequenceSummary.Kind reports them.
const (
	KindSequence      = "sequence"      // initialised, with a ceiling
	KindLegacy        = "legacy"        // a bare 8-byte counter: no ceiling
	KindUninitialised = "uninitialised" // registered; waits for the primary
	KindCorrupt       = "corrupt"       // unreadable data: see Error
	KindInvalid       = "invalid"       // a child of the root that is not a valid name
)

// Health values of SequenceSummary.Health.
const (
	HealthOK        = "ok"         // IDs available below the ceiling
	HealthAtCeiling = "at_ceiling" // takes wait for the primary to raise it
	HealthWaiting   = "waiting"    // uninitialised: takes wait for the primary
	HealthExhausted = "exhausted"  // the ID space is used up
	HealthLegacy    = "legacy"     // no ceiling: weaker guarantee, see docs
	HealthBroken    = "broken"     // corrupt or invalid: an operator must act
)

// SequenceSummary is one sequence as GET /v1/sequences and "seqkeeper list"
// show it, read from ZooKeeper.
type SequenceSummary struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Next is the lowest ID never issued (for a legacy counter: counter+1).
	Next int64 `json:"next"`
	// Ceiling is the reserved ceiling in ZooKeeper; 0 when there is none
	// (legacy, uninitialised).
	Ceiling int64 `json:"ceiling"`
	// End is the last ID of the space.
	End int64 `json:"end"`
	// Available counts the IDs takes could hand out now: recycled IDs,
	// fresh IDs below the ceiling, and what open windows still hold.
	Available int64 `json:"available"`
	// RecycledIDs counts the IDs pushed back and not yet reissued.
	RecycledIDs int64 `json:"recycled_ids"`
	// Windows is the configured number of windows; OpenWindows the number
	// of window znodes that exist now.
	Windows     int    `json:"windows"`
	OpenWindows int    `json:"open_windows"`
	Leaked      int64  `json:"leaked"`
	Health      string `json:"health"`
	// Error says what is wrong with a corrupt or invalid entry.
	Error string `json:"error,omitempty"`
}

// WindowDetail is one open window of a sequence.
type WindowDetail struct {
	Name      string `json:"name"`
	Next      int64  `json:"next"`
	End       int64  `json:"end"`
	Available int64  `json:"available"`
}

// SequenceDetail is one sequence as GET /v1/sequences/{name} and
// "seqkeeper describe -o json" show it.
type SequenceDetail struct {
	SequenceSummary
	Start         int64          `json:"start"`
	Recycled      IDRanges       `json:"recycled"`
	WindowDetails []WindowDetail `json:"window_details"`
}

// SequenceReader reads sequences for the read model, bypassing caches and
// setting no watches. *sequence.Client is one; so is the primary's client.
type SequenceReader interface {
	Inspect(ctx context.Context, name string) (sequence.State, []sequence.Window, error)
	Names(ctx context.Context) ([]string, error)
}

// DescribeSequence reads sequence name and its windows. It returns an
// error wrapping sequence.ErrUnknownSequence when the sequence does not
// exist, and sequence.ErrCorrupt when its data cannot be read.
func DescribeSequence(ctx context.Context, seqs SequenceReader, name string) (SequenceDetail, error) {
	st, windows, err := seqs.Inspect(ctx, name)
	if err != nil {
		return SequenceDetail{}, err
	}
	return detail(st, windows), nil
}

// detail builds the view of state st and its windows.
func detail(st sequence.State, windows []sequence.Window) SequenceDetail {
	d := SequenceDetail{
		SequenceSummary: SequenceSummary{
			Name: st.Name, Kind: KindSequence, Next: st.Next, Ceiling: st.Ceiling, End: st.End,
			Available: st.Available(), RecycledIDs: st.Recycled.Count(), Windows: st.Windows, Leaked: st.Leaked,
			Health: HealthOK,
		},
		Start:         st.Start,
		Recycled:      IDRanges(st.Recycled),
		WindowDetails: []WindowDetail{},
	}
	if d.Recycled == nil {
		d.Recycled = IDRanges{}
	}
	switch {
	case st.Legacy:
		d.Kind, d.Health, d.Ceiling, d.Next = KindLegacy, HealthLegacy, 0, st.Next+1
	case st.Registered:
		d.Kind, d.Health, d.Ceiling, d.Next = KindUninitialised, HealthWaiting, 0, st.Start
	}
	for _, w := range windows {
		ws := w.State
		d.WindowDetails = append(d.WindowDetails, WindowDetail{Name: w.Name, Next: ws.Next, End: ws.End, Available: ws.Available()})
		d.Available = state.AddSat(d.Available, ws.Available())
	}
	d.OpenWindows = len(d.WindowDetails)
	if d.Kind == KindSequence && d.Available == 0 {
		d.Health = HealthAtCeiling
		if st.Next > min(st.End, math.MaxInt64-1) {
			d.Health = HealthExhausted
		}
	}
	return d
}

// listWorkers bounds the sequences read at once by ListPage.
const listWorkers = 16

// Page sizes of GET /v1/sequences.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10_000
)

// ListResponse is the body of GET /v1/sequences.
type ListResponse struct {
	Sequences []SequenceSummary `json:"sequences"`
	// NextCursor asks for the following page (?cursor=); absent on the
	// last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListOptions choose a page of sequences for ListPage.
type ListOptions struct {
	// Prefix keeps the names that start with it.
	Prefix string
	// Health keeps the summaries with this health word ("" keeps all).
	Health string
	// After starts the page after this name (the previous page's next).
	After string
	// Limit bounds the page; 0 means no bound.
	Limit int
}

// Healths are the words SequenceSummary.Health takes, for checking a
// filter.
var Healths = []string{HealthOK, HealthAtCeiling, HealthWaiting, HealthExhausted, HealthLegacy, HealthBroken}

// ListPage summarises the sequences opts selects, in name order, reading
// only as many as the page needs (all of them with a Health filter that
// few match). next is the name to pass as After for the following page,
// "" when there is none.
func ListPage(ctx context.Context, seqs SequenceReader, opts ListOptions) (page []SequenceSummary, next string, err error) {
	names, err := seqs.Names(ctx)
	if err != nil {
		return nil, "", err
	}
	slices.Sort(names)
	start, _ := slices.BinarySearch(names, opts.After)
	if opts.After != "" && start < len(names) && names[start] == opts.After {
		start++
	}
	names = names[start:]
	if opts.Prefix != "" {
		from, _ := slices.BinarySearch(names, opts.Prefix)
		to := from
		for to < len(names) && strings.HasPrefix(names[to], opts.Prefix) {
			to++
		}
		names = names[from:to]
	}
	page = []SequenceSummary{}
	for len(names) > 0 && (opts.Limit == 0 || len(page) < opts.Limit) {
		n := len(names)
		if opts.Limit > 0 {
			n = min(n, opts.Limit-len(page))
		}
		chunk, err := summariseAll(ctx, seqs, names[:n])
		if err != nil {
			return nil, "", err
		}
		for _, s := range chunk {
			if opts.Health == "" || s.Health == opts.Health {
				page = append(page, s)
			}
		}
		names = names[n:]
	}
	if len(names) > 0 && len(page) > 0 {
		next = page[len(page)-1].Name
	}
	return page, next, nil
}

// summariseAll summarises names in parallel, in their order, leaving out
// the ones that vanished meanwhile.
func summariseAll(ctx context.Context, seqs SequenceReader, names []string) ([]SequenceSummary, error) {
	out := make([]SequenceSummary, len(names))
	keep := make([]bool, len(names))
	errs := make([]error, len(names))
	parallel.Each(len(names), listWorkers, func(i int) {
		out[i], keep[i], errs[i] = summarise(ctx, seqs, names[i])
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kept := out[:0]
	for i, s := range out {
		if keep[i] {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// summarise reads one child of the root for ListSequences; keep is false
// when it vanished meanwhile.
func summarise(ctx context.Context, seqs SequenceReader, name string) (s SequenceSummary, keep bool, err error) {
	if err := sequence.ValidateName(name); err != nil {
		return SequenceSummary{Name: name, Kind: KindInvalid, Health: HealthBroken, Error: err.Error()}, true, nil
	}
	d, err := DescribeSequence(ctx, seqs, name)
	switch {
	case errors.Is(err, sequence.ErrUnknownSequence):
		return SequenceSummary{}, false, nil
	case errors.Is(err, sequence.ErrCorrupt):
		return SequenceSummary{Name: name, Kind: KindCorrupt, Health: HealthBroken, Error: err.Error()}, true, nil
	case err != nil:
		return SequenceSummary{}, false, err
	}
	return d.SequenceSummary, true, nil
}
