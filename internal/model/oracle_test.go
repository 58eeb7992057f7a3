package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// idSet is a set of IDs kept as sorted, coalesced, inclusive ranges, so a
// run that hands out millions of IDs costs a handful of ranges per
// sequence, not one entry per ID.
type idSet struct{ rs []sequence.Range }

// first returns the index of the first range that ends at or after id.
func (s *idSet) first(id int64) int {
	return sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End >= id })
}

// add puts r into the set, joining it with overlapping and adjacent ranges.
func (s *idSet) add(r sequence.Range) {
	from := r.Start
	if from > math.MinInt64 {
		from-- // a range ending at r.Start-1 is adjacent: join it
	}
	i := s.first(from)
	j := i
	for j < len(s.rs) && (r.End == math.MaxInt64 || s.rs[j].Start <= r.End+1) {
		r.Start = min(r.Start, s.rs[j].Start)
		r.End = max(r.End, s.rs[j].End)
		j++
	}
	s.rs = slices.Replace(s.rs, i, j, r)
}

// remove takes r out of the set.
func (s *idSet) remove(r sequence.Range) {
	i := s.first(r.Start)
	j := i
	var keep []sequence.Range
	for ; j < len(s.rs) && s.rs[j].Start <= r.End; j++ {
		x := s.rs[j]
		if x.Start < r.Start {
			keep = append(keep, sequence.Range{Start: x.Start, End: r.Start - 1})
		}
		if x.End > r.End {
			keep = append(keep, sequence.Range{Start: r.End + 1, End: x.End})
		}
	}
	s.rs = slices.Replace(s.rs, i, j, keep...)
}

// intersect returns the parts of r that are in the set, in order.
func (s *idSet) intersect(r sequence.Range) []sequence.Range {
	var out []sequence.Range
	for j := s.first(r.Start); j < len(s.rs) && s.rs[j].Start <= r.End; j++ {
		out = append(out, sequence.Range{Start: max(s.rs[j].Start, r.Start), End: min(s.rs[j].End, r.End)})
	}
	return out
}

// missing returns the parts of r that are not in the set, in order.
func (s *idSet) missing(r sequence.Range) []sequence.Range {
	var out []sequence.Range
	next := r.Start
	for _, p := range s.intersect(r) {
		if p.Start > next {
			out = append(out, sequence.Range{Start: next, End: p.Start - 1})
		}
		if p.End == math.MaxInt64 {
			return out
		}
		next = p.End + 1
	}
	if next <= r.End {
		out = append(out, sequence.Range{Start: next, End: r.End})
	}
	return out
}

// count is the number of IDs in the set, saturating.
func (s *idSet) count() int64 {
	var n int64
	for _, r := range s.rs {
		if n > math.MaxInt64-r.Len() {
			return math.MaxInt64
		}
		n += r.Len()
	}
	return n
}

// seqSpec is one sequence of the run: its name and how it is registered.
// A name keeps its registration across delete and re-create.
type seqSpec struct {
	name string
	kind string // plain, windowed, bounded, top
	// reg is the registration, its End and Windows the widest ever asked
	// for (a widen that failed may have reached the store, and a restore
	// bring it): the space IDs are checked against.
	reg seqzk.Registration
	// landedEnd is the highest End the space is known to have had (its
	// first End, or one a widen set; 0 for an unbounded space): it never
	// narrows below it.
	landedEnd int64
}

// endLanded returns the highest end the space is known to have had.
func (s seqSpec) endLanded() int64 {
	if s.landedEnd > 0 {
		return s.landedEnd
	}
	return state.MaxID
}

func (s seqSpec) start() int64 {
	if s.reg.Start == 0 {
		return state.DefaultStart
	}
	return s.reg.Start
}

func (s seqSpec) end() int64 {
	if s.reg.End == 0 {
		return state.MaxID
	}
	return s.reg.End
}

// inSpace reports whether r may be handed out by the sequence: inside
// [start, end], and never MaxID itself when the space ends there (see
// state.MaxID).
func (s seqSpec) inSpace(r sequence.Range) bool {
	return r.Start >= s.start() && r.End <= s.end() && !(s.end() == state.MaxID && r.End == state.MaxID)
}

// event is one take or push of a ledger, kept for the failure report.
type event struct {
	op   int
	who  string
	what string
	r    sequence.Range
}

// ledger is the oracle of one sequence name, across every incarnation of
// it (deleted and re-created names must never hand out an earlier
// incarnation's IDs again).
//
// The rule it enforces: an ID may be handed out again only after it was
// pushed back since it was last handed out, and each push allows one more
// hand-out. issued holds every ID ever handed out; returned the IDs pushed
// back (or possibly pushed back: a push whose outcome is unknown counts as
// applied, so the oracle never blames the system for IDs it may rightly
// hand out again).
type ledger struct {
	spec     seqSpec
	issued   idSet
	returned idSet
	// skipped holds the IDs an advance made sure are never handed out:
	// those it jumped over and the recycled IDs it dropped.
	skipped idSet
	highest int64 // the highest ID ever handed out, 0 before the first
	handed  int64 // IDs handed out, counting re-issues of pushed IDs
	events  []event
}

func newLedger(spec seqSpec) *ledger { return &ledger{spec: spec} }

// take records that who was handed out got at operation op, and returns a
// description of every violation: IDs outside the space, and IDs handed
// out before and not pushed back since.
func (l *ledger) take(op int, who string, got sequence.Ranges) []string {
	var problems []string
	for _, r := range got {
		if !l.spec.inSpace(r) {
			problems = append(problems, fmt.Sprintf("sequence %q handed %s to %s at op #%d: outside its space %d:%d",
				l.spec.name, r, who, op, l.spec.start(), l.spec.end()))
		}
		for _, p := range l.skipped.intersect(r) {
			problems = append(problems, fmt.Sprintf("SKIPPED ID HANDED OUT: sequence %q handed %s to %s at op #%d: an advance made sure it would never be handed out:%s",
				l.spec.name, p, who, op, l.history(p)))
		}
		for _, p := range l.issued.intersect(r) {
			for _, d := range l.returned.missing(p) {
				problems = append(problems, l.duplicate(op, who, d))
			}
		}
		l.returned.remove(r)
		l.issued.add(r)
		l.highest = max(l.highest, r.End)
		l.handed += r.Len()
		l.events = append(l.events, event{op: op, who: who, what: "took", r: r})
	}
	return problems
}

// skip records that an advance at op made sure rs are never handed out.
func (l *ledger) skip(op int, rs []sequence.Range) {
	for _, r := range rs {
		l.skipped.add(r)
		l.events = append(l.events, event{op: op, who: "advance", what: "skipped", r: r})
	}
}

// pushed records a push of r by who at op; what says how it ended.
func (l *ledger) pushed(op int, who, what string, r sequence.Range) {
	l.events = append(l.events, event{op: op, who: who, what: what, r: r})
}

// duplicate describes IDs d handed out again to who at op, naming every
// earlier take and push of its first ID.
func (l *ledger) duplicate(op int, who string, d sequence.Range) string {
	return fmt.Sprintf("DUPLICATE: sequence %q handed out %s (%d IDs) again, now to %s at op #%d; never pushed back since handed out before to:%s",
		l.spec.name, d, d.Len(), who, op, l.history(d))
}

// history lists the latest events (takes, pushes, advances) that touched
// d, newest first.
func (l *ledger) history(d sequence.Range) string {
	var b strings.Builder
	n := 0
	for i := len(l.events) - 1; i >= 0 && n < 8; i-- {
		e := l.events[i]
		if e.r.Start <= d.End && d.Start <= e.r.End {
			fmt.Fprintf(&b, "\n      op #%d: %s %s %s", e.op, e.who, e.what, e.r)
			n++
		}
	}
	if n == 0 {
		b.WriteString(" (no earlier event found: oracle bug)")
	}
	return b.String()
}
