package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Three real identities (x509 client certificates on a TLS-only
// ZooKeeper) under the layout 'seqkeeper acl apply' sets: each can do what
// its role needs and no more. The worker takes, pushes and registers, but
// cannot delete a sequence, write the election or the cluster marker, or
// change an ACL; the replica leads and serves but cannot change an ACL; the
// admin can delete. verify finds nothing wider than the layout, until an
// ACL is widened by hand.
func TestIdentitiesAndLeastPrivilege(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	ctx := context.Background()
	const base = "/ids"
	admin := newTLSCLIAt(t, e, "admin", base)
	replica := newTLSCLIAt(t, e, "replica", base)
	worker := newTLSCLIAt(t, e, "worker", base)
	// One store for all three (the worker needs none).
	replica.env["SEQKEEPER_STORE"] = admin.env["SEQKEEPER_STORE"]

	out := admin.ok("acl", "apply", "--settle", "0", "--admin", "x509:CN=admin", "--replica", "x509:CN=replica", "--worker", "x509:CN=worker")
	if !strings.Contains(out, "worker   x509:CN=worker") || !strings.Contains(out, "admin    x509:CN=admin") {
		t.Fatalf("acl apply printed:\n%s", out)
	}
	r := replica.serve("r")
	eventually(t, "the replica leads under the layout", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })

	// The worker registers, takes and pushes.
	worker.ok("create", "orders")
	eventually(t, "orders initialised", func() bool {
		_, code := r.ids(t, "orders", 1)
		return code == http.StatusOK
	})
	if out := worker.ok("take", "orders", "--count", "3"); out == "" {
		t.Fatal("worker take printed nothing")
	}

	dial := func(cn string) *zkclient.Client {
		t.Helper()
		c, err := zkclient.Dial(ctx, e.Servers(), zkclient.Options{TLS: e.ClientTLS(t, cn)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	w, rep := dial("worker"), dial("replica")
	seq := worker.root + "/orders"
	noAuth := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, zkclient.ErrNoAuth) {
			t.Errorf("%s: %v; want refused (no auth)", what, err)
		}
	}
	if _, _, err := w.Session().Children(ctx, seq); err != nil {
		t.Fatalf("the worker lists orders' children: %v", err)
	}
	noAuth("worker deletes a sequence", w.Session().Delete(ctx, seq, zkclient.AnyVersion))
	_, err := w.Session().Create(ctx, worker.election+"/forged", nil, zkclient.Ephemeral)
	noAuth("worker joins the election", err)
	_, err = w.Session().Set(ctx, base+"/election-epoch", []byte("99"), zkclient.AnyVersion)
	noAuth("worker writes the leader epoch", err)
	_, err = w.Session().Set(ctx, base+"/cluster", []byte("forged"), zkclient.AnyVersion)
	noAuth("worker writes the cluster marker", err)
	_, err = w.Session().SetACL(ctx, seq, []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "world", ID: "anyone"}}}, zkclient.AnyVersion)
	noAuth("worker changes an ACL", err)
	_, err = w.Session().Set(ctx, worker.root+"/.seqkeeper", []byte("forged era"), zkclient.AnyVersion)
	noAuth("worker writes the era", err)
	_, err = w.Session().Create(ctx, worker.root+"/.seqkeeper/orders", nil, 0)
	noAuth("worker writes a deletion record", err)
	_, err = rep.Session().SetACL(ctx, seq, []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "world", ID: "anyone"}}}, zkclient.AnyVersion)
	noAuth("replica changes an ACL", err)
	// The worker's delete and advance are refused before anything is
	// written: the store keeps orders live at its ceiling.
	worker.env["SEQKEEPER_STORE"] = admin.env["SEQKEEPER_STORE"]
	before := storedRecord(t, admin, "orders")
	for _, args := range [][]string{{"delete", "orders", "--yes"}, {"advance", "orders", "--to", strconv.FormatInt(before.Ceiling+1000, 10)}} {
		if _, errOut, code := worker.run("", args...); code != 2 || !strings.Contains(errOut, "not authenticated") || !strings.Contains(errOut, "ZooKeeper refused this identity") ||
			!strings.Contains(errOut, "run the command as an identity whose role has this one") {
			t.Errorf("seqkeeper %s as the worker: exit %d, %q; want 2 and the identity refused", args[0], code, errOut)
		}
	}
	if after := storedRecord(t, admin, "orders"); after.Deleted() || after.Ceiling != before.Ceiling {
		t.Errorf("the store's orders went from %+v to %+v under the worker's refused commands", before, after)
	}
	// The worker's import of a sequence the root lacks is refused before
	// it stores the sequence's ceiling.
	export := `{"seqkeeper_export":1,"root":"/elsewhere","exported_at":"2026-11-25T10:00:00Z"}` + "\n" +
		`{"name":"imported","deleted":false,"legacy":false,"registered":false,"next":10,"ceiling":500,"start":1,"end":9223372036854775807,"windows":0,"recycled":[]}` + "\n"
	if _, errOut, code := worker.run(export, "import"); code != 2 || !strings.Contains(errOut, "nothing was written") {
		t.Errorf("seqkeeper import as the worker: exit %d, %q; want 2, nothing written", code, errOut)
	}
	if rec, err := storeOf(t, admin).Get(ctx, "imported"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("the worker's refused import stored %+v (%v); want nothing", rec, err)
	}

	// What the replica and the worker created follows the layout, not
	// their own identities: a sequence, its marker, a candidate.
	want := map[string]string{
		seq:                         "x509:CN=worker:crwd x509:CN=replica:crwd x509:CN=admin:crwda",
		"marker h-":                 "x509:CN=worker:rw x509:CN=replica:rw x509:CN=admin:rwa",
		"candidate":                 "x509:CN=worker:r x509:CN=replica:rw x509:CN=admin:rwa",
		base + "/cluster":           "x509:CN=worker:r x509:CN=replica:rw x509:CN=admin:rwa",
		worker.root + "/.seqkeeper": "x509:CN=worker:r x509:CN=replica:crwd x509:CN=admin:crwda",
	}
	first := func(p, prefix string) string {
		ch, _, err := w.Session().Children(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch {
			if strings.HasPrefix(c, prefix) {
				return p + "/" + c
			}
		}
		t.Fatalf("no child %s* of %s in %v", prefix, p, ch)
		return ""
	}
	for what, acl := range want {
		p := what
		switch what {
		case "marker h-":
			p = first(seq, "h-")
		case "candidate":
			p = first(worker.election, "")
		}
		got, _, err := w.Session().GetACL(ctx, p)
		var s []string
		for _, e := range got {
			s = append(s, e.String())
		}
		if err != nil || strings.Join(s, " ") != acl {
			t.Errorf("ACL of %s (%s): %v, %v; want %s", p, what, s, err, acl)
		}
	}
	// Nothing is wider than the layout, until an admin widens one ACL.
	admin.ok("acl", "show")
	if _, _, err := w.Session().Get(ctx, base+"/cluster"); err != nil {
		t.Errorf("the worker reads the marker: %v", err)
	}
	a := dial("admin")
	if _, err := a.Session().SetACL(ctx, seq, []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "world", ID: "anyone"}}}, zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	out, _, code := admin.run("", "verify")
	if code != 1 || !strings.Contains(out, "ACL wider than the layout: "+seq+" (sequence): world:anyone has crwda (the layout gives nothing)") {
		t.Fatalf("verify after widening: exit %d\n%s", code, out)
	}
	admin.ok("acl", "apply", "--settle", "0", "--admin", "x509:CN=admin", "--replica", "x509:CN=replica", "--worker", "x509:CN=worker")
	admin.ok("verify")
	// What no ACL can stop: WRITE on a sequence, which every taker needs,
	// lets the worker identity put any state there, a counter set back
	// included (docs/security.md says so). ZooKeeper accepts it.
	data, stat, err := w.Session().Get(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Session().Set(ctx, seq, data, stat.Version); err != nil {
		t.Errorf("the worker rewrites orders' state by hand: %v; want accepted (the documented limit of ACLs)", err)
	}
	// The admin deletes.
	admin.ok("delete", "orders", "--yes")
}

// The layout applied beside a running replica that created the root, its
// sequences and their markers with its own identity (the demo's order):
// the replica reads the new layout only within seqzk.LayoutTTL, and
// what it creates meanwhile carries its own ACL; apply's second pass,
// after --settle, catches that up, and the worker identity then takes.
func TestACLApplyBesideARunningReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("waits seqzk.LayoutTTL (30 s) for acl apply's second pass (-short: TestIdentitiesAndLeastPrivilege covers acl apply; the full run covers it beside a running replica)")
	}
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	const base = "/beside"
	admin := newTLSCLIAt(t, e, testenv.TLSSuperUserCN, base) // ZooKeeper's super user, as in the demo
	replica := newTLSCLIAt(t, e, "replica", base)
	worker := newTLSCLIAt(t, e, "worker", base)
	replica.env["SEQKEEPER_STORE"] = admin.env["SEQKEEPER_STORE"]
	r := replica.serve("r")
	eventually(t, "the replica leads", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	replica.ok("create", "demo")
	eventually(t, "demo initialised", func() bool { _, code := r.ids(t, "demo", 1); return code == http.StatusOK })
	if _, errOut, code := worker.run("", "take", "demo"); code == 0 {
		t.Fatal("the worker took before any layout named it")
	} else {
		t.Logf("before the layout, the worker is refused: %s", strings.TrimSpace(errOut))
	}
	// The layout goes on while the replica runs; a sequence registered
	// right after the first pass is initialised by the primary, whose
	// copy of the layout is up to seqzk.LayoutTTL old: its marker carries
	// the replica's own ACL until the second pass.
	applied := make(chan string, 1)
	go func() {
		out, errOut, code := admin.run("", "acl", "apply", "--settle", (seqzk.LayoutTTL + 2*time.Second).String(),
			"--admin", "x509:CN="+testenv.TLSSuperUserCN, "--replica", "x509:CN=replica", "--worker", "x509:CN=worker")
		if code != 0 {
			out = fmt.Sprintf("exit %d: %s%s", code, out, errOut)
		} else {
			out = ""
		}
		applied <- out
	}()
	eventually(t, "the first pass", func() bool {
		acl, _, err := admin.conn.Session().GetACL(context.Background(), replica.root)
		return err == nil && len(acl) == 3
	})
	replica.ok("create", "later")
	eventually(t, "later initialised", func() bool { _, code := r.ids(t, "later", 1); return code == http.StatusOK })
	if msg := <-applied; msg != "" {
		t.Fatalf("acl apply: %s", msg)
	}
	for _, name := range []string{"demo", "later"} {
		if out, errOut, code := worker.run("", "take", name, "-n", "3"); code != 0 {
			t.Fatalf("the worker takes from %s after acl apply: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	admin.ok("acl", "show")
}

// acl show says what it finds on a root without a layout, in text and in
// JSON, and refuses a root that does not exist rather than print nothing.
func TestACLShowOnAnOpenOrMissingRoot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, errOut, code := c.run("", "acl", "show")
	if code != 1 || !strings.Contains(errOut, "does not exist: no layout to show") {
		t.Fatalf("acl show of a missing root: exit %d, %q %q; want 1 and that it does not exist", code, out, errOut)
	}
	c.ok("create", "open")
	if out := c.ok("acl", "show"); !strings.Contains(out, "has no layout: its ACL names no roles") {
		t.Fatalf("acl show of an open root: %q", out)
	}
	var got struct {
		Root  string
		Open  bool
		Roles map[string][]string
		Wider []any
	}
	if err := json.Unmarshal([]byte(c.ok("acl", "show", "-o", "json")), &got); err != nil || !got.Open || got.Root == "" || len(got.Roles) != 0 || got.Wider == nil {
		t.Fatalf("acl show -o json of an open root: %+v, %v", got, err)
	}
}

// storeOf opens c's file store.
func storeOf(t *testing.T, c *cli) *persist.Store {
	t.Helper()
	b, err := persist.NewFile(strings.TrimPrefix(c.env["SEQKEEPER_STORE"], "file://"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Root: c.root})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// storedRecord reads name's record in c's file store.
func storedRecord(t *testing.T, c *cli, name string) persist.Record {
	t.Helper()
	rec, err := storeOf(t, c).Get(context.Background(), name)
	if err != nil {
		t.Fatalf("the store's record of %s: %v", name, err)
	}
	return rec
}
