package seqzk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A client on a follower that has not applied a create yet does not answer
// that the sequence does not exist: it syncs its session with the leader
// first, and the sync waits until the follower has caught up. Nor does it
// list the sequences without the name.
func TestUnknownIsAnsweredOnlyOnceTheServerCaughtUp(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsembleBehind(t, 3)
	ctx := context.Background()
	leader, err := ens.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % ens.Len()
	on := func(i int) *seqzk.Client {
		c, err := seqzk.NewClient(testenv.Connect(t, []string{ens.Addr(i)}, 10*time.Second), seqzk.Options{Root: "/all-sequences"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	creator, reader := on(leader), on(follower)

	for _, tc := range []struct {
		what, name string
		created    bool
		read       func(name string) error
	}{
		{"take", "taken", true, func(name string) error { _, err := reader.Take(ctx, name, 1); return err }},
		{"describe", "described", true, func(name string) error { _, _, err := reader.Describe(ctx, name); return err }},
		{"list", "listed", true, func(name string) error {
			names, err := reader.Names(ctx)
			if err == nil && !slices.Contains(names, name) {
				err = fmt.Errorf("the listing %q lacks it", names)
			}
			return err
		}},
		{"take", "nobody", false, func(name string) error { _, err := reader.Take(ctx, name, 1); return err }},
	} {
		name := tc.name
		ens.HoldBack(follower)
		if tc.created {
			if _, err := creator.Operator().Create(ctx, name, seqzk.Registration{}); err != nil {
				t.Fatal(err)
			}
			if _, err := creator.Keeper().Revalidate(ctx, name, 0, 10); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := reader.ZK().Session().Exists(ctx, creator.Path(name)); err != nil || ok {
				t.Fatalf("the follower has %s already (%v, %v): the paused proxies did not hold it back", name, ok, err)
			}
		}
		answered := make(chan error, 1)
		go func() { answered <- tc.read(name) }()
		select {
		case err := <-answered:
			t.Fatalf("%s of %s through a follower behind the leader answered before it caught up: %v", tc.what, name, err)
		case <-time.After(500 * time.Millisecond):
		}
		ens.Release(follower)
		err := <-answered
		if tc.created && err != nil {
			t.Fatalf("%s of %s once the follower caught up: %v", tc.what, name, err)
		}
		if !tc.created && !errors.Is(err, seqzk.ErrUnknownSequence) {
			t.Fatalf("%s of %s once the follower caught up: %v; want ErrUnknownSequence", tc.what, name, err)
		}
	}
	if s := reader.Stats().Syncs; s != 4 {
		t.Fatalf("the reader synced %d times; want 4, one per read that found no znode and one for the listing", s)
	}
}
