package host

import (
	"context"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/httpapi"
)

// keptHandovers bounds the changes of primary a replica remembers for its
// status (and the console).
const keptHandovers = 10

// Handovers remembers the last changes of primary this replica observed.
type Handovers struct {
	mu   sync.Mutex
	seen []httpapi.HandoverView // newest first
}

// Watch records every change of primary e observes until ctx is done. It
// costs one ZooKeeper watch, on the lowest candidate.
func (h *Handovers) Watch(ctx context.Context, e *election.Election) {
	for id := range e.Observe(ctx) {
		h.record(time.Now(), id)
	}
}

// record notes that id (the zero Identity: none) became primary at at.
func (h *Handovers) record(at time.Time, id election.Identity) {
	v := httpapi.HandoverView{At: at.UTC()}
	if id != (election.Identity{}) {
		p := httpapi.ReplicaViewOf(id)
		v.Primary = &p
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append([]httpapi.HandoverView{v}, h.seen[:min(len(h.seen), keptHandovers-1)]...)
}

// List returns the changes, newest first.
func (h *Handovers) List() []httpapi.HandoverView {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]httpapi.HandoverView{}, h.seen...)
}
