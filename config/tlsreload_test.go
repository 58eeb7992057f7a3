package config_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A renewed certificate is served without a restart once its files
// change; a pair that does not load leaves the last good one in use; bad
// files at start are ErrInvalid naming the file.
func TestTLSCertificateReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(cert, key []byte) {
		t.Helper()
		for p, b := range map[string][]byte{certFile: cert, keyFile: key} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, renewed := testenv.NewCA(t, "first CA"), testenv.NewCA(t, "renewing CA")
	write(first.Issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1"))
	cfg := config.DefaultConfig()
	cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile = certFile, keyFile
	tc, err := cfg.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first.PEM)
	roots.AppendCertsFromPEM(renewed.PEM)
	issuer := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Issuer.CommonName
	}
	if got := issuer(); got != "first CA" {
		t.Fatalf("served a certificate of %q, want first CA", got)
	}

	write(renewed.Issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1"))
	deadline := time.Now().Add(10 * time.Second)
	for issuer() != "renewing CA" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served 10 s after its files changed")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A broken pair: the last good certificate stays in use.
	if err := os.WriteFile(certFile, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past a check
	for range 3 {
		if got := issuer(); got != "renewing CA" {
			t.Fatalf("with a broken certificate file: served %q, want the last good one", got)
		}
	}

	// At start, a broken pair is a configuration error naming the file.
	if _, err := cfg.TLSConfig(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("TLSConfig with a broken certificate: %v, want ErrInvalid naming %s", err, certFile)
	}
}
