package seqzk_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// TestRaiseAll: plain raises go out in transactions and land; what cannot
// be raised that way (a registration, nothing to raise, an unknown name, a
// znode whose marker is gone) is left to the caller, and a raise never
// lowers anything or moves next.
func TestRaiseAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(seqzk.Options{})
	var reqs []seqzk.RaiseReq
	for i := range 2*seqzk.MaxRaiseBatch + 5 { // three transactions
		name := fmt.Sprintf("r%03d", i)
		e.create(c, name, seqzk.Registration{}, 100)
		if _, err := c.Take(ctx, name, 7); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, seqzk.RaiseReq{Name: name, Ceiling: int64(1000 + i)})
	}
	if err := c.Register(ctx, "registered", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	e.create(c, "high", seqzk.Registration{}, 5000)
	e.create(c, "markerless", seqzk.Registration{}, 100)
	st, _, err := c.Describe(ctx, "markerless")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ZK().Delete(ctx, c.Path("markerless")+"/"+st.Marker, -1); err != nil {
		t.Fatal(err)
	}
	special := []seqzk.RaiseReq{
		{Name: "registered", Ceiling: 500},
		{Name: "high", Ceiling: 4000}, // nothing to raise
		{Name: "missing", Ceiling: 500},
		{Name: "markerless", Ceiling: 500},
	}
	reqs = append(reqs, special...)
	raiser := e.client(seqzk.Options{})
	done, rest := raiser.RaiseAll(ctx, reqs)
	want := []int{len(reqs) - 4, len(reqs) - 3, len(reqs) - 2, len(reqs) - 1}
	if slices.Sort(rest); !slices.Equal(rest, want) {
		t.Fatalf("left to the caller: %v, want %v", rest, want)
	}
	if len(done) != len(reqs)-4 {
		t.Fatalf("raised %d, want %d", len(done), len(reqs)-4)
	}
	for i, st := range done {
		got, _, err := c.Describe(ctx, reqs[i].Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Ceiling != reqs[i].Ceiling || got.Next != 8 || st.Ceiling != got.Ceiling || st.Next != got.Next {
			t.Fatalf("%s: %+v in ZooKeeper, %+v returned; want ceiling %d and next 8", reqs[i].Name, got, st, reqs[i].Ceiling)
		}
	}
	if got, _, _ := c.Describe(ctx, "high"); got.Ceiling != 5000 {
		t.Fatalf("high lowered: %+v", got)
	}
}
