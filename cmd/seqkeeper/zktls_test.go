package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// newTLSCLI is newCLI against a ZooKeeper that serves TLS only and
// authenticates clients by certificate: the commands run as x509:CN=cn
// (zk_tls_ca_file, zk_tls_cert_file, zk_tls_key_file in the environment),
// and the test's own session is ZooKeeper's x509 super user.
func newTLSCLI(t *testing.T, e *testenv.Ensemble, cn string) *cli {
	t.Helper()
	return newTLSCLIAt(t, e, cn, "/tls-"+strings.ToLower(cn))
}

// newTLSCLIAt is newTLSCLI with the test's root (root/all-sequences,
// root/election, root/cluster) under root.
func newTLSCLIAt(t *testing.T, e *testenv.Ensemble, cn, root string) *cli {
	t.Helper()
	c := &cli{t: t, servers: e.Servers(), root: root + "/all-sequences", election: root + "/election", storeCeiling: storeCeiling}
	ca, cert, key := e.TLSFiles(t, cn)
	c.env = map[string]string{
		"SEQKEEPER_ZK":               strings.Join(e.Servers(), ","),
		"SEQKEEPER_ZK_TLS_CA_FILE":   ca,
		"SEQKEEPER_ZK_TLS_CERT_FILE": cert,
		"SEQKEEPER_ZK_TLS_KEY_FILE":  key,
		"SEQKEEPER_ELECTION_PATH":    c.election,
		"SEQKEEPER_MARKER_PATH":      root + "/cluster",
		"SEQKEEPER_CEILING_WAIT":     "500ms",
		"SEQKEEPER_LOG_FORMAT":       "json",
		"SEQKEEPER_STORE":            "file://" + t.TempDir() + "/store",
	}
	zc, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{TLS: e.ClientTLS(t, testenv.TLSSuperUserCN)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	c.conn = zc
	if c.admin, err = seqzk.NewClient(zc, seqzk.Options{Root: c.root}); err != nil {
		t.Fatal(err)
	}
	return c
}

// A replica and the operator commands talk TLS, with an x509 identity, to
// a ZooKeeper that serves TLS only: the replica leads and hands out IDs,
// and what seqkeeper creates belongs to the certificate's subject alone.
func TestServeOverZooKeeperTLSWithX509Identity(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	c := newTLSCLI(t, e, "replica")
	r := c.serve("a")
	eventually(t, "replica ready over ZooKeeper TLS", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "orders")
	var got [][2]int64
	eventually(t, "IDs from orders", func() bool {
		ranges, code := r.ids(t, "orders", 5)
		got = ranges
		return code == http.StatusOK
	})
	if len(got) == 0 || got[0][0] != 1 {
		t.Fatalf("took %v; want from 1", got)
	}
	for _, p := range []string{c.root, c.root + "/orders", c.election} {
		acl, _, err := c.conn.Session().GetACL(context.Background(), p)
		if err != nil || len(acl) != 1 || acl[0].String() != "x509:CN=replica:crwda" {
			t.Fatalf("ACL of %s: %v, %v; want the replica's certificate alone", p, acl, err)
		}
	}
	if out := c.ok("describe", "orders"); !strings.Contains(out, "orders") {
		t.Fatalf("describe over TLS: %s", out)
	}
}

// A renewed client certificate is used from the next connection on, with
// no restart: the identity changes with it.
func TestZooKeeperClientCertificateReloads(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	c := newTLSCLI(t, e, "before")
	ctx := context.Background()
	// A znode only the renewed certificate's subject may read.
	only := []zkclient.ACL{{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "x509", ID: "CN=after"}}}
	if _, err := c.conn.Session().CreateWithACL(ctx, "/renewed", nil, 0, only); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Resolve("", func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	zc, err := dialZK(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, _, err := zc.Session().Get(ctx, "/renewed"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("read as CN=before: %v; want no auth", err)
	}
	// Renew in place (as cert-manager or a Secret update does), then
	// break the connection: the next handshake presents the new one.
	_, cert, key := e.TLSFiles(t, "after")
	for src, dst := range map[string]string{cert: c.env["SEQKEEPER_ZK_TLS_CERT_FILE"], key: c.env["SEQKEEPER_ZK_TLS_KEY_FILE"]} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond) // the reloader looks at most once a second
	e.Stop(0)
	if err := e.Start(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "read as CN=after", func() bool { _, _, err := zc.Session().Get(ctx, "/renewed"); return err == nil })
}

// A CA bundle is read again when it changes: a replica whose bundle does
// not hold the servers' CA is refused, naming the bundle, and the same
// configuration connects once the right CA is in the file, with no
// restart (a CA rotation adds the new CA before the servers move to it).
func TestZooKeeperCABundleReloads(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	c := newTLSCLI(t, e, "rotator")
	caFile := c.env["SEQKEEPER_ZK_TLS_CA_FILE"]
	if err := os.WriteFile(caFile, testenv.NewCA(t, "not-the-servers-ca").PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Resolve("", func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ZKConnectTimeout = 2 * time.Second
	ctx := context.Background()
	if _, err := dialZK(ctx, cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "zk_tls_ca_file") {
		t.Fatalf("dial with the wrong CA: %v; want refused naming zk_tls_ca_file", err)
	}
	// The same configuration (its reloader), the right CA written in place.
	tc, err := cfg.ZKTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, e.CA().PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the reloader looks at most once a second
	zc, err := zkclient.Dial(ctx, e.Servers(), zkclient.Options{TLS: tc, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("dial after the CA was replaced: %v", err)
	}
	zc.Close()
}
