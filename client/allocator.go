package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/batching"
)

// ErrClosed is returned by an Allocator's Next after Close.
var ErrClosed = errors.New("allocator closed")

// AllocatorOptions configure an Allocator; the zero value takes the
// defaults, which are sequence.Allocator's but for MaxBatch.
type AllocatorOptions struct {
	// InitialBatch is the size of the first batch (default 100); MinBatch
	// and MaxBatch bound the adaptive batch (defaults 10 and 10,000, the
	// most a replica hands out per request by default).
	InitialBatch, MinBatch, MaxBatch int64
	// Prefetch is the fraction of a batch still unused when the next one
	// is fetched in the background, in (0, 1] (default 0.5).
	Prefetch float64
	// BatchDuration is how long a batch should last (default 2 s): the
	// batch doubles when one lasts less than half of it and halves when
	// one lasts more than twice as long.
	BatchDuration time.Duration
}

func (o *AllocatorOptions) setDefaults() error {
	r, err := batching.Options(*o).Resolve(10_000) // a replica's limit of count
	if err != nil {
		return fmt.Errorf("client: allocator: %w", err)
	}
	*o = AllocatorOptions(r)
	return nil
}

// Allocator hands out IDs of one sequence one at a time from memory (the
// hi-lo pattern), taking batches through a Client and fetching the next
// batch in the background before the current one runs out. Close pushes
// the unused IDs back. It is safe for concurrent use. IDs are unique, not
// globally ordered.
type Allocator struct {
	c    *Client
	name string
	opts AllocatorOptions

	mu       sync.Mutex
	ids      Ranges // unused IDs, in order
	batch    int64  // the size of the next batch
	started  time.Time
	fetching chan struct{} // closed when the fetch in flight ends; nil: none
	err      error         // the last fetch's error, for Next to return
	closed   bool
	stats    AllocatorStats
}

// AllocatorStats count an Allocator's work.
type AllocatorStats struct {
	Batches    int64 // batches taken
	BatchSize  int64 // the size of the next batch
	Waits      int64 // Next calls that waited for a batch
	PushedBack int64 // IDs pushed back by Close
}

// NewAllocator returns an Allocator of sequence name. It takes nothing
// until the first Next.
func NewAllocator(c *Client, name string, opts AllocatorOptions) (*Allocator, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Allocator{c: c, name: name, opts: opts, batch: opts.InitialBatch}, nil
}

// Next returns an ID of the sequence, from memory when the current batch
// has one, else after fetching a batch (bounded by ctx).
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	a.mu.Lock()
	for {
		if a.closed {
			a.mu.Unlock()
			return 0, ErrClosed
		}
		if len(a.ids) > 0 {
			id := a.ids[0].Start
			if a.ids[0].Start == a.ids[0].End {
				a.ids = a.ids[1:]
			} else {
				a.ids[0].Start++
			}
			if a.ids.Count() <= int64(float64(a.batch)*a.opts.Prefetch) {
				a.fetchLocked()
			}
			a.mu.Unlock()
			return id, nil
		}
		if err := a.err; err != nil && a.fetching == nil {
			a.err = nil
			a.mu.Unlock()
			return 0, err
		}
		a.fetchLocked()
		done := a.fetching
		a.stats.Waits++
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-done:
		}
		a.mu.Lock()
	}
}

// fetchLocked starts a batch fetch unless one is in flight; a.mu held.
func (a *Allocator) fetchLocked() {
	if a.fetching != nil || a.closed {
		return
	}
	done := make(chan struct{})
	a.fetching = done
	n := a.batch
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), a.c.opts.RetryFor+a.c.opts.RequestTimeout)
		got, err := a.c.Take(ctx, a.name, n)
		cancel()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.fetching = nil
		if err != nil {
			a.err = err
			return
		}
		a.stats.Batches++
		a.adapt()
		if a.closed {
			// Close ran meanwhile: these go back too.
			a.pushBackLater(got)
			return
		}
		a.ids = append(a.ids, got...)
	}()
}

// adapt sizes the next batch from how long the last one lasted; a.mu held.
func (a *Allocator) adapt() {
	now := time.Now()
	if !a.started.IsZero() {
		switch lasted := now.Sub(a.started); {
		case lasted < a.opts.BatchDuration/2:
			a.batch = min(a.batch*2, a.opts.MaxBatch)
		case lasted > a.opts.BatchDuration*2:
			a.batch = max(a.batch/2, a.opts.MinBatch)
		}
	}
	a.started = now
	a.stats.BatchSize = a.batch
}

// pushBackLater returns IDs of a fetch that landed after Close; a.mu held.
func (a *Allocator) pushBackLater(ids Ranges) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.c.opts.RetryFor)
		defer cancel()
		_, _ = a.c.Recycle(ctx, a.name, ids, NewPushKey()) // lost if it fails, never reused
	}()
}

// Stats returns the counters.
func (a *Allocator) Stats() AllocatorStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.BatchSize = a.batch
	return s
}

// Close stops handing out IDs and pushes the unused ones back, with an
// idempotency key, so a retry after a lost answer is safe. IDs whose push
// fails are lost, never reused. Calling Close again does nothing.
func (a *Allocator) Close(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	ids := a.ids
	a.ids = nil
	done := a.fetching
	a.mu.Unlock()
	if done != nil {
		select { // a batch in flight is pushed back by its fetch
		case <-done:
		case <-ctx.Done():
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := a.c.Recycle(ctx, a.name, ids, NewPushKey()); err != nil {
		return fmt.Errorf("client: push back %d unused IDs of %q (they are lost, never reused): %w", ids.Count(), a.name, err)
	}
	a.mu.Lock()
	a.stats.PushedBack += ids.Count()
	a.mu.Unlock()
	return nil
}
