package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/client"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// Options.Root addresses a root by name (/v1/roots/{root}/...): the IDs
// come from the same sequence as the unrooted routes' (never twice), a
// recycle goes back through the rooted route, and a root the replica does
// not serve is ErrUnknownRoot, not retried.
func TestClientAddressesARootByName(t *testing.T) {
	t.Parallel()
	c := newCluster(t, true)
	c.create("orders", seqzk.Registration{}, 0)
	r := c.namedReplica("main")
	ctx := context.Background()
	rooted, err := client.New(client.Options{Endpoints: []string{r.url()}, Root: "main"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := client.New(client.Options{Endpoints: []string{r.url()}})
	if err != nil {
		t.Fatal(err)
	}
	var l ledger
	for range 3 {
		for who, cl := range map[string]*client.Client{"rooted": rooted, "plain": plain} {
			ids, err := cl.Take(ctx, "orders", 4)
			if err != nil || ids.Count() != 4 {
				t.Fatalf("%s take: %v %v", who, ids, err)
			}
			for _, rg := range ids {
				for id := rg.Start; id <= rg.End; id++ {
					l.add(who, id)
				}
			}
		}
	}
	if len(l.dups) > 0 || len(l.seen) != 24 {
		t.Fatalf("%d IDs seen, want 24; twice: %v", len(l.seen), l.dups)
	}
	ids, err := rooted.Take(ctx, "orders", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rooted.Recycle(ctx, "orders", ids, ""); err != nil {
		t.Fatalf("recycle through the rooted route: %v", err)
	}

	other, err := client.New(client.Options{Endpoints: []string{r.url()}, Root: "billing", RetryFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var api *client.APIError
	if _, err := other.Take(ctx, "orders", 1); !errors.Is(err, client.ErrUnknownRoot) || !errors.As(err, &api) || api.Code != "unknown_root" {
		t.Fatalf("take from a root the replica does not serve: %v; want ErrUnknownRoot (unknown_root)", err)
	}
	if _, err := client.New(client.Options{Endpoints: []string{r.url()}, Root: "a/b"}); err == nil {
		t.Fatal("a root name with '/' accepted")
	}
}
