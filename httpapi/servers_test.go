package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// A sequence whose create returned through one ZooKeeper server is served
// at once by a replica whose session is on another: the ID route, Leaf's
// and Tinyid's routes and the describe route never answer 404
// unknown_sequence for it. The creator talks to the leader, which answers
// a write as soon as a quorum has it; the replica talks to a follower,
// which may apply it a moment later, or be held behind it.
func TestCreatedThroughOneServerIsServedByAReplicaOnAnother(t *testing.T) {
	t.Parallel()
	ens := testenv.StartEnsembleBehind(t, 3)
	ctx := context.Background()
	leader, err := ens.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The replica's session is on a follower; the creator, who also
	// initialises what it creates as the primary would, on the leader.
	follower := (leader + 1) % 3
	e := &env{t: t, servers: []string{ens.Addr(follower)}, root: "/all-sequences"}
	e.admin, err = seqzk.NewClient(testenv.Connect(t, []string{ens.Addr(leader)}, 10*time.Second), seqzk.Options{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	r := e.replica(httpapi.Options{}, sequence.Options{})

	n := 1000
	if testing.Short() {
		n = 100
	}
	routes := []string{
		"POST /v1/sequences/%s/ids?count=2",
		"GET /api/segment/get/%s",
		"GET /tinyid/id/nextIdSimple?bizType=%s",
		"GET /v1/sequences/%s",
	}
	// The follower held behind: each route waits for it to catch up.
	for k, route := range routes {
		name := fmt.Sprintf("behind-%d", k)
		ens.HoldBack(follower)
		answered := make(chan error, 1)
		go func() { answered <- r.createThenCall(ctx, name, fmt.Sprintf(route, name)) }()
		select {
		case err := <-answered:
			t.Fatalf("answered before the replica's server caught up: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		ens.Release(follower)
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}

	// Then as fast as the creates come.
	held := r.seqs.Stats().Syncs
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && !t.Failed(); i += workers {
				name := fmt.Sprintf("s-%d", i)
				if err := r.createThenCall(ctx, name, fmt.Sprintf(routes[i%len(routes)], name)); err != nil {
					t.Errorf("%v (%d of %d)", err, i+1, n)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("the follower had not applied the create yet (found no znode, synced, then found it) for %d of %d requests", r.seqs.Stats().Syncs-held, n)
}

// createThenCall creates sequence name through the env's admin client and
// at once makes the request route ("METHOD path") of the replica, while
// the admin client initialises the sequence as the primary would. Any
// answer but 200 is an error.
func (r *replica) createThenCall(ctx context.Context, name, route string) error {
	if _, err := r.e.admin.Operator().Create(ctx, name, seqzk.Registration{}); err != nil {
		return err
	}
	var method, path string
	if _, err := fmt.Sscan(route, &method, &path); err != nil {
		return fmt.Errorf("route %q: %w", route, err)
	}
	answered := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, method, r.ts.URL+path, nil)
		if err != nil {
			answered <- err
			return
		}
		resp, err := r.client.Do(req)
		if err != nil {
			answered <- err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", body)
		}
		if err != nil {
			err = fmt.Errorf("%s right after the create of %s returned through another server: %s: %w", route, name, resp.Status, err)
		}
		answered <- err
	}()
	if _, err := r.e.admin.Keeper().Revalidate(ctx, name, 0, 10); err != nil {
		return err
	}
	return <-answered
}
