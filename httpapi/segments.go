package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// Tinyid's segments (compat.go). A client of nextSegmentIdSimple hands out
// (currentId, maxId] itself, and asks for the next segment once it passes
// loadingId, a fifth of the way in (where Tinyid's server puts it). A
// segment is one contiguous range of IDs taken for that client alone:
// every ID of it counts as handed out, so a client that stops mid-segment
// loses the rest and never hands them out twice. Its size follows demand
// per sequence, as Leaf's segments do: doubled while segments are asked
// for less than segmentFast apart, halved once more than segmentSlow
// apart, between segmentMin and segmentMax.
const (
	segmentMin     = 1_000
	segmentMax     = 1_000_000
	segmentFast    = time.Minute
	segmentSlow    = 15 * time.Minute
	segmentLoading = 20 // percent
)

// Segment is Tinyid's SegmentId: its client hands out currentId+delta,
// +2*delta, ... up to maxId (those equal to remainder modulo delta).
type Segment struct {
	CurrentID int64 `json:"currentId"`
	LoadingID int64 `json:"loadingId"`
	MaxID     int64 `json:"maxId"`
	Delta     int   `json:"delta"`
	Remainder int   `json:"remainder"`
}

// segmentSizes is the segment size of each sequence a segment was taken
// of, and when.
type segmentSizes struct {
	mu sync.Mutex
	by map[string]segmentDemand
}

type segmentDemand struct {
	size int64
	last time.Time
}

// size is the size of sequence name's next segment, asked for at now.
func (z *segmentSizes) size(name string, now time.Time) int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	d, ok := z.by[name]
	switch {
	case !ok:
		return segmentMin
	case now.Sub(d.last) < segmentFast:
		return min(2*d.size, segmentMax)
	case now.Sub(d.last) > segmentSlow:
		return max(d.size/2, segmentMin)
	}
	return d.size
}

// took records a segment of size taken of sequence name at now (only once
// taken: names that do not exist take no room).
func (z *segmentSizes) took(name string, size int64, now time.Time) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.by == nil {
		z.by = map[string]segmentDemand{}
	}
	z.by[name] = segmentDemand{size: size, last: now}
}

// nextSegment takes a segment of sequence name: its size in IDs from
// ZooKeeper, the largest contiguous range of them as the segment, and the
// rest given back (recycled IDs come first, in pieces; a give-back that
// fails loses them, never hands them out twice).
func (s *Server) nextSegment(ctx context.Context, name string) (Segment, error) {
	now := time.Now()
	size := s.segments.size(name, now)
	got, err := s.seqs.Take(ctx, name, size)
	if err != nil {
		return Segment{}, err
	}
	if len(got) == 0 {
		return Segment{}, errors.New("the take handed out no IDs")
	}
	best := 0
	for i, rg := range got {
		if rg.End-rg.Start > got[best].End-got[best].Start {
			best = i
		}
	}
	seg := got[best]
	if rest := append(append(sequence.Ranges{}, got[:best]...), got[best+1:]...); len(rest) > 0 {
		s.pushBack(ctx, name, rest, errSegmentRest)
	}
	s.segments.took(name, size, now)
	n := seg.End - seg.Start + 1
	return Segment{CurrentID: seg.Start - 1, LoadingID: seg.Start - 1 + n*segmentLoading/100, MaxID: seg.End, Delta: 1}, nil
}

// errSegmentRest is why a segment's take gives IDs back: they lay apart
// from the segment's range.
var errSegmentRest = errors.New("IDs of a segment's take outside its one range")
