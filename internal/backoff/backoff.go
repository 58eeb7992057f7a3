// Package backoff is the one retry delay policy of seqkeeper: exponential
// growth from Initial to Max, with jitter so that contenders that failed
// together do not retry together.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy spaces retries. The zero Policy waits nothing.
type Policy struct {
	// Initial is the delay before the first retry (attempt 0).
	Initial time.Duration
	// Max bounds the delay.
	Max time.Duration
}

// Delay is how long to wait before retry number attempt (counting from 0):
// Initial doubled attempt times, capped at Max, then drawn uniformly from
// its upper half ("equal jitter": at least half the nominal delay, so that
// waits keep growing, while contenders spread out).
func (p Policy) Delay(attempt int) time.Duration {
	if p.Initial <= 0 {
		return 0
	}
	d := p.Max
	if attempt < 62 && p.Initial<<attempt > 0 && p.Initial<<attempt < p.Max {
		d = p.Initial << attempt
	}
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d-d/2+1)
}

// Wait sleeps Delay(attempt), or returns the cause of ctx's end first.
func (p Policy) Wait(ctx context.Context, attempt int) error {
	return Sleep(ctx, p.Delay(attempt))
}

// Sleep waits d, or returns the cause of ctx's end first.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
