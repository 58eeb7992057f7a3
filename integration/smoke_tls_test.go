package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestSmokeOverTLS is the smoke test's replica part against an ensemble
// that serves TLS only and knows clients by their certificate: a replica
// with an x509 identity leads and hands out IDs, the CLI in its container
// talks TLS too, what it created belongs to its identity, and a plain
// client gets no session. The same cluster then moves to an ACL layout
// held in the replicas' configuration (layoutAfterLoss).
func TestSmokeOverTLS(t *testing.T) {
	takeClusterSlot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := NewCluster(ctx, t, Options{ZooKeepers: 3, MinIO: true, ZooKeeperTLS: true})
	r, err := c.AddReplica(ctx, "serve")
	if err != nil {
		t.Fatal(err)
	}
	code, out, err := r.Container.Exec(ctx, []string{"/seqkeeper", "create", "smoke"}, tcexec.Multiplexed())
	if err != nil || code != 0 {
		b, _ := io.ReadAll(out)
		t.Fatalf("seqkeeper create smoke over TLS: exit %d, %v: %s", code, err, b)
	}
	var ranges [][2]int64
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Post("http://"+r.Addr(ReplicaPort)+"/v1/sequences/smoke/ids?count=5", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ids struct{ Ranges [][2]int64 }
		if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &ids) == nil && len(ids.Ranges) > 0 {
			ranges = ids.Ranges
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("take 5 IDs over a TLS ZooKeeper: %s %s", resp.Status, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ranges[0][0] != 1 {
		t.Fatalf("took %v; want from 1", ranges)
	}
	zc := connectZK(t, c.ZooKeepers[1])
	acl, _, err := zc.Session().GetACL(ctx, "/all-sequences/smoke")
	if err != nil || len(acl) != 1 || acl[0].String() != ReplicaIdentity+":crwda" {
		t.Fatalf("ACL of the sequence: %v, %v; want the replica's identity alone", acl, err)
	}
	_, err = zkclient.Dial(ctx, c.ZooKeeperAddrs()[:1], zkclient.Options{ConnectTimeout: 3 * time.Second})
	if !errors.Is(err, zkclient.ErrNoSession) || !strings.Contains(err.Error(), "serves TLS only") {
		t.Fatalf("plain client: %v; want no session, with the TLS hint", err)
	}
	t.Logf("took IDs %v from %s over TLS", ranges, r.Name)
	layoutAfterLoss(ctx, t, c, r, ranges[len(ranges)-1][1])
}

// layoutAfterLoss moves the root r served (its replica's identity alone)
// to an ACL layout that the replicas' configuration holds (zk_acl_*),
// with x509 admin, replica and worker identities, then wipes every
// ZooKeeper server's data, and then rolls the ensemble back to a copy
// taken before the layout. After each, the worker's identity takes again
// through the library, above every ID handed out before (last), with no
// admin step, and a stranger's identity is refused.
func layoutAfterLoss(ctx context.Context, t *testing.T, c *Cluster, r *Node, last int64) {
	_, followers, err := c.ZooKeeperLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := followers[0]
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	beforeLayout, err := f.SnapshotZooKeeperData(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := restartZooKeepers(ctx, c, f); err != nil {
		t.Fatal(err)
	}
	// The replica's identity alone owns the root: ZooKeeper's super user
	// applies the layout, and a replica configured with it takes over.
	id := func(cn string) []zkclient.ID { return []zkclient.ID{{Scheme: "x509", ID: "CN=" + cn}} }
	layout := seqzk.Layout{Roles: map[seqzk.Role][]zkclient.ID{
		seqzk.Admin: id("ops"), seqzk.Replica: id("seqkeeper-replica"), seqzk.Worker: id("orders-service"),
	}}
	super, err := seqzk.NewClient(connectZK(t, c.ZooKeepers[0]), seqzk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, failed, err := super.Operator().ApplyLayout(ctx, layout, "/seqkeeper/election", "/seqkeeper/cluster"); err != nil || len(failed) > 0 {
		t.Fatalf("apply the layout: %v %v", failed, err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddReplicaWith(ctx, nil, testcontainers.WithEnv(map[string]string{
		"SEQKEEPER_ZK_ACL_ADMIN": "x509:CN=ops", "SEQKEEPER_ZK_ACL_REPLICA": ReplicaIdentity, "SEQKEEPER_ZK_ACL_WORKER": "x509:CN=orders-service",
	})); err != nil {
		t.Fatal(err)
	}
	takeAbove := func(what string) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			var got sequence.Ranges
			if got, err = takeAs(ctx, t, c, "orders-service"); err == nil {
				if got[0].Start <= last {
					t.Fatalf("%s: the worker took %v, not above %d, the highest ID handed out before", what, got, last)
				}
				last = got[len(got)-1].End
				return
			}
		}
		t.Fatalf("%s: the worker's identity cannot take: %v", what, err)
	}
	refused := func(what string) {
		t.Helper()
		if _, err := takeAs(ctx, t, c, "stranger"); !errors.Is(err, zkclient.ErrNoAuth) {
			t.Fatalf("%s: a stranger's take: %v; want refused (no auth)", what, err)
		}
	}
	takeAbove("under the layout")
	refused("under the layout")

	zks := c.ZooKeepers
	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		t.Fatal(err)
	}
	if err := parallel(zks, func(n *Node) error { return n.WipeZooKeeperData(ctx) }); err != nil {
		t.Fatal(err)
	}
	if err := restartZooKeepers(ctx, c, zks...); err != nil {
		t.Fatal(err)
	}
	takeAbove("after every server's data was wiped")
	refused("after every server's data was wiped")

	if err := parallel(zks, func(n *Node) error { return n.Kill(ctx) }); err != nil {
		t.Fatal(err)
	}
	if err := parallel(zks, func(n *Node) error { return n.RestoreZooKeeperData(ctx, beforeLayout) }); err != nil {
		t.Fatal(err)
	}
	if err := restartZooKeepers(ctx, c, zks...); err != nil {
		t.Fatal(err)
	}
	takeAbove("after a rollback to a copy taken before the layout")
	refused("after a rollback to a copy taken before the layout")
}

// takeAs takes 3 IDs of "smoke" through the library, on a new session as
// the x509 identity CN=cn (new: a restarted server's port may have moved).
func takeAs(ctx context.Context, t *testing.T, c *Cluster, cn string) (sequence.Ranges, error) {
	zc, err := zkclient.Dial(ctx, c.ZooKeeperAddrs(), zkclient.Options{TLS: c.zkTLS.clientTLS(t, cn), SessionTimeout: 4 * time.Second, ConnectTimeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	defer zc.Close()
	seqs, err := sequence.NewClient(zc, sequence.Options{CeilingWait: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return seqs.Take(tctx, "smoke", 3)
}

// restartZooKeepers starts stopped servers and waits until the ensemble
// serves.
func restartZooKeepers(ctx context.Context, c *Cluster, servers ...*Node) error {
	if err := parallel(servers, func(n *Node) error { return n.Start(ctx) }); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return c.WaitZooKeeperServing(wctx)
}
