package seqzk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The root's own znode: the era changes exactly when ZooKeeper's epoch
// does, ZooKeeper's copy of a tombstone is written only while no znode of
// the name exists, and every reader of the root skips the znode.
func TestRootsOwnZnode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	if era, err := c.Meta().ReadEra(ctx); err != nil || era.Exists || era.Value != 0 {
		t.Fatalf("era of a new root: %+v, %v", era, err)
	}
	epoch, err := c.Meta().CurrentEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	era, err := c.Meta().CurrentEra(ctx, epoch)
	if err != nil || era.Value == 0 || era.Epoch != epoch {
		t.Fatalf("era: %+v, %v", era, err)
	}
	if again, err := c.Meta().CurrentEra(ctx, epoch); err != nil || again.Value != era.Value {
		t.Fatalf("the era in the same epoch: %+v, %v; want %+v", again, err, era)
	}
	if next, err := c.Meta().CurrentEra(ctx, epoch+1); err != nil || next.Value == era.Value || next.Epoch != epoch+1 {
		t.Fatalf("the era in a new epoch: %+v, %v", next, err)
	}
	if !era.Lost(0, epoch+1) || !era.Lost(era.Value-1, epoch) || era.Lost(era.Value, epoch) {
		t.Fatal("Era.Lost does not say what it should")
	}

	// Deletion records: none, then one, raised and never lowered.
	if d, err := c.Meta().ReadDeletion(ctx, "x"); err != nil || d.Exists {
		t.Fatalf("deletion record of a name never deleted: %+v, %v", d, err)
	}
	if err := c.Meta().Bury(ctx, "x", 50); err != nil {
		t.Fatal(err)
	}
	if err := c.Meta().Bury(ctx, "x", 40); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Meta().ReadDeletion(ctx, "x"); err != nil || !d.Exists || d.Ceiling != 50 {
		t.Fatalf("deletion record: %+v, %v; want 50", d, err)
	}
	// Never while a znode of the name exists.
	if err := c.Register(ctx, "live", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Meta().Bury(ctx, "live", 10); !errors.Is(err, seqzk.ErrExists) {
		t.Fatalf("deletion record of a live name: %v; want ErrExists", err)
	}
	if names, err := c.Names(ctx); err != nil || len(names) != 1 || names[0] != "live" {
		t.Fatalf("Names: %q, %v; want only live (not %s)", names, err, seqzk.MetaName)
	}
	if all, err := c.Meta().Deletions(ctx); err != nil || len(all) != 1 || all["x"].Ceiling != 50 {
		t.Fatalf("Deletions: %+v, %v", all, err)
	}
	// Corrupt data is an error, never "no record".
	if _, err := c.ZK().Session().Set(ctx, c.Meta().Path()+"/x", []byte("ceiling 50"), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Meta().ReadDeletion(ctx, "x"); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("a corrupt deletion record: %v; want ErrCorrupt", err)
	}
}

// An initialisation and a restore are guarded by the deletion record as
// the caller read it: a delete that happened since wins.
func TestBirthsAreGuardedByTheDeletionRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client(seqzk.Options{})
	ctx := context.Background()
	if err := c.Meta().EnsureMeta(ctx); err != nil {
		t.Fatal(err)
	}
	guard, err := c.Meta().ReadDeletion(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "r", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	// The registration is deleted (a record written) and registered again
	// after the primary read the guard.
	h, err := c.Keeper().Hold(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keeper().Commit(ctx, h, seqzk.Change{Dead: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "r", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keeper().Initialise(ctx, "r", 1, 100, guard); !errors.Is(err, seqzk.ErrChangedMeanwhile) {
		t.Fatalf("initialisation under a stale guard: %v; want ErrChangedMeanwhile", err)
	}
	fresh, err := c.Meta().ReadDeletion(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Keeper().Initialise(ctx, "r", 2, 100, fresh); err != nil || st.Next != 2 {
		t.Fatalf("initialisation under the current guard: %+v, %v", st, err)
	}

	// A restore prepared before a delete: not created.
	st := state.State{Name: "q", Start: 1, Next: 500, Ceiling: 600, End: state.MaxID}
	before, err := c.Meta().ReadDeletion(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Meta().Bury(ctx, "q", 700); err != nil { // deleted meanwhile
		t.Fatal(err)
	}
	epoch, _ := c.Meta().CurrentEpoch(ctx)
	if n, _, err := c.Keeper().Restore(ctx, []seqzk.Restoration{{State: st, Guard: before}}, epoch); err != nil || len(n) != 0 {
		t.Fatalf("restore under a stale guard: created %v, %v; want none", n, err)
	}
	if ok, _, _ := c.ZK().Session().Exists(ctx, c.Path("q")); ok {
		t.Fatal("q was created against its deletion")
	}
}

// A root's election path and marker are claimed for it; another root is
// refused, naming the root that holds them.
func TestClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.client(seqzk.Options{})
	b, err := seqzk.NewClient(a.ZK(), seqzk.Options{Root: e.root + "-b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := e.root + "-election"
	if err := a.Operator().Claim(ctx, p, "election_path"); err != nil {
		t.Fatal(err)
	}
	if err := a.Operator().Claim(ctx, p, "election_path"); err != nil {
		t.Fatalf("claimed again by its root: %v", err)
	}
	if err := b.Operator().Claim(ctx, p, "election_path"); !errors.Is(err, seqzk.ErrClaimed) || !strings.Contains(err.Error(), e.root) {
		t.Fatalf("claimed by another root: %v; want ErrClaimed naming %s", err, e.root)
	}
	q := e.root + "-foreign"
	if _, err := a.ZK().Session().Create(ctx, q, []byte("someone else's"), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Operator().Claim(ctx, q, "marker_path"); !errors.Is(err, seqzk.ErrClaimed) {
		t.Fatalf("a znode holding other data: %v; want ErrClaimed", err)
	}
}
