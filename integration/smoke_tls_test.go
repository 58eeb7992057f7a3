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

	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestSmokeOverTLS is the smoke test's replica part against an ensemble
// that serves TLS only and knows clients by their certificate: a replica
// with an x509 identity leads and hands out IDs, the CLI in its container
// talks TLS too, what it created belongs to its identity, and a plain
// client gets no session.
func TestSmokeOverTLS(t *testing.T) {
	takeClusterSlot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	acl, _, err := zc.GetACL(ctx, "/all-sequences/smoke")
	if err != nil || len(acl) != 1 || acl[0].String() != ReplicaIdentity+":crwda" {
		t.Fatalf("ACL of the sequence: %v, %v; want the replica's identity alone", acl, err)
	}
	_, err = zkclient.Dial(ctx, c.ZooKeeperAddrs()[:1], zkclient.Options{ConnectTimeout: 3 * time.Second})
	if !errors.Is(err, zkclient.ErrNoSession) || !strings.Contains(err.Error(), "serves TLS only") {
		t.Fatalf("plain client: %v; want no session, with the TLS hint", err)
	}
	t.Logf("took IDs %v from %s over TLS", ranges, r.Name)
}
