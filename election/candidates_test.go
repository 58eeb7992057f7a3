package election

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Candidates lists every candidate's identity in queue order, the leader
// first; after a resignation the resigner is last.
func TestCandidatesInQueueOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	ids := func(r *replica) []string {
		cs, err := Candidates(context.Background(), r.e.client, r.e.path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	a := c.newReplica("a", Config{})
	if got := ids(a); len(got) != 0 {
		t.Fatalf("candidates of an empty election: %v", got)
	}
	a.start()
	c.waitTerm(0, 10*time.Second)
	b := c.add("b")
	eventually(t, 10*time.Second, "a and b in line", func() bool { return slices.Equal(ids(b), []string{"a", "b"}) })
	if err := a.e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "b leads, a last", func() bool { return slices.Equal(ids(a), []string{"b", "a"}) })
	if cs, _ := Candidates(context.Background(), a.e.client, a.e.path); cs[0].Address != "b:8080" || cs[0].Version != "test" {
		t.Fatalf("the leader's identity: %+v", cs[0])
	}
}
