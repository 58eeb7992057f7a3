package sequence

import (
	"context"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/batching"
)

// ErrClosed is returned by an Allocator's Next after Close.
var ErrClosed = batching.ErrClosed

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
type Allocator struct{ e *batching.Allocator }

// AllocatorStats describe an Allocator's work so far.
type AllocatorStats struct {
	Batches    int64 // batches taken from ZooKeeper
	BatchSize  int64 // the current adaptive batch size
	Waits      int64 // times a Next had to wait for ZooKeeper
	PushedBack int64 // unused IDs Close pushed back
}

// NewAllocator returns an Allocator for sequence name. It takes no IDs
// until the first Next.
func NewAllocator(c *Client, name string, opts AllocatorOptions) (*Allocator, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	e, err := batching.New(batching.Options(opts), DefaultMaxBatch, fmt.Sprintf("allocator for %q", name), batching.Source{
		Take: func(ctx context.Context, n int64) ([]batching.Range, error) {
			got, err := c.Take(ctx, name, n)
			return batching.Convert[batching.Range](got), err
		},
		Push: func(ctx context.Context, ids []batching.Range) error {
			return c.Push(ctx, name, batching.Convert[Range](ids))
		},
	})
	if err != nil {
		return nil, err
	}
	return &Allocator{e}, nil
}

// Next returns an unused ID. It returns from memory unless the batches are
// used up; then it waits for the fetch from ZooKeeper, bounded by ctx, and
// returns the fetch's error if it failed (the next call tries again).
func (a *Allocator) Next(ctx context.Context) (int64, error) { return a.e.Next(ctx) }

// Stats returns the allocator's counters.
func (a *Allocator) Stats() AllocatorStats { return AllocatorStats(a.e.Stats()) }

// Close stops the allocator and pushes its unused IDs back to the sequence,
// so that a clean shutdown loses none. Next returns ErrClosed afterwards.
// Close waits for a fetch in flight (cancelling it) and for the push,
// bounded by ctx. If the push fails the unused IDs are lost, never reused,
// and Close returns the error.
func (a *Allocator) Close(ctx context.Context) error { return a.e.Close(ctx) }
