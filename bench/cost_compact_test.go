package bench

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/persist"
)

// reportCompaction compacts the store's log once, as the primary does every
// CompactInterval (or every CompactSegments store writes, whichever comes
// first), counts the requests it takes, and reports them per day at that
// pace.
func reportCompaction(b *testing.B, store *persist.Store, writesPerDay float64) {
	ctx := context.Background()
	epoch, _, err := store.Epoch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	before := store.Requests()
	res, err := store.Compact(ctx, epoch)
	if err != nil {
		b.Fatal(err)
	}
	after := store.Requests()
	perDay := max(float64(24*time.Hour)/float64(config.DefaultCompactInterval), writesPerDay/float64(config.DefaultCompactSegments))
	b.ReportMetric(float64(after.Puts-before.Puts)*perDay, "compaction-PUT/day")
	b.ReportMetric(float64(after.Gets-before.Gets)*perDay, "compaction-GET/day")
	b.ReportMetric(float64(res.Buckets), "buckets/compaction")
}
