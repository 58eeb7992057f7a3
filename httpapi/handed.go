package httpapi

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/seqkeeper/seqkeeper/sequence"
)

// Bounds of handedOut.
const (
	// maxHandedRanges bounds the runs of IDs remembered per sequence; past
	// it, the oldest are forgotten (their recycling is then refused: the
	// IDs are leaked, never risked).
	maxHandedRanges = 4096
	// maxRecycleKeys bounds the idempotency keys remembered (a retry of a
	// keyed recycle this replica accepted goes through to ZooKeeper, which
	// answers it definitively).
	maxRecycleKeys = 1024
)

// handedOut is what this replica handed out over the ID route and has not
// taken back since, per sequence: the only IDs it accepts to recycle.
//
// Why: an ID is "issued" in ZooKeeper as soon as any replica's allocator
// has taken it, long before that replica hands it out. A recycle of such
// an ID through another replica (a made-up test value, a client that took
// from one replica and pushed to another) would put into the recycled list
// an ID that its allocator still holds and will hand out: twice. A replica
// knows what it handed out itself; everything else is refused and leaked.
type handedOut struct {
	mu   sync.Mutex
	seqs map[string]sequence.Ranges
	keys map[recycleKey]string // key -> the ranges it recycled, as text
	fifo []recycleKey
}

type recycleKey struct{ name, key string }

func newHandedOut() *handedOut {
	return &handedOut{seqs: make(map[string]sequence.Ranges), keys: make(map[recycleKey]string)}
}

// add records that ids of name were handed out.
func (h *handedOut) add(name string, ids sequence.Ranges) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := union(h.seqs[name], ids)
	if len(rs) > maxHandedRanges {
		rs = slices.Clone(rs[len(rs)-maxHandedRanges:])
	}
	h.seqs[name] = rs
}

// take removes ids of name if every one of them was handed out and not
// taken back; otherwise it removes nothing and returns the ones that were
// not (sorted).
func (h *handedOut) take(name string, ids sequence.Ranges) sequence.Ranges {
	h.mu.Lock()
	defer h.mu.Unlock()
	have := h.seqs[name]
	if missing := subtract(ids, have); len(missing) > 0 {
		return missing
	}
	h.seqs[name] = subtract(have, ids)
	return nil
}

// putBack undoes a take whose recycle certainly changed nothing.
func (h *handedOut) putBack(name string, ids sequence.Ranges) { h.add(name, ids) }

// forget drops what is known of name (deleted: its IDs never come back).
func (h *handedOut) forget(name string) {
	h.mu.Lock()
	delete(h.seqs, name)
	h.mu.Unlock()
}

// rememberKey records that this replica accepted a keyed recycle of ids.
func (h *handedOut) rememberKey(name, key string, ids sequence.Ranges) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := recycleKey{name, key}
	if _, ok := h.keys[k]; !ok {
		h.fifo = append(h.fifo, k)
		if len(h.fifo) > maxRecycleKeys {
			delete(h.keys, h.fifo[0])
			h.fifo = h.fifo[1:]
		}
	}
	h.keys[k] = ids.String()
}

// knowsKey reports whether a keyed recycle of the same ids under the same
// key went through this replica before: a retry, which ZooKeeper answers.
func (h *handedOut) knowsKey(name, key string, ids sequence.Ranges) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	got, ok := h.keys[recycleKey{name, key}]
	return ok && got == ids.String()
}

// union returns a ∪ b, sorted and coalesced; both are sorted and
// coalesced.
func union(a, b sequence.Ranges) sequence.Ranges {
	all := slices.Concat(a, b)
	slices.SortFunc(all, func(x, y sequence.Range) int { return cmp.Compare(x.Start, y.Start) })
	var out sequence.Ranges
	for _, r := range all {
		if n := len(out); n > 0 && (r.Start <= out[n-1].End || out[n-1].End < math.MaxInt64 && r.Start == out[n-1].End+1) {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// subtract returns a minus b, sorted; both are sorted and coalesced.
func subtract(a, b sequence.Ranges) sequence.Ranges {
	var out sequence.Ranges
	for _, r := range a {
		cur, done := r.Start, false
		for _, x := range b {
			if x.End < cur || x.Start > r.End {
				continue
			}
			if x.Start > cur {
				out = append(out, sequence.Range{Start: cur, End: x.Start - 1})
			}
			if x.End >= r.End {
				done = true
				break
			}
			cur = x.End + 1
		}
		if !done {
			out = append(out, sequence.Range{Start: cur, End: r.End})
		}
	}
	return out
}

// notHandedOut is the error of a recycle of IDs this replica did not hand
// out.
func notHandedOut(name string, missing sequence.Ranges) error {
	return fmt.Errorf("sequence %q: %w: IDs %s were not handed out by this replica, which takes back only IDs it handed out itself (send a recycle to the replica that answered the take; IDs from elsewhere are left unused: pushing them here could hand them out twice)",
		name, errNotHandedOut, missing)
}
