package primary_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence/state"
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

// A birth read back in another ZooKeeper epoch is not stamped at its
// floor: ZooKeeper restored from a copy taken after the initialisation
// and before the stamp brings the birth back after IDs went out of it in
// the lost history. Confirm refuses it, and the primary decides again from
// the store (above its ceiling).
func TestABirthBackFromACopyIsNotStampedAtItsFloor(t *testing.T) {
	testenv.ParallelUnderShort(t)
	ens := testenv.StartEnsemble(t, 1)
	ctx := context.Background()
	r := &fileRig{t: t, root: "/birth/all-sequences"}
	boss := r.client(ens.Servers(), 30*time.Second) // stands in for the primary
	if err := boss.ZK().EnsurePath(ctx, r.root); err != nil {
		t.Fatal(err)
	}
	if err := boss.Register(ctx, "x", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := boss.Meta().EnsureMeta(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := boss.Meta().ReadDeletion(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	born, err := boss.Keeper().Initialise(ctx, "x", 1, 1000, d)
	if err != nil || !seqzk.Unconfirmed(born) {
		t.Fatalf("initialised: %+v, %v; want an unconfirmed birth", born, err)
	}
	copyDir := ens.Snapshot(t, 0) // a restart: a leader election
	worker := r.client(ens.Servers(), 30*time.Second)
	waitFor(t, "sessions", func() bool { return boss.ZK().HasSession() && worker.ZK().HasSession() })
	if _, err := boss.Keeper().Confirm(ctx, "x", born); !errors.Is(err, seqzk.ErrChangedMeanwhile) {
		t.Fatalf("confirm of the birth after a leader election: %v; want ErrChangedMeanwhile", err)
	}
	// The lost history: the primary stamps it from the store, as after
	// any election (above the ceiling the store holds), and workers take.
	if _, err := boss.Keeper().Restamp(ctx, "x", 0, 1001, 2000, false); err != nil {
		t.Fatal(err)
	}
	seen := ids{}
	got, err := worker.Take(ctx, "x", 10)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "the lost history", got)

	ens.Rollback(t, 0, copyDir)
	now := r.client(ens.Servers(), 10*time.Second)
	if _, err := now.Keeper().Confirm(ctx, "x", born); !errors.Is(err, seqzk.ErrChangedMeanwhile) {
		t.Fatalf("confirm of the birth back from the copy: %v; want ErrChangedMeanwhile", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if got, err := now.Take(tctx, "x", 10); err == nil {
		seen.add(t, "after the rollback", got)
		t.Fatalf("took %v from the birth back from the copy; want nothing until the primary stamps it above the store", got)
	}
}

// A bounded name whose whole space went out is born exhausted each time
// it is created again: its floor, above its last tombstone, is past its
// end, further than ZooKeeper's state can show (next stops at end+1). The
// store must still tell each incarnation from the deaths before it: every
// birth reads as live, and every delete ends the birth it deleted, also one
// that overtakes the store's record of the birth. Otherwise a ZooKeeper
// loss forgets the live name, or brings the deleted one back.
func TestAnExhaustedNameBornAgainAndDeleted(t *testing.T) {
	testenv.ParallelUnderShort(t)
	dir := t.TempDir()
	_, _, c, g := gatedPrimary(t, dir, nil)
	ctx := context.Background()
	store := fileStore(t, dir)
	reg := seqzk.Registration{Start: 1, End: 20}
	if err := c.Register(ctx, "tiny", reg); err != nil {
		t.Fatal(err)
	}
	seen := ids{}
	for n := int64(0); n < 20; {
		waitFor(t, "a take from tiny", func() bool {
			got, err := c.Take(ctx, "tiny", 5)
			if err != nil {
				return false
			}
			seen.add(t, "tiny", got)
			n += got.Count()
			return true
		})
	}
	record := func() persist.Record {
		t.Helper()
		rec, err := store.Get(ctx, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	deleted := func(when string) {
		t.Helper()
		rec := record()
		d, err := c.Meta().ReadDeletion(ctx, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Deleted() || d.Ceiling < rec.Live {
			t.Fatalf("%s: the store holds %+v and ZooKeeper's deletion record ends at %d; want a tombstone that ends the birth (Live %d)", when, rec, d.Ceiling, rec.Live)
		}
	}
	for round := 1; round <= 3; round++ {
		if _, err := c.Operator().Delete(ctx, "tiny", store); err != nil {
			t.Fatal(err)
		}
		deleted(fmt.Sprintf("delete %d", round))
		if err := c.Register(ctx, "tiny", reg); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the birth stamped", func() bool {
			st, _, err := c.Inspect(ctx, "tiny")
			return err == nil && st.Validated() && !seqzk.Unconfirmed(st)
		})
		if rec := record(); rec.Deleted() {
			t.Fatalf("birth %d: ZooKeeper holds tiny, the store holds it deleted: %+v", round, rec)
		}
		if got, err := c.Take(ctx, "tiny", 1); !errors.Is(err, state.ErrExhausted) {
			t.Fatalf("take from birth %d: %v, %v; want the space exhausted", round, got, err)
		}
	}

	// bornHeld deletes the name, registers it again and returns the
	// primary's store write of the birth, held.
	bornHeld := func() *gate {
		t.Helper()
		if _, err := c.Operator().Delete(ctx, "tiny", store); err != nil {
			t.Fatal(err)
		}
		held := g.arm()
		if err := c.Register(ctx, "tiny", reg); err != nil {
			held.fail(t, err)
		}
		for {
			waitGate(t, "a store write of the birth", held.hit)
			st, _, err := c.Inspect(ctx, "tiny")
			if err != nil {
				held.fail(t, err)
			}
			if seqzk.Unconfirmed(st) {
				return held // the write of the birth itself
			}
			next := g.arm() // its ceiling first
			close(held.release)
			held = next
		}
	}

	// The store's write of the birth fails: the primary's next sweep
	// records the birth before it stamps it, from ZooKeeper's state.
	bornHeld().drop()
	waitFor(t, "the birth stamped after its record failed", func() bool {
		st, _, err := c.Inspect(ctx, "tiny")
		return err == nil && st.Validated() && !seqzk.Unconfirmed(st)
	})
	if rec := record(); rec.Deleted() {
		t.Fatalf("a birth recorded by the next sweep: ZooKeeper holds tiny, the store holds it deleted: %+v", rec)
	}

	// A delete overtakes the primary between the birth and the store's
	// record of it: the write is held, the delete runs, the write lands.
	held := bornHeld()
	if _, err := c.Operator().Delete(ctx, "tiny", store); err != nil {
		held.fail(t, err)
	}
	before := record()
	close(held.release)
	waitFor(t, "the store's record of the birth", func() bool { return record().Live > before.Live })
	deleted("a delete that overtook the store's record of the birth")
}
