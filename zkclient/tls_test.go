package zkclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// A real ZooKeeper 3.8 that serves TLS only, requires client certificates
// and authenticates by them (x509): a client with a certificate from the
// ensemble's CA gets a session whose identity is its subject, and a znode
// it creates for that identity alone is closed to another certificate.
func TestTLSWithX509Identity(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	ctx := context.Background()
	dial := func(cn string, acl ...zkclient.ACL) *zkclient.Client {
		t.Helper()
		c, err := zkclient.Dial(ctx, e.Servers(), zkclient.Options{TLS: e.ClientTLS(t, cn), ACL: acl, ConnectTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	alice := dial("alice", zkclient.ACL{Perms: zkclient.PermAll, ID: zkclient.ID{Scheme: "x509", ID: "CN=alice"}})
	if _, err := alice.Session().Create(ctx, "/alice", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	acl, _, err := alice.Session().GetACL(ctx, "/alice")
	if err != nil || len(acl) != 1 || acl[0].String() != "x509:CN=alice:crwda" {
		t.Fatalf("ACL of /alice: %v, %v", acl, err)
	}
	if _, _, err := alice.Session().Get(ctx, "/alice"); err != nil {
		t.Fatalf("alice reads her own znode: %v", err)
	}
	bob := dial("bob")
	if _, _, err := bob.Session().Get(ctx, "/alice"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("bob reads alice's znode: %v; want no auth", err)
	}
	if _, err := bob.Session().Set(ctx, "/alice", []byte("2"), zkclient.AnyVersion); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("bob writes alice's znode: %v; want no auth", err)
	}
	if mode, why := zkclient.DetectMode(ctx, bob); mode != zkclient.ModeQuorum {
		t.Fatalf("mode over TLS: %v (%s)", mode, why)
	}
}

// Each way of getting TLS wrong fails within the connect timeout with an
// error that names the fix.
func TestTLSErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	e := testenv.StartTLSEnsemble(t, 1)
	plain := testenv.ZooKeeper(t)
	good := e.ClientTLS(t, "good")
	other := testenv.NewCA(t, "other-ca")
	noCert := &tls.Config{RootCAs: good.RootCAs, MinVersion: tls.VersionTLS12}
	wrongName := good.Clone()
	wrongName.ServerName = "zookeeper.example"
	unknownCA := good.Clone()
	unknownCA.RootCAs = other.Pool()
	for _, tc := range []struct {
		name    string
		servers []string
		tls     *tls.Config
		want    string
	}{
		{"unknown CA", e.Servers(), unknownCA, "signed by an authority the CA bundle does not hold"},
		{"name not in the certificate", e.Servers(), wrongName, `not valid for "zookeeper.example"`},
		{"no client certificate", e.Servers(), noCert, "refused this client"},
		{"TLS to a plain port", plain.Servers, good, "plain clientPort? Give the secureClientPort"},
		{"plain to a TLS port", e.Servers(), nil, "If ZooKeeper serves TLS only (a secureClientPort), configure TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := zkclient.Dial(context.Background(), tc.servers, zkclient.Options{TLS: tc.tls, ConnectTimeout: 3 * time.Second})
			if !errors.Is(err, zkclient.ErrNoSession) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want ErrNoSession naming %q", err, tc.want)
			}
		})
	}
}
