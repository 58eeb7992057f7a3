package client

import (
	"context"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/batching"
)

// ErrClosed is returned by an Allocator's Next after Close.
var ErrClosed = batching.ErrClosed

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

// Allocator hands out IDs of one sequence one at a time from memory (the
// hi-lo pattern), taking batches through a Client and fetching the next
// batch in the background before the current one runs out. Close pushes
// the unused IDs back. It is safe for concurrent use. IDs are unique, not
// globally ordered.
type Allocator struct{ e *batching.Allocator }

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
	const maxBatch = 10_000 // a replica's limit of count
	e, err := batching.New(batching.Options(opts), maxBatch, fmt.Sprintf("client: allocator for %q", name), batching.Source{
		Take: func(ctx context.Context, n int64) ([]batching.Range, error) {
			// Close does not cancel a take in flight: its batch goes back.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.RetryFor+c.opts.RequestTimeout)
			defer cancel()
			got, err := c.Take(ctx, name, n)
			return batching.Convert[batching.Range](got), err
		},
		Push: func(ctx context.Context, ids []batching.Range) error {
			_, err := c.Recycle(ctx, name, batching.Convert[Range](ids), NewPushKey())
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return &Allocator{e}, nil
}

// Next returns an ID of the sequence, from memory when the current batch
// has one, else after fetching a batch (bounded by ctx).
func (a *Allocator) Next(ctx context.Context) (int64, error) { return a.e.Next(ctx) }

// Stats returns the counters.
func (a *Allocator) Stats() AllocatorStats { return AllocatorStats(a.e.Stats()) }

// Close stops handing out IDs and pushes the unused ones back, with an
// idempotency key, so a retry after a lost answer is safe. IDs whose push
// fails are lost, never reused. Calling Close again does nothing.
func (a *Allocator) Close(ctx context.Context) error { return a.e.Close(ctx) }
