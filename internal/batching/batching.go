// Package batching holds the settings of the hi-lo allocators: the
// library's (sequence.Allocator) and the HTTP client's (client.Allocator)
// take the same options with the same defaults and checks. It imports
// only the standard library, so the HTTP client still links no ZooKeeper.
package batching

import (
	"fmt"
	"time"
)

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
