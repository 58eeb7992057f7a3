package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// zkTLS is what an ensemble's servers need to serve TLS only: a CA that
// signs the servers' and clients' certificates, and the PEM stores.
type zkTLS struct {
	ca *CA
	// keyStore holds a server's key and certificate (for 127.0.0.1 and
	// localhost), trustStore the CA: ZooKeeper 3.8 reads both as PEM.
	keyStore, trustStore string
	// probe is the client configuration of the ensemble's own checks
	// (srvr), with a certificate of its own.
	probe *tls.Config
}

// TLSSuperUser is the x509 identity that ZooKeeper's x509 provider treats
// as a super user in a TLS ensemble: a test's set-up and clean-up may use it
// (TLSFiles(t, TLSSuperUserCN)) to see and remove what other identities
// cannot.
const TLSSuperUserCN = "testenv-super"

func (z *zkTLS) config(port int) string {
	var b strings.Builder
	// TLS only: no clientPort. Netty serves the secure port; the x509
	// provider makes a client certificate's subject the session's identity.
	b.WriteString("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n")
	fmt.Fprintf(&b, "secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n", port)
	fmt.Fprintf(&b, "ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n", z.keyStore)
	fmt.Fprintf(&b, "ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n", z.trustStore)
	b.WriteString("ssl.clientAuth=need\n")
	b.WriteString("authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n")
	fmt.Fprintf(&b, "X509AuthenticationProvider.superUser=CN=%s\n", TLSSuperUserCN)
	return b.String()
}

// StartTLSEnsemble is StartEnsemble with servers that serve TLS only
// (secureClientPort, NettyServerCnxnFactory, PEM stores), require a client
// certificate signed by the ensemble's CA, and authenticate clients by it
// (ZooKeeper's x509 scheme: the identity x509:CN=<name> for a certificate
// from TLSFiles or ClientTLS).
func StartTLSEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	return startLaidOut(t, NewTLSEnsemble, n)
}

// NewTLSEnsemble lays out, under dir, the ensemble StartTLSEnsemble
// starts, with a new CA, without starting it. The caller must call
// StopAll.
func NewTLSEnsemble(dir string, n int) (*Ensemble, error) {
	ca, err := newCA("zookeeper-test-ca")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.issue(x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	z := &zkTLS{ca: ca, keyStore: filepath.Join(dir, "server-keystore.pem"), trustStore: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(z.keyStore, append(keyPEM, certPEM...), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(z.trustStore, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	e, err := NewEnsemble(dir, n)
	if err != nil {
		return nil, err
	}
	e.tls = z
	if z.probe, err = e.clientTLS("testenv-probe"); err != nil {
		return nil, err
	}
	for _, s := range e.servers {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("zk%d", s.id), "zoo.cfg"), []byte(e.config(s)), 0o644); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// CA is the TLS ensemble's certificate authority (nil without TLS).
func (e *Ensemble) CA() *CA {
	if e.tls == nil {
		return nil
	}
	return e.tls.ca
}

// ClientTLS returns a client configuration for the TLS ensemble with a new
// certificate whose subject is CN=cn: ZooKeeper's identity x509:CN=cn.
func (e *Ensemble) ClientTLS(t testing.TB, cn string) *tls.Config {
	t.Helper()
	c, err := e.clientTLS(cn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *Ensemble) clientTLS(cn string) (*tls.Config, error) {
	certPEM, keyPEM, err := e.tls.ca.issue(x509.ExtKeyUsageClientAuth, cn)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: e.tls.ca.Pool(), Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// TLSFiles writes the CA bundle and a new client certificate and key with
// the subject CN=cn to a directory of the test's, for seqkeeper's
// zk_tls_ca_file, zk_tls_cert_file and zk_tls_key_file.
func (e *Ensemble) TLSFiles(t testing.TB, cn string) (caFile, certFile, keyFile string) {
	t.Helper()
	caFile, certFile, keyFile, err := e.WriteTLSFiles(t.TempDir(), cn)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, certFile, keyFile
}

// WriteTLSFiles is TLSFiles into dir: ca.pem, CN.pem and CN-key.pem.
func (e *Ensemble) WriteTLSFiles(dir, cn string) (caFile, certFile, keyFile string, err error) {
	certPEM, keyPEM, err := e.tls.ca.issue(x509.ExtKeyUsageClientAuth, cn)
	if err != nil {
		return "", "", "", err
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	for f, data := range map[string][]byte{caFile: e.tls.ca.PEM, certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return "", "", "", err
		}
	}
	return caFile, certFile, keyFile, nil
}

// fourLetterWord asks a server, over TLS for a TLS ensemble.
func (e *Ensemble) fourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	if e.tls != nil {
		return zkclient.FourLetterWordTLS(ctx, addr, cmd, e.tls.probe)
	}
	return zkclient.FourLetterWord(ctx, addr, cmd)
}
