package primary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// No ID is handed out of a new incarnation before the store holds its
// birth: a primary that initialised a registration and stopped before the
// store recorded it leaves a state no client takes from, and whoever next
// decides on it (its next sweep, or a successor) has the store record the
// birth with the ceiling before stamping it. So the name a worker took
// from is always one a ZooKeeper loss restores.
func TestNoTakeBeforeTheStoreHoldsTheBirth(t *testing.T) {
	testenv.ParallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, g := gatedPrimary(t, dir, nil)
	ctx := context.Background()
	ceiling := g.arm()
	if err := c.Register(ctx, "fresh", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	waitGate(t, "the birth's ceiling written to the store", ceiling.hit)
	birth := g.arm()
	close(ceiling.release)
	waitGate(t, "the birth written to the store", birth.hit)

	st, _, err := c.Inspect(ctx, "fresh")
	if err != nil {
		birth.fail(t, err)
	}
	if !seqzk.Unconfirmed(st) {
		birth.fail(t, errors.New("the registration is not initialised-and-unconfirmed while the store write of its birth is held"))
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	got, err := c.Take(tctx, "fresh", 5)
	cancel()
	if err == nil {
		birth.fail(t, errors.New("a take got IDs "+got.String()+" before the store recorded the birth"))
	}

	// The primary stops before the write lands: the store has the
	// ceiling and not the birth. Its next decision records the birth first.
	birth.drop()
	seen := ids{}
	waitFor(t, "a take after the birth is stored", func() bool {
		got, err := c.Take(ctx, "fresh", 5)
		if err != nil {
			return false
		}
		seen.add(t, "first", got)
		return true
	})
	rec, err := fileStore(t, dir).Get(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Live == 0 || rec.Deleted() {
		t.Fatalf("store record after the first take: %+v; want the birth recorded (Live > 0, not deleted)", rec)
	}

	// ZooKeeper loses the sequence: the store brings it back above
	// every ID it handed out.
	loseZnodes(t, c, "fresh")
	waitFor(t, "the sequence restored", func() bool {
		got, err := c.Take(ctx, "fresh", 5)
		if err != nil {
			return false
		}
		seen.add(t, "restored", got)
		return true
	})
}
