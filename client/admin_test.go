package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seqkeeper/seqkeeper/client"
)

// Sequences from code: the HTTP client creates a sequence,
// takes from it, deletes it (the tombstone's ceiling covers every ID it
// handed out) and creates it again, which starts above the tombstone. The
// admin token is needed; the taker token is refused.
func TestCreateAndDeleteOverHTTP(t *testing.T) {
	t.Parallel()
	c := newCluster(t, true)
	rep := c.adminReplica("taker", "admin")
	ctx := context.Background()
	adm, err := client.New(client.Options{Endpoints: []string{rep.url()}, Token: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	taker, _ := client.New(client.Options{Endpoints: []string{rep.url()}, Token: "taker"})

	if _, err := taker.Create(ctx, "made", client.CreateOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("create with the taker token: %v; want ErrForbidden", err)
	}
	got, err := adm.Create(ctx, "made", client.CreateOptions{Windows: 2})
	if err != nil || !got.Created || got.Start != 1 || got.Windows != 2 {
		t.Fatalf("create: %+v, %v", got, err)
	}
	again, err := adm.Create(ctx, "made", client.CreateOptions{Windows: 2})
	if err != nil || again.Created {
		t.Fatalf("create again with the same settings: %+v, %v; want Created false, no error", again, err)
	}
	if _, err := adm.Create(ctx, "made", client.CreateOptions{Max: 100}); !errors.Is(err, client.ErrExists) {
		t.Fatalf("create with other settings: %v; want ErrExists", err)
	}
	if _, err := adm.Create(ctx, "bad/name", client.CreateOptions{}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("create of a bad name: %v; want ErrInvalid", err)
	}

	ids, err := taker.Take(ctx, "made", 500) // waits for the primary to initialise it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := taker.Delete(ctx, "made"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("delete with the taker token: %v; want ErrForbidden", err)
	}
	ceiling, err := adm.Delete(ctx, "made")
	if err != nil {
		t.Fatal(err)
	}
	if last := ids[len(ids)-1].End; ceiling < last {
		t.Fatalf("tombstone ceiling %d is below %d, handed out before the delete", ceiling, last)
	}
	if _, err := taker.Take(ctx, "made", 1); !errors.Is(err, client.ErrUnknownSequence) {
		t.Fatalf("take after the delete: %v; want ErrUnknownSequence", err)
	}
	if _, err := adm.Delete(ctx, "made"); !errors.Is(err, client.ErrUnknownSequence) {
		t.Fatalf("second delete: %v; want ErrUnknownSequence", err)
	}

	if _, err := adm.Create(ctx, "made", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reborn, err := taker.Take(ctx, "made", 10)
	if err != nil {
		t.Fatal(err)
	}
	if reborn[0].Start <= ceiling {
		t.Fatalf("the name created again handed out %v, not above the tombstone's ceiling %d", reborn, ceiling)
	}
	t.Logf("took %v, tombstone ceiling %d, created again: %v", ids, ceiling, reborn)
}
