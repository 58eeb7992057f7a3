package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// BenchmarkFirstTake measures what a program meets when it creates a
// sequence and takes its first ID at once: the primary (defaults, on
// MinIO) initialises the registration, the store records it, and the
// take waits for all of it. first-take-p50-ms and first-take-max-ms are
// the creates' times to their first ID.
func BenchmarkFirstTake(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	store := openStore(b, testenv.ObjectStore(b))
	p := startPrimary(b, e, store, nil)
	c := e.client()
	waitUntil(b, time.Minute, "the primary leads", func() bool { return p.Status().Leading })
	var ds durations
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("first-%d-%d", time.Now().UnixNano(), i)
		start := time.Now()
		if _, err := c.Create(ctx, name, sequence.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Take(ctx, name, 1); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(millis(ds.quantile(0.5)), "first-take-p50-ms")
	b.ReportMetric(millis(ds.quantile(1)), "first-take-max-ms")
}
