package state

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// last is the highest ID Take may ever issue fresh: End, except that with
// End = math.MaxInt64 Next could not move past it, so that one ID is never
// issued.
func (s State) last() int64 {
	return min(s.End, math.MaxInt64-1)
}

// Fresh is the number of never-issued IDs clients may take now.
func (s State) Fresh() int64 {
	hi := min(s.Ceiling, s.last())
	if hi < s.Next {
		return 0
	}
	return hi - s.Next + 1
}

// Available returns how many IDs Take could hand out right now: the recycled
// IDs plus the fresh ones up to the ceiling (saturating at math.MaxInt64).
// A registration has none until the primary initialises it.
func (s State) Available() int64 {
	switch {
	case s.Registered:
		return 0
	case s.Legacy:
		return max(0, MaxLegacyCounter-s.Next)
	}
	return AddSat(s.Recycled.Count(), s.Fresh())
}

// Take removes up to n IDs from s and returns them, ascending and coalesced.
// Recycled IDs go first, lowest first, so old holes close before the counter
// moves; then fresh IDs from Next, never above Ceiling. When fewer than n are
// available it returns what there is; at the ceiling, and for a registration
// not yet initialised, that is nothing (an empty result and a nil error): the
// caller should wait for the primary to raise the ceiling. It returns an
// error wrapping ErrExhausted once the whole space has been issued and
// nothing is recycled. On error s is unchanged.
//
// A legacy counter has no ceiling: Take hands out Next+1 to Next+n, up to
// MaxLegacyCounter.
func (s *State) Take(n int64) (Ranges, error) {
	if n < 1 {
		return nil, fmt.Errorf("sequence %q: take %d: the count must be at least 1", s.Name, n)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch {
	case s.Registered:
		return nil, nil
	case s.Legacy:
		if s.Next >= MaxLegacyCounter {
			return nil, fmt.Errorf("sequence %q: %w: legacy counter is at its maximum %d; migrate the sequence to the text format", s.Name, ErrExhausted, MaxLegacyCounter)
		}
		k := min(n, MaxLegacyCounter-s.Next)
		out := Ranges{{s.Next + 1, s.Next + k}}
		s.Next += k
		return out, nil
	}
	if len(s.Recycled) == 0 && s.Next > s.last() {
		return nil, fmt.Errorf("sequence %q: %w: every ID up to end %d has been issued or skipped (a restore after a ZooKeeper data loss skips what the store had reserved); widen the space ('seqkeeper widen %s --max N') or move to a new sequence", s.Name, ErrExhausted, s.End, s.Name)
	}

	var out Ranges
	rest := s.Recycled
	for len(rest) > 0 && n > 0 {
		r := rest[0]
		if r.Len() > n {
			out = append(out, Range{r.Start, r.Start + n - 1})
			// A new slice, not rest[0] = ...: the caller's copy of the
			// state may share the backing array.
			rest = append(Ranges{{r.Start + n, r.End}}, rest[1:]...)
			n = 0
			break
		}
		out = append(out, r)
		n -= r.Len()
		rest = rest[1:]
	}
	if len(rest) == 0 {
		rest = nil
	}
	s.Recycled = rest

	if k := min(n, s.Fresh()); k > 0 {
		fresh := Range{s.Next, s.Next + k - 1}
		// The highest recycled range may end at Next-1; keep out coalesced.
		if len(out) > 0 && out[len(out)-1].End == fresh.Start-1 {
			out[len(out)-1].End = fresh.End
		} else {
			out = append(out, fresh)
		}
		s.Next += k
	}
	return out, nil
}

// Push returns IDs to s for reuse. It refuses, with an error wrapping
// ErrBadPush, any range that lies outside the space, holds IDs never issued
// (>= Next), or overlaps the recycled list: accepting any of those could hand
// an ID out twice. Refusal is all-or-nothing; on error s is unchanged.
//
// Pushed ranges are merged into Recycled and coalesced with their
// neighbours. If the list would then exceed MaxRecycledRanges, the smallest
// ranges (ties: the highest-numbered) are dropped until it fits and their IDs
// are added to Leaked. The policy is to leak IDs, never to duplicate them;
// dropping the smallest ranges loses the fewest IDs per range saved.
//
// Legacy counters and registrations accept no pushes: the 8-byte form has
// nowhere to keep the IDs (a worker should drop them), and a registration has
// issued nothing.
func (s *State) Push(rs Ranges) error {
	return s.push(rs, MaxRecycledRanges)
}

// push is Push with the cap as a parameter, so that tests can reach the cap
// policy with a handful of ranges.
func (s *State) push(rs Ranges, limit int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	refuse := func(what string, format string, args ...any) error {
		return fmt.Errorf("sequence %q: %w: %s: %s", s.Name, ErrBadPush, what, fmt.Sprintf(format, args...))
	}
	all := "ranges " + rs.String()
	switch {
	case s.Legacy:
		return refuse(all, "a legacy 8-byte counter cannot keep recycled IDs; drop them instead (they are lost, never reused)")
	case s.Registered:
		return refuse(all, "the sequence is not initialised yet, so it has issued no IDs")
	}
	in, err := NormalizeRanges(rs)
	if err != nil {
		return refuse(all, "%v", err)
	}
	for _, r := range in {
		if r.Start < s.Start || r.End > s.End {
			return refuse("range "+r.String(), "outside the space %s of the sequence", Range{s.Start, s.End})
		}
		if r.End >= s.Next {
			return refuse("range "+r.String(), "IDs from %d were never issued (next is %d); push back only IDs this sequence handed out", max(r.Start, s.Next), s.Next)
		}
		// The first recycled range not entirely below r is the only one
		// that can overlap it.
		i, _ := slices.BinarySearchFunc(s.Recycled, r.Start, func(x Range, id int64) int { return cmp.Compare(x.End, id) })
		if i < len(s.Recycled) && s.Recycled[i].Start <= r.End {
			return refuse("range "+r.String(), "overlaps recycled range %s: those IDs were already pushed back, pushing them again would hand them out twice", s.Recycled[i])
		}
	}

	merged := make(Ranges, 0, len(s.Recycled)+len(in))
	a, b := s.Recycled, in
	for len(a) > 0 || len(b) > 0 {
		var r Range
		if len(b) == 0 || len(a) > 0 && a[0].Start < b[0].Start {
			r, a = a[0], a[1:]
		} else {
			r, b = b[0], b[1:]
		}
		if n := len(merged); n > 0 && merged[n-1].End == r.Start-1 {
			merged[n-1].End = r.End
			continue
		}
		merged = append(merged, r)
	}
	leaked := int64(0)
	if len(merged) > limit {
		merged, leaked = dropSmallest(merged, len(merged)-limit)
	}
	s.Recycled = merged
	s.Leaked = AddSat(s.Leaked, leaked)
	return nil
}

// HasPushKey reports whether s records a push made with idempotency key:
// that push was applied.
func (s State) HasPushKey(key string) bool { return slices.Contains(s.Pushed, key) }

// PushOnce is Push made idempotent by key (see ValidatePushKey). If s
// already records key, the push with that key was applied before: PushOnce
// changes nothing and reports already. Otherwise it pushes rs as Push does
// and records key in Pushed, dropping the oldest key beyond MaxPushKeys;
// writing s then records the key atomically with the push. A push refused
// (ErrBadPush) records nothing. An empty rs changes nothing. On error s is
// unchanged.
//
// Like Push, PushOnce replaces Pushed rather than writing into its backing
// array, so copies of s stay intact.
func (s *State) PushOnce(rs Ranges, key string) (already bool, err error) {
	return s.pushOnce(rs, key, MaxRecycledRanges)
}

// pushOnce is PushOnce with the recycled list's cap as a parameter (see
// push).
func (s *State) pushOnce(rs Ranges, key string, limit int) (already bool, err error) {
	if err := ValidatePushKey(key); err != nil {
		return false, fmt.Errorf("sequence %q: %w", s.Name, err)
	}
	if err := s.Validate(); err != nil {
		return false, err
	}
	if s.HasPushKey(key) {
		return true, nil
	}
	if len(rs) == 0 {
		return false, nil
	}
	for _, r := range rs {
		if r.Start < s.PushFloor {
			return false, fmt.Errorf("sequence %q: %w: range %s with key %s: IDs below %d were handed out before ZooKeeper's latest leader election, which may have lost the record of this push if it is a retry; treat them as lost",
				s.Name, ErrBadPush, r, key, s.PushFloor)
		}
	}
	if err := s.push(rs, limit); err != nil {
		return false, err
	}
	keep := s.Pushed[max(0, len(s.Pushed)+1-MaxPushKeys):]
	keys := make([]string, 0, len(keep)+1)
	s.Pushed = append(append(keys, keep...), key)
	return false, nil
}

// dropSmallest removes the k smallest ranges of rs (ties: the highest
// first, so the oldest holes survive) and returns the rest, still in order,
// and the number of IDs dropped. Dropping a range only widens the gap between
// its neighbours, so the result stays coalesced.
func dropSmallest(rs Ranges, k int) (Ranges, int64) {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		if c := cmp.Compare(rs[i].Len(), rs[j].Len()); c != 0 {
			return c
		}
		return cmp.Compare(rs[j].Start, rs[i].Start)
	})
	drop := make([]bool, len(rs))
	var leaked int64
	for _, i := range order[:k] {
		drop[i] = true
		leaked = AddSat(leaked, rs[i].Len())
	}
	kept := make(Ranges, 0, len(rs)-k)
	for i, r := range rs {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	return kept, leaked
}
