package testenv

import (
	"fmt"
	"sync"
	"testing"

	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Ledger is the checker for uniqueness tests: it knows, for every ID ever
// handed out, whether a worker holds it or has pushed it back.
type Ledger struct {
	mu       sync.Mutex
	held     map[int64]int // id -> worker
	recycled map[int64]bool
	issued   int
	dups     []string
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger {
	return &Ledger{held: map[int64]int{}, recycled: map[int64]bool{}}
}

// Took records IDs handed to worker, and any ID already held as a duplicate.
func (l *Ledger) Took(worker int, rs state.Ranges) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			if w, ok := l.held[id]; ok {
				l.dups = append(l.dups, fmt.Sprintf("id %d handed to worker %d while worker %d holds it", id, worker, w))
			}
			l.held[id] = worker
			delete(l.recycled, id)
			l.issued++
		}
	}
}

// Pushing records IDs as recycled before the push makes them takeable.
func (l *Ledger) Pushing(rs state.Ranges) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			delete(l.held, id)
			l.recycled[id] = true
		}
	}
}

// Lost records IDs that were neither pushed back nor kept.
func (l *Ledger) Lost(rs state.Ranges) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		for id := r.Start; id <= r.End; id++ {
			delete(l.recycled, id)
		}
	}
}

// Check fails t for every duplicate recorded.
func (l *Ledger) Check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range l.dups {
		if i == 10 {
			t.Errorf("... and %d more", len(l.dups)-10)
			break
		}
		t.Error("DUPLICATE: " + d)
	}
}

// Issued is the number of IDs handed out so far.
func (l *Ledger) Issued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.issued
}

// Recycled returns the IDs pushed back and not handed out again.
func (l *Ledger) Recycled() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.recycled))
	for id := range l.recycled {
		out = append(out, id)
	}
	return out
}
