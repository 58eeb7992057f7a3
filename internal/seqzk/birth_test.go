package seqzk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// TestOnlyThePrimaryStampsABirth: a state the primary initialised, whose
// birth the store may not hold yet, hands out nothing, and Revalidate (the
// operator's restore and verify) leaves it as it is; only the primary's
// Confirm, once the store holds the birth, makes it usable, from its first
// ID.
func TestOnlyThePrimaryStampsABirth(t *testing.T) {
	e := newEnv(t)
	c := e.client(seqzk.Options{CeilingWait: 300 * time.Millisecond})
	ctx := context.Background()
	if err := c.Register(ctx, "born", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Meta().EnsureMeta(ctx); err != nil { // as the primary does before it initialises
		t.Fatal(err)
	}
	guard, err := c.Meta().ReadDeletion(ctx, "born")
	if err != nil {
		t.Fatal(err)
	}
	born, err := c.Keeper().Initialise(ctx, "born", 1, 100, guard)
	if err != nil || !seqzk.Unconfirmed(born) {
		t.Fatalf("Initialise: %+v, %v; want an unconfirmed birth", born, err)
	}

	if st, err := c.Keeper().Revalidate(ctx, "born", 1, 100); !errors.Is(err, seqzk.ErrChangedMeanwhile) {
		t.Fatalf("Revalidate of an unconfirmed birth: %+v, %v; want ErrChangedMeanwhile", st, err)
	}
	if st, _, err := c.Inspect(ctx, "born"); err != nil || !st.Equal(born) {
		t.Fatalf("after the refused Revalidate the znode holds %+v (%v); want the birth as initialised, %+v", st, err, born)
	}
	if got, err := c.Take(ctx, "born", 5); !errors.Is(err, seqzk.ErrUnvalidated) {
		t.Fatalf("take from an unconfirmed birth: %v, %v; want ErrUnvalidated", got, err)
	}

	if _, err := c.Keeper().Confirm(ctx, "born", born); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Take(ctx, "born", 5); err != nil || got.String() != "1:5" {
		t.Fatalf("take after Confirm: %v, %v; want 1:5", got, err)
	}
}
