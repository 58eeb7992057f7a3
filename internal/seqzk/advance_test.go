package seqzk_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
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

// Regression (found by the model test, the same seed again): the
// operator's client had not written since ZooKeeper elected a new leader,
// so the epoch it knew was the old one and the state stamped in it looked
// trusted; its write landed in the new epoch, and the advance stamped
// again from the stored floor, but reported the stale state as the one it
// replaced. A replaced state whose write landed in another epoch is now
// reported as revalidation would make it.
func TestAdvanceAfterAnUnseenElectionSkipsNothingBelowTheStore(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	const root = "/all-sequences"
	c := dialClient(t, ens.Servers(), root, 30*time.Second)
	if err := c.ZK().EnsurePath(ctx, root); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "e", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revalidate(ctx, "e", 0, 100); err != nil { // stamped in epoch E, which c knows
		t.Fatal(err)
	}
	if _, err := c.Take(ctx, "e", 19); err != nil { // next 20
		t.Fatal(err)
	}
	before := c.Epoch()
	ens.Stop(0) // a new leader: epoch E+1, which c has not seen
	if err := ens.Start(0); err != nil {
		t.Fatal(err)
	}
	if err := ens.WaitServing(0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const storedFloor = 101
	replaced, advanced, err := c.Advance(ctx, "e", 150, storedFloor, 300)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch() == before {
		t.Fatalf("ZooKeeper's epoch is still %d after a restart: the test shows nothing", before)
	}
	if advanced.Next != 150 || advanced.ZKEpoch != c.Epoch() {
		t.Fatalf("advanced to %+v; want next 150 stamped in epoch %d", advanced, c.Epoch())
	}
	if replaced.Next != storedFloor {
		t.Fatalf("replaced state reported with next %d; want %d (the stored floor): it was stamped in epoch %d, not the current %d", replaced.Next, storedFloor, before, c.Epoch())
	}
}
