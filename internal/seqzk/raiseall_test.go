package seqzk_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"
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
	if err := c.ZK().Session().Delete(ctx, c.Path("markerless")+"/"+st.Marker, -1); err != nil {
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
	done, rest := raiser.Keeper().RaiseAll(ctx, reqs)
	want := []int{len(reqs) - 4, len(reqs) - 3, len(reqs) - 2, len(reqs) - 1}
	if slices.Sort(rest); !slices.Equal(rest, want) {
		t.Fatalf("left to the caller: %v, want %v", rest, want)
	}
	if len(done) != len(reqs)-4 {
		t.Fatalf("raised %d, want %d", len(done), len(reqs)-4)
	}
	for i, r := range done {
		got, _, err := c.Describe(ctx, reqs[i].Name)
		if err != nil {
			t.Fatal(err)
		}
		if st := r.State; got.Ceiling != reqs[i].Ceiling || got.Next != 8 || st.Ceiling != got.Ceiling || st.Next != got.Next {
			t.Fatalf("%s: %+v in ZooKeeper, %+v returned; want ceiling %d and next 8", reqs[i].Name, got, st, reqs[i].Ceiling)
		}
		if _, stat, err := c.ZK().Session().Get(ctx, c.Path(reqs[i].Name)); err != nil || stat.Version != r.Version {
			t.Fatalf("%s: version %d returned, ZooKeeper has %+v (%v)", reqs[i].Name, r.Version, stat, err)
		}
	}
	if got, _, _ := c.Describe(ctx, "high"); got.Ceiling != 5000 {
		t.Fatalf("high lowered: %+v", got)
	}
}

// TestRaiseAllFromABase: a request that carries the state it was read at
// is written without reading it again (one request for the transaction),
// and a base that is no longer current (a take since) is left to the
// caller, never written over the newer state.
func TestRaiseAllFromABase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(seqzk.Options{})
	var reqs []seqzk.RaiseReq
	for _, name := range []string{"current", "moved"} {
		e.create(c, name, seqzk.Registration{}, 100)
		data, stat, err := c.ZK().Session().Get(ctx, c.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		base, err := state.ParseState(name, data)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, seqzk.RaiseReq{Name: name, Ceiling: 1000, Base: &base, Version: stat.Version})
	}
	if _, err := c.Take(ctx, "moved", 5); err != nil {
		t.Fatal(err)
	}
	raiser := e.client(seqzk.Options{})
	done, rest := raiser.Keeper().RaiseAll(ctx, reqs)
	if len(done) != 1 || !slices.Equal(rest, []int{1}) {
		t.Fatalf("raised %v, left %v; want the current base raised and the moved one left", done, rest)
	}
	// Two transactions: both raises, then the current one alone; no read.
	if got := raiser.Stats().Requests; got != 2 {
		t.Fatalf("%d ZooKeeper requests, want 2 (no read of a request with a base)", got)
	}
	if got, _, _ := c.Describe(ctx, "moved"); got.Ceiling != 100 || got.Next != 6 {
		t.Fatalf("moved: %+v, want its take kept (next 6) and its ceiling untouched", got)
	}
	if got, _, _ := c.Describe(ctx, "current"); got.Ceiling != 1000 || got.Next != 1 {
		t.Fatalf("current: %+v, want ceiling 1000 and next 1", got)
	}
}
