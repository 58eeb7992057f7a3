package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// zkTLSOn reports whether ZooKeeper connections use TLS.
func (c *Config) zkTLSOn() bool {
	return c.ZKTLS || c.ZKTLSCAFile != "" || c.ZKTLSCertFile != ""
}

// ZKTLSConfig is the TLS configuration of ZooKeeper connections, nil when
// TLS is off. The CA bundle and the client certificate are read again when
// their files change (a renewed certificate, a rotated CA, a Kubernetes
// Secret updated in place), at the next connection's handshake.
func (c *Config) ZKTLSConfig() (*tls.Config, error) {
	if !c.zkTLSOn() {
		return nil, nil
	}
	tc := &tls.Config{ServerName: c.ZKTLSServerName, MinVersion: tls.VersionTLS12}
	if c.ZKTLSCAFile != "" {
		pool, err := poolReloader(c.ZKTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: zk_tls_ca_file %s: %v", ErrInvalid, c.ZKTLSCAFile, err)
		}
		// Verified by verifyServer against the current bundle, with the
		// same checks crypto/tls makes (chain, name, usage).
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error { return verifyServer(pool, cs) }
	}
	if c.ZKTLSCertFile != "" {
		certs, err := certReloader(c.ZKTLSCertFile, c.ZKTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: zk_tls_cert_file %s with zk_tls_key_file %s: %v", ErrInvalid, c.ZKTLSCertFile, c.ZKTLSKeyFile, err)
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certs.current(), nil }
	}
	return tc, nil
}

// ZKIdentities are the ZooKeeper identities of this process's sessions:
// x509:<subject> for a client certificate (ZooKeeper's x509 provider
// names a certificate by its subject, as RFC 2253 writes it), and
// digest:<user>:<hash> for zk_digest.
func (c *Config) ZKIdentities() ([]zkclient.ID, error) {
	var ids []zkclient.ID
	if c.ZKTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.ZKTLSCertFile, c.ZKTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: zk_tls_cert_file %s with zk_tls_key_file %s: %v", ErrInvalid, c.ZKTLSCertFile, c.ZKTLSKeyFile, err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("%w: zk_tls_cert_file %s: %v", ErrInvalid, c.ZKTLSCertFile, err)
		}
		ids = append(ids, zkclient.ID{Scheme: "x509", ID: leaf.Subject.String()})
	}
	if d := c.ZKDigest.Reveal(); d != "" {
		ids = append(ids, zkclient.DigestID(d))
	}
	return ids, nil
}
