package primary_test

// States written by legacy counters and by releases without markers.

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Legacy 8-byte counters have no stamp, so a restore of ZooKeeper from an
// older copy takes them back, and every ID taken after the copy would be
// handed out again. After a leader election the primary moves a counter
// last written before it up to the mark the store holds.
func TestRollbackOfALegacyCounter(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	r := newFileRig(t, ens.Servers(), "/test")
	w := r.client(ens.Servers(), 10*time.Second)
	ctx := context.Background()
	if _, err := w.ZK().Session().Create(context.Background(), r.root+"/old", binary.BigEndian.AppendUint64(nil, 7), 0); err != nil {
		t.Fatal(err)
	}
	issued := ids{}
	take := func(n int, who string) {
		t.Helper()
		for i := 0; i < n; i++ {
			got, err := w.Take(ctx, "old", 3)
			if err != nil {
				t.Fatal(err)
			}
			issued.add(t, who, got)
			time.Sleep(10 * time.Millisecond)
		}
	}
	take(3, "before the copy")
	saved := ens.Snapshot(t, 0)
	take(5, "the lost history")
	var last int64
	for id := range issued {
		last = max(last, id)
	}
	var seen string // what the store held at the last look, for a failure
	defer func() {
		if t.Failed() {
			t.Logf("the store's record of old at the last look: %s; the highest ID taken: %d", seen, last)
		}
	}()
	waitFor(t, "a mark above the lost history's IDs", func() bool {
		rec, err := r.store.Get(ctx, "old")
		seen = fmt.Sprintf("%+v (error %v)", rec, err)
		return err == nil && rec.Ceiling >= last
	})
	ens.Rollback(t, 0, saved)
	waitFor(t, "the counter moved up past the lost history", func() bool {
		st, _, err := w.Describe(ctx, "old")
		return err == nil && st.Next >= last
	})
	take(5, "after the rollback")
}

// A sequence validated by a release without markers (a zkepoch line, no
// marker) is refused by clients of this one; the primary must stamp it
// again, or every such sequence stalls after an upgrade.
func TestStateWithoutAMarkerIsStampedAgain(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	r := newFileRig(t, z.Servers, z.Root)
	w := r.client(z.Servers, 10*time.Second)
	ctx := context.Background()
	epoch, err := w.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := state.State{Start: 1, Next: 51, Ceiling: 1000, End: state.MaxID, ZKEpoch: epoch}
	if _, err := w.ZK().Session().Create(context.Background(), r.root+"/old", old.Encode(), 0); err != nil {
		t.Fatal(err)
	}
	got, err := w.Take(ctx, "old", 5)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Start <= 1000 {
		t.Fatalf("took %s: at or below the old ceiling 1000, which the store never covered", got)
	}
}
