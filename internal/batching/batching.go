// Package batching is the hi-lo allocator engine of the library's
// sequence.Allocator and the HTTP client's client.Allocator: each wraps an
// Allocator with its own Source (ZooKeeper through sequence.Client, or the
// HTTP API through client.Client) and the same Options, defaults and
// checks. It imports only the standard library, so the HTTP client still
// links no ZooKeeper.
package batching

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("allocator closed")

// Defaults of Options.
const (
	DefaultInitialBatch  = 100
	DefaultMinBatch      = 10
	DefaultPrefetch      = 0.5
	DefaultBatchDuration = 2 * time.Second
)

// Options are an allocator's settings; the allocators' AllocatorOptions
// convert to it field for field.
type Options struct {
	InitialBatch, MinBatch, MaxBatch int64
	Prefetch                         float64
	BatchDuration                    time.Duration
}

// Resolve fills in the defaults of o's zero fields (maxBatch for MaxBatch:
// the allocators' defaults differ there) and checks the result.
func (o Options) Resolve(maxBatch int64) (Options, error) {
	if o.InitialBatch == 0 {
		o.InitialBatch = DefaultInitialBatch
	}
	if o.MinBatch == 0 {
		o.MinBatch = min(DefaultMinBatch, o.InitialBatch)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = max(maxBatch, o.InitialBatch)
	}
	if o.Prefetch == 0 {
		o.Prefetch = DefaultPrefetch
	}
	if o.BatchDuration == 0 {
		o.BatchDuration = DefaultBatchDuration
	}
	switch {
	case o.MinBatch < 1 || o.MinBatch > o.InitialBatch || o.InitialBatch > o.MaxBatch:
		return o, fmt.Errorf("need 1 <= MinBatch (%d) <= InitialBatch (%d) <= MaxBatch (%d)", o.MinBatch, o.InitialBatch, o.MaxBatch)
	case o.Prefetch <= 0 || o.Prefetch > 1:
		return o, fmt.Errorf("the Prefetch fraction %v must be in (0, 1]", o.Prefetch)
	case o.BatchDuration < 0:
		return o, fmt.Errorf("BatchDuration %s is negative", o.BatchDuration)
	}
	return o, nil
}

// Range is an inclusive run of IDs, the shape of sequence.Range and
// client.Range: Convert turns a batch of either into the other.
type Range struct{ Start, End int64 }

// Convert converts a batch of ranges between two range types of Range's
// shape.
func Convert[T, F ~struct{ Start, End int64 }](rs []F) []T {
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = T(r)
	}
	return out
}

// Source is where an Allocator takes its batches and returns unused IDs.
type Source struct {
	// Take takes up to n IDs; an error means it handed none out. Close
	// cancels its ctx.
	Take func(ctx context.Context, n int64) ([]Range, error)
	// Push returns unused IDs; if it fails they are lost, never reused.
	Push func(ctx context.Context, ids []Range) error
}

// Stats describe an Allocator's work so far.
type Stats struct {
	Batches    int64 // batches taken
	BatchSize  int64 // the current adaptive batch size
	Waits      int64 // times a Next had to wait for a batch
	PushedBack int64 // unused IDs Close pushed back
}

// Allocator hands out IDs one at a time from batches of a Source: Next
// claims one from the current batch with one atomic add, and the next
// batch is fetched in the background before the current one runs out, so
// in steady state Next never waits. It is safe for concurrent use.
type Allocator struct {
	src    Source
	label  string // names the allocator in its errors
	opts   Options
	ctx    context.Context // cancelled by Close; bounds the fetches
	cancel context.CancelFunc

	cur atomic.Pointer[batch]

	mu       sync.Mutex
	next     *batch        // prefetched, not yet current
	fetching chan struct{} // closed when the running fetch ends; nil if none
	fetchErr error         // the last fetch's error, returned once by Next
	size     int64         // the adaptive batch size
	closed   bool          // Close began: Next hands out nothing more
	drained  bool          // Close took next: a batch landing now goes back at once
	stats    Stats
}

// New returns an Allocator over src with opts (zero fields take the
// defaults, maxBatch for MaxBatch); label names it in its errors. It takes
// no IDs until the first Next.
func New(opts Options, maxBatch int64, label string, src Source) (*Allocator, error) {
	opts, err := opts.Resolve(maxBatch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Allocator{src: src, label: label, opts: opts, ctx: ctx, cancel: cancel, size: opts.InitialBatch}, nil
}

// batch is a run of IDs taken in one Take. Callers claim IDs by index with
// pos.Add; an index >= total means the batch is used up.
type batch struct {
	ranges  []Range
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

func newBatch(rs []Range, prefetch float64) *batch {
	b := &batch{ranges: rs, prefix: make([]int64, len(rs)+1)}
	for i, r := range rs {
		b.prefix[i+1] = b.prefix[i] + r.End - r.Start + 1
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

// unclaimed claims every index of b (nil: none) not yet claimed and
// returns those IDs and their number.
func (b *batch) unclaimed() (out []Range, n int64) {
	if b == nil {
		return nil, 0
	}
	from := b.pos.Swap(b.total)
	for i, r := range b.ranges {
		if lo := b.prefix[i]; from < b.prefix[i+1] {
			out = append(out, Range{Start: r.Start + max(0, from-lo), End: r.End})
		}
	}
	return out, max(0, b.total-from)
}

// Next returns an unused ID. It returns from memory unless the batches are
// used up; then it waits for the fetch, bounded by ctx, and returns the
// fetch's error if it failed (the next call tries again).
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

// startFetch takes a batch in the background. The caller holds a.mu.
func (a *Allocator) startFetch() {
	done := make(chan struct{})
	a.fetching = done
	size := a.size
	go func() {
		defer close(done)
		got, err := a.src.Take(a.ctx, size)
		a.mu.Lock()
		late := a.drained && err == nil
		switch {
		case err != nil:
			a.fetchErr = fmt.Errorf("%s: fetch %d IDs: %w", a.label, size, err)
		case !late:
			a.next = newBatch(got, a.opts.Prefetch)
		}
		if err == nil {
			a.stats.Batches++
		}
		a.fetching = nil
		a.mu.Unlock()
		if late {
			_ = a.src.Push(context.Background(), got) // lost if it fails, never reused
		}
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
			return fmt.Errorf("%s: %w", a.label, ErrClosed)
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
		a.stats.Waits++
		a.mu.Unlock()
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

// Stats returns the allocator's counters.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.BatchSize = a.size
	return s
}

// Close stops handing out IDs at once and pushes the unused ones back.
// It cancels a fetch in flight and waits for it, bounded by ctx: a batch
// that lands later goes back on its own. If the push fails the unused IDs
// are lost, never reused, and Close returns the error. Calling Close again
// does nothing.
func (a *Allocator) Close(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.cancel()
	unused, n := a.cur.Load().unclaimed()
	done := a.fetching
	a.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	a.mu.Lock()
	a.drained = true
	more, m := a.next.unclaimed()
	a.next = nil
	a.mu.Unlock()
	if unused, n = append(unused, more...), n+m; n == 0 {
		return nil
	}
	if err := a.src.Push(ctx, unused); err != nil {
		return fmt.Errorf("%s: push back %d unused IDs (they are lost, never reused): %w", a.label, n, err)
	}
	a.mu.Lock()
	a.stats.PushedBack += n
	a.mu.Unlock()
	return nil
}
