package seqzk_test

import (
	"context"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
)

// Regression (found by the model test): ZooKeeper is rolled back to an
// older copy, so a sequence's state shows a next, and recycled IDs, from
// before IDs were handed out; an operator advances it before the primary
// has revalidated it. The advance moved it above the store's floor (safe),
// but reported the state it replaced as it read it, so 'advance' claimed
// to have skipped IDs that clients held and might push back, and the
// model's oracle then flagged their legitimate reuse. The replaced state
// of an untrusted read is now what revalidation would make of it.
func TestAdvanceOfAnUntrustedStateSkipsNothingBelowTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	e.create(c, "rolled", seqzk.Registration{}, 100)

	// The state as an old copy of ZooKeeper holds it: validated in an
	// earlier ZooKeeper epoch, next 20, IDs 5:9 recycled.
	path := e.root + "/rolled"
	old := state.State{Start: 1, Next: 20, Ceiling: 100, End: state.MaxID, ZKEpoch: c.Epoch() - 1, Marker: "h-00000000000000bb", Recycled: state.Ranges{{Start: 5, End: 9}}}
	if _, err := c.ZK().Set(ctx, path, old.Encode(), -1); err != nil {
		t.Fatal(err)
	}

	const storedFloor = 101 // the store covers up to 100: IDs up to 100 may be out
	replaced, advanced, err := c.Advance(ctx, "rolled", 150, storedFloor, 300)
	if err != nil {
		t.Fatal(err)
	}
	if advanced.Next != 150 || len(advanced.Recycled) != 0 {
		t.Fatalf("advanced to %+v; want next 150 and no recycled IDs", advanced)
	}
	if replaced.Next != storedFloor || len(replaced.Recycled) != 0 {
		t.Fatalf("replaced state reported as next %d, recycled %v; want next %d (the stored floor) and no recycled IDs: below it, IDs may have been handed out since the copy", replaced.Next, replaced.Recycled, storedFloor)
	}

	// A trusted state is reported as it was.
	if _, err := c.Take(ctx, "rolled", 3); err != nil { // 150:152
		t.Fatal(err)
	}
	if err := c.Push(ctx, "rolled", state.Ranges{{Start: 151, End: 152}}); err != nil {
		t.Fatal(err)
	}
	replaced, _, err = c.Advance(ctx, "rolled", 200, storedFloor, 300)
	if err != nil {
		t.Fatal(err)
	}
	if replaced.Next != 153 || len(replaced.Recycled) != 1 {
		t.Fatalf("trusted replaced state reported as next %d, recycled %v; want next 153, recycled 151:152", replaced.Next, replaced.Recycled)
	}
}
