package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// ReplicaIdentity is the x509 identity of every replica of a cluster whose
// ZooKeeper serves TLS (Options.ZooKeeperTLS).
const ReplicaIdentity = "x509:CN=seqkeeper-replica"

// clusterTLS is the TLS material of a cluster whose ZooKeeper serves TLS
// only: one CA signs the servers' certificate (for zoo1..zooN, and
// localhost and 127.0.0.1 for the test process through the published
// ports) and every client's.
type clusterTLS struct {
	ca                   *testenv.CA
	serverStore          []byte // key then certificate, ZooKeeper's PEM key store
	replicaCert, replica []byte // the replicas' client certificate and key
	// client is the test process's configuration (CN=testenv-super, the
	// servers' x509 super user), for srvr and for clients of its own.
	client *tls.Config
}

func newClusterTLS(t testing.TB, servers int) *clusterTLS {
	t.Helper()
	ca := testenv.NewCA(t, "integration-zookeeper-ca")
	hosts := []string{"localhost", "127.0.0.1"}
	for i := range servers {
		hosts = append(hosts, fmt.Sprintf("zoo%d", i+1))
	}
	cert, key := ca.Issue(t, x509.ExtKeyUsageServerAuth, hosts...)
	z := &clusterTLS{ca: ca, serverStore: append(key, cert...)}
	z.replicaCert, z.replica = ca.Issue(t, x509.ExtKeyUsageClientAuth, "seqkeeper-replica")
	z.client = z.clientTLS(t, testenv.TLSSuperUserCN)
	return z
}

// clientTLS is a client configuration with a new certificate for CN=cn.
func (z *clusterTLS) clientTLS(t testing.TB, cn string) *tls.Config {
	t.Helper()
	certPEM, keyPEM := z.ca.Issue(t, x509.ExtKeyUsageClientAuth, cn)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: z.ca.Pool(), Certificates: []tls.Certificate{cert}, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// zooKeeperSettings are the zoo.cfg lines (ZOO_CFG_EXTRA, space-separated)
// that make a server serve TLS only on the client port, as docs/security.md
// describes, and the files they name.
func (z *clusterTLS) zooKeeperSettings() (string, testcontainers.CustomizeRequestOption) {
	cfg := strings.Join([]string{
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"secureClientPort=" + portNumber(ZooKeeperPort),
		"ssl.keyStore.location=/tls/server.pem", "ssl.keyStore.type=PEM",
		"ssl.trustStore.location=/tls/ca.pem", "ssl.trustStore.type=PEM",
		"ssl.clientAuth=need",
		"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
		"X509AuthenticationProvider.superUser=CN=" + testenv.TLSSuperUserCN,
	}, " ")
	files := testcontainers.WithFiles(
		testcontainers.ContainerFile{Reader: bytes.NewReader(z.serverStore), ContainerFilePath: "/tls/server.pem", FileMode: 0o644},
		testcontainers.ContainerFile{Reader: bytes.NewReader(z.ca.PEM), ContainerFilePath: "/tls/ca.pem", FileMode: 0o644},
	)
	return cfg, files
}

// replicaSettings are a replica's zk_tls_* settings and the files they name.
func (z *clusterTLS) replicaSettings() (map[string]string, testcontainers.CustomizeRequestOption) {
	env := map[string]string{
		"SEQKEEPER_ZK_TLS_CA_FILE":   "/tls/ca.pem",
		"SEQKEEPER_ZK_TLS_CERT_FILE": "/tls/replica.pem",
		"SEQKEEPER_ZK_TLS_KEY_FILE":  "/tls/replica-key.pem",
	}
	files := testcontainers.WithFiles(
		testcontainers.ContainerFile{Reader: bytes.NewReader(z.ca.PEM), ContainerFilePath: "/tls/ca.pem", FileMode: 0o644},
		testcontainers.ContainerFile{Reader: bytes.NewReader(z.replicaCert), ContainerFilePath: "/tls/replica.pem", FileMode: 0o644},
		testcontainers.ContainerFile{Reader: bytes.NewReader(z.replica), ContainerFilePath: "/tls/replica-key.pem", FileMode: 0o644},
	)
	return env, files
}

// ZooKeeperTLS is the test process's TLS configuration for this cluster's
// ZooKeeper (ZooKeeper's x509 super user), nil when it serves plain TCP.
func (c *Cluster) ZooKeeperTLS() *tls.Config {
	if c.zkTLS == nil {
		return nil
	}
	return c.zkTLS.client
}
