package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/internal/primary"
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

// listWorkers bounds the sequences read at once by ListSequences.
const listWorkers = 16

// ListSequences summarises every sequence under the root, sorted by name.
func ListSequences(ctx context.Context, seqs SequenceReader) ([]SequenceSummary, error) {
	page, _, err := ListPage(ctx, seqs, ListOptions{})
	return page, err
}

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
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(listWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i], keep[i], errs[i] = summarise(ctx, seqs, names[i])
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
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

// The body of GET /v1/status as serve provides it. These are views: the
// JSON contract of the API, kept apart from the structs of election and
// primary so that renaming or adding a field there cannot change what
// callers read. Keys are snake_case and enums are words; booleans are
// never omitted. (Status*Of build them from the internal structs.)

// StatusView is the body of GET /v1/status of a serving replica.
type StatusView struct {
	// Replica is this replica.
	Replica ReplicaView `json:"replica"`
	// Leading: this replica is the primary.
	Leading bool `json:"leading"`
	// Primary is the replica the election names primary; null when it
	// cannot be read now (no ZooKeeper session, no candidate).
	Primary *ReplicaView `json:"primary"`
	// ZooKeeperSession is the session ID in hex (0x0 without one).
	ZooKeeperSession string `json:"zookeeper_session"`
	// ZooKeeperState is a word: has_session, connecting, connected,
	// disconnected, expired, auth_failed or unknown.
	ZooKeeperState string `json:"zookeeper_state"`
	// Store is the store's health as its own last requests found it.
	Store StoreView `json:"store"`
	// Reserve is the primary's view of every sequence; only on the
	// primary.
	Reserve *ReserveView `json:"reserve,omitempty"`
	// Election counts this replica's candidacies and terms.
	Election ElectionView `json:"election"`
	// Allocators is the state of this replica's allocators.
	Allocators []AllocatorStatus `json:"allocators"`
	// Handovers are the last changes of primary this replica observed,
	// newest first (a few; the first is what it saw when it started).
	Handovers []HandoverView `json:"handovers"`
}

// HandoverView is one change of primary a replica observed.
type HandoverView struct {
	At time.Time `json:"at"`
	// Primary is the new primary; null when there was none.
	Primary *ReplicaView `json:"primary"`
}

// ReplicaView identifies a replica.
type ReplicaView struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Version string `json:"version,omitempty"`
}

// StoreView is the store's health from its last requests, never from a
// request made for the status page or a probe.
type StoreView struct {
	URL string `json:"url"`
	// Healthy: the store's last request succeeded.
	Healthy bool `json:"healthy"`
	// Error is the last request's error ("not asked yet" before the
	// first); absent when healthy.
	Error string `json:"error,omitempty"`
	// LastRequest is when the store was last asked anything: the age of
	// Healthy. Absent before the first request.
	LastRequest *time.Time `json:"last_request,omitempty"`
}

// ReserveView is the primary's view of the reserved ceilings.
type ReserveView struct {
	Leading bool `json:"leading"`
	// Epoch is the primary's fencing epoch; ZooKeeperEpoch the ZooKeeper
	// leader epoch it last validated against.
	Epoch          int64 `json:"epoch"`
	ZooKeeperEpoch int64 `json:"zookeeper_epoch"`
	// LastSweep is when the primary last checked every sequence; absent
	// before its first sweep.
	LastSweep time.Time `json:"last_sweep,omitzero"`
	// Summary covers every sequence the primary maintains, whichever
	// ones Sequences lists.
	Summary ReserveSummaryView `json:"summary"`
	// Sequences are the ones the request asked for (StatusQuery), in
	// name order.
	Sequences []SequenceReserveView `json:"sequences"`
}

// ReserveSummaryView sums up the primary's view of every sequence.
type ReserveSummaryView struct {
	Sequences int `json:"sequences"`
	Unhealthy int `json:"unhealthy"`
	// MinRunwaySeconds is the shortest runway and MinRunwaySequence its
	// sequence; null and empty without sequences.
	MinRunwaySeconds  *float64 `json:"min_runway_seconds"`
	MinRunwaySequence string   `json:"min_runway_sequence"`
}

// SequenceReserveView is one sequence's reserve as the primary sees it.
type SequenceReserveView struct {
	Name          string  `json:"name"`
	Legacy        bool    `json:"legacy"`
	Next          int64   `json:"next"`
	Ceiling       int64   `json:"ceiling"`
	StoredCeiling int64   `json:"stored_ceiling"`
	RatePerSecond float64 `json:"rate_per_second"`
	// RunwaySeconds is how long the reserve lasts at the current rate
	// (at most a day).
	RunwaySeconds float64 `json:"runway_seconds"`
	Healthy       bool    `json:"healthy"`
	Problem       string  `json:"problem,omitempty"`
	// LegacyMargin: for a legacy counter, the smallest gap seen between
	// the stored mark and the counter (negative: it once ran past).
	LegacyMargin int64 `json:"legacy_margin,omitempty"`
}

// ElectionView counts this replica's part in the leader election.
type ElectionView struct {
	Candidacies  int64 `json:"candidacies"`
	Terms        int64 `json:"terms"`
	Resignations int64 `json:"resignations"`
	Losses       int64 `json:"losses"`
}

// ReplicaViewOf is the view of id.
func ReplicaViewOf(id election.Identity) ReplicaView {
	return ReplicaView{ID: id.ID, Address: id.Address, Version: id.Version}
}

// ElectionViewOf is the view of st.
func ElectionViewOf(st election.Stats) ElectionView {
	return ElectionView{Candidacies: st.Candidacies, Terms: st.Terms, Resignations: st.Resignations, Losses: st.Losses}
}

// ReserveViewOf is the view of st.
func ReserveViewOf(st primary.Status, q StatusQuery) ReserveView {
	return ReserveViewFrom(st.Filter, q)
}

// ReserveViewFrom is the view of what statusOf (primary.Primary.StatusOf)
// returns, asking it to list only the sequences q asks for: the summary
// covers every sequence without a list of them all.
func ReserveViewFrom(statusOf func(keep func(*primary.SequenceStatus) bool) primary.Status, q StatusQuery) ReserveView {
	named := make(map[string]bool, len(q.Names))
	for _, n := range q.Names {
		named[n] = true
	}
	var sum ReserveSummaryView
	st := statusOf(func(s *primary.SequenceStatus) bool {
		sum.Sequences++
		if !s.Healthy {
			sum.Unhealthy++
		}
		if sum.MinRunwaySeconds == nil || s.RunwaySeconds < *sum.MinRunwaySeconds {
			r := s.RunwaySeconds
			sum.MinRunwaySeconds, sum.MinRunwaySequence = &r, s.Name
		}
		return q.Sequences == SequencesAll || (q.Sequences == SequencesUnhealthy && !s.Healthy) || named[s.Name]
	})
	v := ReserveView{Leading: st.Leading, Epoch: st.Epoch, ZooKeeperEpoch: st.ZKEpoch, LastSweep: st.LastSweep,
		Summary: sum, Sequences: make([]SequenceReserveView, 0, len(st.Sequences))}
	for i := range st.Sequences {
		s := &st.Sequences[i]
		v.Sequences = append(v.Sequences, SequenceReserveView{Name: s.Name, Legacy: s.Legacy, Next: s.Next, Ceiling: s.Ceiling,
			StoredCeiling: s.StoredCeiling, RatePerSecond: s.Rate, RunwaySeconds: s.RunwaySeconds,
			Healthy: s.Healthy, Problem: s.Problem, LegacyMargin: s.LegacyMargin})
	}
	return v
}

// Which of the primary's sequences GET /v1/status lists (its sequences
// parameter).
const (
	SequencesAll       = "all"       // every one (the default)
	SequencesUnhealthy = "unhealthy" // the unhealthy ones
	SequencesNone      = "none"      // none: the summary only
)

// maxStatusNames bounds the name parameters of one GET /v1/status.
const maxStatusNames = 1000

// StatusQuery is what a GET /v1/status asks for: which of the primary's
// sequences to list in reserve.sequences (Sequences), and these by name
// as well (Names). At 100,000 sequences the whole list is megabytes; the
// console asks for the unhealthy ones and those on its page.
type StatusQuery struct {
	Sequences string
	Names     []string
}

// statusQuery reads a StatusQuery from GET /v1/status's parameters.
func statusQuery(v url.Values) (StatusQuery, error) {
	q := StatusQuery{Sequences: SequencesAll, Names: v["name"]}
	if s := v.Get("sequences"); s != "" {
		switch s {
		case SequencesAll, SequencesUnhealthy, SequencesNone:
			q.Sequences = s
		default:
			return q, fmt.Errorf("sequences must be all, unhealthy or none, not %q", s)
		}
	}
	if len(q.Names) > maxStatusNames {
		return q, fmt.Errorf("at most %d name parameters, not %d", maxStatusNames, len(q.Names))
	}
	return q, nil
}
