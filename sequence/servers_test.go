package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// A sequence whose create returned through one ZooKeeper server exists for
// clients connected to the others: a server that has not applied the
// create yet is synced with the leader before any client answers
// ErrUnknownSequence. The creator talks to the leader, which answers a
// write as soon as a quorum has it, while the followers may apply it a
// moment later; the take, the describe and the delete each ask a follower
// right after the create returned.
func TestCreatedThroughOneServerExistsOnTheOthers(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsemble(t, 3)
	ctx := context.Background()
	leader, err := ens.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const root = "/all-sequences"
	on := func(i int) *sequence.Client {
		c, err := sequence.NewClient(testenv.Connect(t, []string{ens.Addr(i)}, 10*time.Second), sequence.Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The creator also stands in for the primary, which initialises what
	// is created.
	creator, err := seqzk.NewClient(testenv.Connect(t, []string{ens.Addr(leader)}, 10*time.Second), seqzk.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	taker, other := on((leader+1)%3), on((leader+2)%3)
	b, err := persist.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, err := persist.NewStore(b, persist.StoreOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}

	n := 1000
	if testing.Short() {
		n = 100
	}
	// Eight creators at once, each creating and using its own names one
	// after another: a busier leader, followers further behind.
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && !t.Failed(); i += workers {
				if err := createThenUse(ctx, creator, taker, other, store, i); err != nil {
					t.Errorf("%v (%d of %d)", err, i+1, n)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ts, ds := taker.Stats().Syncs, other.Stats().Syncs
	t.Logf("the follower had not applied the create yet (found no znode, synced, then found it) for %d of %d takes and %d of %d describes and deletes", ts, n, ds, n)

	// Reads that find their znode never sync; a name nobody created is
	// unknown after one.
	if _, _, err := other.Describe(ctx, "take-0"); err != nil || other.Stats().Syncs != ds {
		t.Fatalf("describe of an existing name: %v, %d syncs; want nil and no sync", err, other.Stats().Syncs-ds)
	}
	if _, err := taker.Take(ctx, "never-created", 1); !errors.Is(err, sequence.ErrUnknownSequence) || taker.Stats().Syncs != ts+1 {
		t.Fatalf("take of a name nobody created: %v after %d syncs; want ErrUnknownSequence after 1", err, taker.Stats().Syncs-ts)
	}
}

// createThenUse creates take-i through creator and takes from it through
// taker at once, while creator initialises it as the primary would; and
// creates other-i and describes it through other, or deletes it (one i
// in ten: a delete writes to the store).
func createThenUse(ctx context.Context, creator *seqzk.Client, taker, other *sequence.Client, store *persist.Store, i int) error {
	name := fmt.Sprintf("take-%d", i)
	if _, err := creator.Operator().Create(ctx, name, seqzk.Registration{}); err != nil {
		return err
	}
	took := make(chan error, 1)
	go func() {
		_, err := taker.Take(ctx, name, 1)
		took <- err
	}()
	if _, err := creator.Keeper().Revalidate(ctx, name, 0, 10); err != nil {
		return err
	}
	if err := <-took; err != nil {
		return fmt.Errorf("take from %s through a follower right after its create through the leader: %w", name, err)
	}

	name = fmt.Sprintf("other-%d", i)
	if _, err := creator.Operator().Create(ctx, name, seqzk.Registration{}); err != nil {
		return err
	}
	if i%10 != 9 {
		if _, _, err := other.Describe(ctx, name); err != nil {
			return fmt.Errorf("describe %s through a follower right after its create through the leader: %w", name, err)
		}
	} else if _, err := other.Delete(ctx, name, store); err != nil {
		return fmt.Errorf("delete %s through a follower right after its create through the leader: %w", name, err)
	}
	return nil
}
