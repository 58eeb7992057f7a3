package state

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Range is an inclusive range of IDs [Start, End], Start <= End. Inclusive
// bounds let a range end at math.MaxInt64 without an unrepresentable End+1.
type Range struct{ Start, End int64 }

// Len returns the number of IDs in r, End-Start+1, saturating at
// math.MaxInt64 so a caller summing lengths never sees a wrapped negative. An
// invalid range (Start > End) has length 0.
func (r Range) Len() int64 {
	if r.End < r.Start {
		return 0
	}
	// The difference of two int64 always fits in a uint64.
	n := uint64(r.End) - uint64(r.Start) + 1
	if n == 0 || n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// String returns "start:end", or just "id" for a single ID, the notation of
// the recycled line in the state format.
func (r Range) String() string {
	if r.Start == r.End {
		return strconv.FormatInt(r.Start, 10)
	}
	return strconv.FormatInt(r.Start, 10) + ":" + strconv.FormatInt(r.End, 10)
}

// ParseRange parses "start:end" or a single "id". Numbers are plain base-10
// (no sign, no leading zeros) so that every range has one spelling an
// operator can grep for. The range must be valid: 1 <= start <= end.
func ParseRange(s string) (Range, error) {
	lo, hi, isPair := strings.Cut(s, ":")
	start, err := parseNumber(lo)
	if err != nil {
		return Range{}, fmt.Errorf("range %q: start: %w", s, err)
	}
	end := start
	if isPair {
		if end, err = parseNumber(hi); err != nil {
			return Range{}, fmt.Errorf("range %q: end: %w", s, err)
		}
	}
	r := Range{start, end}
	if msg := r.problem(); msg != "" {
		return Range{}, fmt.Errorf("range %q: %s", s, msg)
	}
	return r, nil
}

// problem says what makes r unusable as a range of IDs, or "" if nothing.
func (r Range) problem() string {
	switch {
	case r.Start < 1:
		return fmt.Sprintf("start %d is below 1 (IDs start at 1)", r.Start)
	case r.Start > r.End:
		return fmt.Sprintf("start %d is above end %d", r.Start, r.End)
	}
	return ""
}

// Ranges is a sorted, non-overlapping, coalesced list of inclusive ranges.
// Keeping it coalesced keeps a recycled list, and so a znode, as small as the
// set of IDs allows; NormalizeRanges produces one from any valid input.
type Ranges []Range

// Count returns the total number of IDs in rs, saturating at math.MaxInt64.
func (rs Ranges) Count() int64 {
	var n int64
	for _, r := range rs {
		n = AddSat(n, r.Len())
	}
	return n
}

// Contains reports whether id lies in one of the ranges. It relies on rs
// being sorted and non-overlapping, as every Ranges is.
func (rs Ranges) Contains(id int64) bool {
	i, _ := slices.BinarySearchFunc(rs, id, func(r Range, id int64) int {
		// A range compares below id only once it ends before id, so the
		// search lands on the one range that could hold it.
		return cmp.Compare(r.End, id)
	})
	return i < len(rs) && rs[i].Start <= id
}

// String returns the ranges separated by single spaces, as the recycled line
// of the state format holds them.
func (rs Ranges) String() string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// NormalizeRanges returns the ranges of in, sorted and with adjacent ranges
// joined. It refuses invalid ranges and overlapping ones: an ID listed twice
// means some caller holds it twice, and quietly merging the overlap would
// hide exactly the bug that hands an ID out twice. in is not modified.
func NormalizeRanges(in []Range) (Ranges, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := slices.Clone(Ranges(in))
	for _, r := range out {
		if msg := r.problem(); msg != "" {
			return nil, fmt.Errorf("range %s: %s", r, msg)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
	w := 0
	for _, r := range out[1:] {
		last := &out[w]
		switch {
		case r.Start <= last.End:
			return nil, fmt.Errorf("ranges %s and %s overlap: an ID listed twice would be handed out twice", *last, r)
		case r.Start-1 == last.End: // r.Start > last.End >= 1, so no overflow
			last.End = r.End
		default:
			w++
			out[w] = r
		}
	}
	return out[:w+1], nil
}

// canonicalProblem says why rs is not a valid Ranges (sorted, non-overlapping,
// coalesced, every range valid), or "" if it is one.
func (rs Ranges) canonicalProblem() string {
	for i, r := range rs {
		if msg := r.problem(); msg != "" {
			return fmt.Sprintf("range %s: %s", r, msg)
		}
		if i == 0 {
			continue
		}
		prev := rs[i-1]
		switch {
		case r.Start <= prev.Start:
			return fmt.Sprintf("range %s is not above %s (ranges must be in ascending order)", r, prev)
		case r.Start <= prev.End:
			return fmt.Sprintf("ranges %s and %s overlap (an ID listed twice would be handed out twice)", prev, r)
		case r.Start-1 == prev.End:
			return fmt.Sprintf("ranges %s and %s are adjacent; write them as one range %s", prev, r, Range{prev.Start, r.End})
		}
	}
	return ""
}

// parseNumber parses a plain base-10 int64: an optional '-', then digits with
// no leading zero. strconv alone would also take "+5" and "007"; refusing
// them keeps one spelling per value, so Encode(ParseState(x)) can equal x.
// The sign is accepted so that "-5" is reported as out of range rather than
// as unreadable.
func parseNumber(s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("%q is not a plain base-10 integer", s)
		}
	}
	if len(digits) > 1 && digits[0] == '0' || s == "-0" {
		return 0, fmt.Errorf("%q has a leading zero; write it without", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q does not fit in a signed 64-bit integer", s)
	}
	return n, nil
}

// addSat adds two non-negative counts, saturating at math.MaxInt64.
func AddSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
