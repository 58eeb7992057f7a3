package sequence

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/batching"
)

// ErrClosed is returned by an Allocator's Next after Close.
var ErrClosed = errors.New("allocator closed")

// Defaults for AllocatorOptions.
const (
	DefaultInitialBatch  = batching.DefaultInitialBatch
	DefaultMinBatch      = batching.DefaultMinBatch
	DefaultMaxBatch      = 100_000
	DefaultPrefetch      = batching.DefaultPrefetch
	DefaultBatchDuration = batching.DefaultBatchDuration
)

// AllocatorOptions configure an Allocator. The zero value is usable; fields
// left zero take the defaults above. MinBatch <= InitialBatch <= MaxBatch.
type AllocatorOptions struct {
	// InitialBatch is the size of the first batch taken from ZooKeeper.
	InitialBatch int64
	// MinBatch and MaxBatch bound the adaptive batch size. A larger batch
	// costs fewer ZooKeeper round trips per ID and loses more IDs if the
	// process crashes (its unused IDs are not pushed back).
	MinBatch, MaxBatch int64
	// Prefetch is the fraction of the current batch still unused when the
	// next batch is fetched in the background, in (0, 1]. With 0.5 a batch
	// that lasts a second gives ZooKeeper half a second to answer before
	// Next would have to wait.
	Prefetch float64
	// BatchDuration is how long a batch should last. The allocator doubles
	// the batch when one is used up in less than half of it and halves it
	// when one lasts more than twice as long.
	BatchDuration time.Duration
}

func (o *AllocatorOptions) setDefaults() error {
	r, err := batching.Options(*o).Resolve(DefaultMaxBatch)
	if err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	*o = AllocatorOptions(r)
	return nil
}

// Allocator hands out IDs of one sequence one at a time from memory (the
// hi-lo pattern): it takes batches from ZooKeeper through a Client and
// serves Next from the current batch with one atomic add. The next batch is
// fetched in the background before the current one runs out, so in steady
// state Next never waits for ZooKeeper. It is safe for concurrent use.
//
// IDs from one Allocator ascend within a batch, but recycled IDs and
// concurrent callers mean Next is not globally ordered. A process that
// crashes loses its unused batch (at most two batches); Close pushes unused
// IDs back so a clean shutdown loses none.
type Allocator struct {
	c    *Client
	name string
	opts AllocatorOptions

	cur atomic.Pointer[batch]

	mu        sync.Mutex
	next      *batch        // prefetched, not yet current
	fetching  chan struct{} // closed when the running fetch ends; nil if none
	fetchErr  error         // the last fetch's error, returned once by Next
	size      int64         // the adaptive batch size
	closed    bool
	ctx       context.Context // cancelled by Close; bounds background fetches
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	batches   atomic.Int64
	waitFetch atomic.Int64
	// pushedBack counts the unused IDs Close pushed back.
	pushedBack atomic.Int64
}

// batch is a run of IDs taken in one Take. Callers claim IDs by index with
// pos.Add; an index >= total means the batch is used up.
type batch struct {
	ranges  Ranges
	prefix  []int64 // prefix[i]: IDs in ranges[:i]
	total   int64
	low     int64 // claiming this index starts the prefetch
	started time.Time

	// Performance: pos is written by every Next, so it sits on a cache
	// line of its own. Sharing a line with the read-only fields above
	// would make every core re-fetch them after each other core's Add.
	_   [64]byte
	pos atomic.Int64
	_   [56]byte
}

func newBatch(rs Ranges, prefetch float64) *batch {
	b := &batch{ranges: rs, prefix: make([]int64, len(rs)+1)}
	for i, r := range rs {
		b.prefix[i+1] = b.prefix[i] + r.Len()
	}
	b.total = b.prefix[len(rs)]
	b.low = b.total - max(1, int64(float64(b.total)*prefetch))
	return b
}

// id maps a claimed index to its ID. Performance: the common one-range
// case is kept small enough to be inlined into Next; idSlow searches.
func (b *batch) id(k int64) int64 {
	if len(b.ranges) == 1 {
		return b.ranges[0].Start + k
	}
	return b.idSlow(k)
}

func (b *batch) idSlow(k int64) int64 {
	i := sort.Search(len(b.ranges), func(i int) bool { return b.prefix[i+1] > k })
	return b.ranges[i].Start + (k - b.prefix[i])
}

// unclaimed claims every index not yet claimed and returns those IDs.
func (b *batch) unclaimed() Ranges {
	from := b.pos.Swap(b.total)
	var out Ranges
	for i, r := range b.ranges {
		lo, hi := b.prefix[i], b.prefix[i+1]
		if from >= hi {
			continue
		}
		start := r.Start + max(0, from-lo)
		out = append(out, Range{Start: start, End: r.End})
	}
	return out
}

// NewAllocator returns an Allocator for sequence name. It takes no IDs
// until the first Next.
func NewAllocator(c *Client, name string, opts AllocatorOptions) (*Allocator, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Allocator{c: c, name: name, opts: opts, size: opts.InitialBatch, ctx: ctx, cancel: cancel}, nil
}

// Next returns an unused ID. It returns from memory unless the batches are
// used up; then it waits for the fetch from ZooKeeper, bounded by ctx, and
// returns the fetch's error if it failed (the next call tries again).
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	for {
		b := a.cur.Load()
		if b != nil {
			k := b.pos.Add(1) - 1
			if k < b.total {
				if k == b.low {
					a.prefetch()
				}
				return b.id(k), nil
			}
		}
		if err := a.advance(ctx, b); err != nil {
			return 0, err
		}
	}
}

// prefetch starts fetching the next batch unless one is ready or on its way.
func (a *Allocator) prefetch() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == nil && a.fetching == nil && !a.closed {
		a.startFetch()
	}
}

// startFetch runs a Take in the background. The caller holds a.mu.
func (a *Allocator) startFetch() {
	done := make(chan struct{})
	a.fetching = done
	size := a.size
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		got, err := a.c.Take(a.ctx, a.name, size)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			a.fetchErr = fmt.Errorf("allocator for %q: fetch %d IDs: %w", a.name, size, err)
		} else {
			a.next = newBatch(got, a.opts.Prefetch)
			a.batches.Add(1)
		}
		a.fetching = nil
		close(done)
	}()
}

// advance replaces the used-up batch old with the prefetched one, waiting
// for a fetch if none is ready.
func (a *Allocator) advance(ctx context.Context, old *batch) error {
	for {
		a.mu.Lock()
		switch {
		case a.closed:
			a.mu.Unlock()
			return fmt.Errorf("allocator for %q: %w", a.name, ErrClosed)
		case a.cur.Load() != old:
			a.mu.Unlock()
			return nil // another caller advanced already
		case a.next != nil:
			if old != nil {
				a.adapt(time.Since(old.started))
			}
			nb := a.next
			a.next = nil
			nb.started = time.Now()
			a.cur.Store(nb)
			a.mu.Unlock()
			return nil
		case a.fetchErr != nil:
			err := a.fetchErr
			a.fetchErr = nil
			a.mu.Unlock()
			return err
		}
		if a.fetching == nil {
			a.startFetch()
		}
		done := a.fetching
		a.mu.Unlock()
		a.waitFetch.Add(1)
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// adapt resizes the batch from how long the last one lasted. The caller
// holds a.mu.
func (a *Allocator) adapt(lasted time.Duration) {
	switch {
	case lasted < a.opts.BatchDuration/2:
		a.size = min(a.size*2, a.opts.MaxBatch)
	case lasted > a.opts.BatchDuration*2:
		a.size = max(a.size/2, a.opts.MinBatch)
	}
}

// AllocatorStats describe an Allocator's work so far.
type AllocatorStats struct {
	Batches    int64 // batches taken from ZooKeeper
	BatchSize  int64 // the current adaptive batch size
	Waits      int64 // times a Next had to wait for ZooKeeper
	PushedBack int64 // unused IDs Close pushed back
}

// Stats returns the allocator's counters.
func (a *Allocator) Stats() AllocatorStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AllocatorStats{Batches: a.batches.Load(), BatchSize: a.size, Waits: a.waitFetch.Load(), PushedBack: a.pushedBack.Load()}
}

// Close stops the allocator and pushes its unused IDs back to the sequence,
// so that a clean shutdown loses none. Next returns ErrClosed afterwards.
// Close waits for a fetch in flight (cancelling it) and for the push,
// bounded by ctx. If the push fails the unused IDs are lost, never reused,
// and Close returns the error.
func (a *Allocator) Close(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.cancel()
	a.mu.Unlock()
	a.wg.Wait()

	var unused Ranges
	if b := a.cur.Load(); b != nil {
		unused = append(unused, b.unclaimed()...)
	}
	a.mu.Lock()
	if a.next != nil {
		unused = append(unused, a.next.unclaimed()...)
		a.next = nil
	}
	a.mu.Unlock()
	if len(unused) == 0 {
		return nil
	}
	if err := a.c.Push(ctx, a.name, unused); err != nil {
		return fmt.Errorf("allocator for %q: push back %d unused IDs: %w", a.name, unused.Count(), err)
	}
	a.pushedBack.Add(unused.Count())
	return nil
}
