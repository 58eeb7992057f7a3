package client

import "sync"

// maxServedRuns bounds the runs of IDs a Client remembers per sequence;
// past it the oldest are forgotten, and recycling them goes to any
// replica, which refuses what it did not hand out (the IDs stay unused).
const maxServedRuns = 4096

// served remembers which replica handed out which IDs, so that a recycle
// goes to the replica that handed them out: the only one that takes them
// back (docs/http-api.md, "Recycling").
type served struct {
	mu   sync.Mutex
	runs map[string][]servedRun
}

type servedRun struct {
	r  Range
	ep *endpoint
}

// add records that ep handed out rs of name.
func (s *served) add(name string, ep *endpoint, rs Ranges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = make(map[string][]servedRun)
	}
	runs := s.runs[name]
	for _, r := range rs {
		runs = append(runs, servedRun{r: r, ep: ep})
	}
	if len(runs) > maxServedRuns {
		runs = append([]servedRun(nil), runs[len(runs)-maxServedRuns:]...)
	}
	s.runs[name] = runs
}

// split returns ids of name grouped by the replica that handed them out,
// in the order of first appearance; the IDs no replica is remembered for
// are under nil.
func (s *served) split(name string, ids Ranges) (order []*endpoint, parts map[*endpoint]Ranges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts = make(map[*endpoint]Ranges)
	put := func(ep *endpoint, r Range) {
		if _, ok := parts[ep]; !ok {
			order = append(order, ep)
		}
		parts[ep] = append(parts[ep], r)
	}
	for _, r := range ids {
		cur, done := r.Start, false
		for !done {
			var best *servedRun
			for i := range s.runs[name] {
				run := &s.runs[name][i]
				if run.r.Start <= cur && cur <= run.r.End {
					best = run
					break
				}
			}
			if best != nil {
				end := min(best.r.End, r.End)
				put(best.ep, Range{cur, end})
				done = end == r.End
				if !done {
					cur = end + 1
				}
				continue
			}
			// Up to the next remembered run, or the end: nobody's.
			end := r.End
			for _, run := range s.runs[name] {
				if run.r.Start > cur && run.r.Start <= end {
					end = run.r.Start - 1
				}
			}
			put(nil, Range{cur, end})
			done = end == r.End
			if !done {
				cur = end + 1
			}
		}
	}
	return order, parts
}

// forget drops what is remembered of name (it was deleted).
func (s *served) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, name)
}
