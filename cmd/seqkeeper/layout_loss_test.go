package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The replicas hold the ACL layout in their configuration (zk_acl_*), so
// it comes back with the counters: after ZooKeeper loses its data, and
// after it rolls back to a copy taken before 'acl apply' (an open root),
// the worker's identity takes again with no admin step, above every ID it
// took before, every znode carries the layout, and a stranger's identity
// is still refused. A root's ACL widened by hand is narrowed again at the
// next audit; a layout an admin applied that the replicas' configuration
// lacks is never undone by a replica (it may not change ACLs), only
// reported.
func TestLayoutComesBackAfterZooKeeperLoss(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	ctx := context.Background()
	const base = "/lost"
	admin := newTLSCLIAt(t, e, "admin", base)
	replica := newTLSCLIAt(t, e, "replica", base)
	worker := newTLSCLIAt(t, e, "worker", base)
	stranger := newTLSCLIAt(t, e, "stranger", base)
	replica.env["SEQKEEPER_STORE"] = admin.env["SEQKEEPER_STORE"]
	maps.Copy(replica.env, map[string]string{
		"SEQKEEPER_ZK_ACL_ADMIN": "x509:CN=admin", "SEQKEEPER_ZK_ACL_REPLICA": "x509:CN=replica", "SEQKEEPER_ZK_ACL_WORKER": "x509:CN=worker",
	})
	configured := seqzk.Layout{Roles: map[seqzk.Role][]zkclient.ID{
		seqzk.Admin: {{Scheme: "x509", ID: "CN=admin"}}, seqzk.Replica: {{Scheme: "x509", ID: "CN=replica"}}, seqzk.Worker: {{Scheme: "x509", ID: "CN=worker"}},
	}}
	super := admin.conn // ZooKeeper's super user: sees and changes everything

	// An earlier deployment ran the root open; the copy of ZooKeeper taken
	// then, before 'acl apply', holds it so.
	open := []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "world", ID: "anyone"}}}
	for _, p := range []string{base, worker.root} {
		if _, err := super.Session().CreateWithACL(ctx, p, nil, 0, open); err != nil {
			t.Fatal(err)
		}
	}
	beforeApply := e.Snapshot(t, 0)

	admin.ok("acl", "apply", "--settle", "0", "--admin", "x509:CN=admin", "--replica", "x509:CN=replica", "--worker", "x509:CN=worker")
	r := replica.serveWith("r", "--audit-interval", "1s")
	eventually(t, "the replica leads under the layout", func() bool { return r.get(t, "/readyz", nil) == 200 })
	worker.ok("create", "orders")

	var last int64 // the highest ID the worker took
	takeAbove := func(what string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, errOut, code := worker.run("", "take", "orders", "--count", "3")
			if code == 0 {
				lo, hi := idSpan(t, out)
				if lo <= last {
					t.Fatalf("%s: the worker took %q, not above %d, the highest ID it took before", what, out, last)
				}
				last = hi
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the worker's identity cannot take: exit %d, %s", what, code, errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	refused := func(what string) {
		t.Helper()
		eventually(t, what+": the stranger refused", func() bool {
			_, errOut, code := stranger.run("", "take", "orders")
			return code == 2 && strings.Contains(errOut, "not authenticated")
		})
	}
	// held checks that the root names the configured layout and that no
	// znode gives more than it.
	held := func(what string) {
		t.Helper()
		var why string
		deadline := time.Now().Add(time.Minute)
		for {
			acl, _, err := super.Session().GetACL(ctx, worker.root)
			if err == nil && sameRoles(seqzk.LayoutOf(acl), configured) {
				var findings []seqzk.ACLFinding
				_, findings, err = admin.admin.Operator().CheckLayout(ctx, worker.election, base+"/cluster")
				if err == nil && len(findings) == 0 {
					return
				}
				why = fmt.Sprintf("wider than the layout: %+v (%v)", findings, err)
			} else {
				why = fmt.Sprintf("the root's ACL is %v (%v)", acl, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not every znode within the configured layout: %s", what, why)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	takeAbove("under the layout")
	refused("under the layout")
	held("under the layout")

	if err := e.WipeAll(); err != nil {
		t.Fatal(err)
	}
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	takeAbove("after ZooKeeper lost its data")
	refused("after ZooKeeper lost its data")
	held("after ZooKeeper lost its data")

	e.Rollback(t, 0, beforeApply)
	if acl, _, err := super.Session().GetACL(ctx, worker.root); err == nil && len(seqzk.LayoutOf(acl).Roles) > 0 {
		t.Logf("the rolled-back root already holds a layout (%v): the primary was quick", acl)
	}
	takeAbove("after a rollback to before 'acl apply'")
	refused("after a rollback to before 'acl apply'")
	held("after a rollback to before 'acl apply'")

	// Widened by hand, in ZooKeeper: narrowed again at the next audit.
	if _, err := super.Session().SetACL(ctx, worker.root, append(configured.ACL(seqzk.KindRoot), open...), zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	held("after the root's ACL was widened by hand")
	refused("after the root's ACL was widened by hand")

	// An admin's layout that the configuration lacks stays: the replica
	// may not change the root's ACL, and says so.
	admin.ok("acl", "apply", "--settle", "0", "--admin", "x509:CN=admin", "--replica", "x509:CN=replica", "--worker", "x509:CN=worker", "--worker", "x509:CN=stranger")
	eventually(t, "the replica reports the root's layout it may not change", func() bool {
		return strings.Contains(r.stderr.String(), "the root's ACL is not the configured layout (zk_acl_*), and this replica may not change it")
	})
	if acl, _, err := super.Session().GetACL(ctx, worker.root); err != nil || len(seqzk.LayoutOf(acl).Roles[seqzk.Worker]) != 2 {
		t.Fatalf("the admin's layout after the replica's audits: %v, %v; want both workers", acl, err)
	}
	takeAbove("under the admin's wider layout")
}

// idSpan is the lowest and the highest ID of the take command's output
// (lines of "a:b" or "a").
func idSpan(t *testing.T, out string) (lo, hi int64) {
	t.Helper()
	lo = -1
	for _, l := range strings.Fields(out) {
		a, b, ok := strings.Cut(l, ":")
		if !ok {
			b = a
		}
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("take printed %q", out)
		}
		if lo < 0 || x < lo {
			lo = x
		}
		hi = max(hi, y)
	}
	if lo < 0 {
		t.Fatal("take printed nothing")
	}
	return lo, hi
}

// sameRoles reports whether two layouts name the same identities in the
// same roles.
func sameRoles(a, b seqzk.Layout) bool {
	for role := seqzk.Reader; role <= seqzk.Admin; role++ {
		x, y := a.Roles[role], b.Roles[role]
		if len(x) != len(y) || slices.ContainsFunc(x, func(id zkclient.ID) bool { return !slices.Contains(y, id) }) {
			return false
		}
	}
	return true
}
