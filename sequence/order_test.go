package sequence_test

import (
	"context"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The order docs/guarantees.md promises: within a sequence with no pushes
// and no windows, a take that starts after another returned gets higher
// IDs, whichever client made either, and a revalidation (what every
// ZooKeeper election brings) only moves it up. A push breaks it, as
// documented: recycled IDs go out first.
func TestTakesIncreaseWithoutPushesOrWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("ordered", seqzk.Registration{}, 100_000)
	clients := []*sequence.Client{e.client(sequence.Options{}), e.client(sequence.Options{}), e.client(sequence.Options{})}
	ctx := context.Background()
	var last int64
	for i := range 60 {
		if i == 30 { // an election: the primary revalidates from above
			if _, err := e.admin().Keeper().Revalidate(ctx, "ordered", last+1000, last+50_000); err != nil {
				t.Fatal(err)
			}
		}
		got, err := clients[(i*7)%len(clients)].Take(ctx, "ordered", int64(1+i%5))
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Start <= last {
			t.Fatalf("take %d returned %v, not above %d handed out by an earlier take", i, got, last)
		}
		last = got[len(got)-1].End
	}
	if err := clients[0].Push(ctx, "ordered", sequence.Ranges{{Start: last, End: last}}); err != nil {
		t.Fatal(err)
	}
	if got, err := clients[1].Take(ctx, "ordered", 1); err != nil || got[0].Start != last {
		t.Fatalf("after a push of %d, took %v, %v; want the pushed ID first", last, got, err)
	}
}
