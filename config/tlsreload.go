package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"sync"
	"time"
)

// certCheckEvery is how often, at most, a TLS handshake looks whether the
// certificate or key file changed: two stat calls a second at most.
var certCheckEvery = time.Second

// certReloader serves the HTTP API's certificate, read again when its
// files change (a renewed certificate, a Kubernetes Secret updated in
// place), so that renewing needs no restart. A pair that does not load
// (the key written before the certificate, say) leaves the last good one
// in use and is tried again at the next check.
type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]FileStamp
	checked time.Time
}

// FileStamp tells whether a file changed: its modification time and size,
// as StampOf reads them (the zero value for a file that cannot be read).
// Every file seqkeeper reads again when it changes (certificates, CA
// bundles, token files) is watched by it.
type FileStamp struct {
	mod  time.Time
	size int64
}

// StampOf reads path's FileStamp, following symbolic links (as Secret
// mounts use).
func StampOf(path string) FileStamp {
	fi, err := os.Stat(path) // follows symbolic links, as Secret mounts use
	if err != nil {
		return FileStamp{}
	}
	return FileStamp{fi.ModTime(), fi.Size()}
}

// newCertReloader loads the pair once; its error is the caller's to word.
func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	stamp := [2]FileStamp{StampOf(certFile), StampOf(keyFile)}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	return r, nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < certCheckEvery {
		return r.cert, nil
	}
	r.checked = time.Now()
	stamp := [2]FileStamp{StampOf(r.certFile), StampOf(r.keyFile)}
	if stamp == r.stamp {
		return r.cert, nil
	}
	if cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile); err == nil {
		r.cert, r.stamp = &cert, stamp
	}
	return r.cert, nil
}

// getClientCertificate is tls.Config.GetClientCertificate.
func (r *certReloader) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.getCertificate(nil)
}

// poolReloader serves a CA bundle, read again when its file changes; a
// file that does not parse leaves the last good pool in use.
type poolReloader struct {
	file string

	mu      sync.Mutex
	pool    *x509.CertPool
	stamp   FileStamp
	checked time.Time
}

// newPoolReloader loads the bundle once; its error is the caller's to word.
func newPoolReloader(file string) (*poolReloader, error) {
	r := &poolReloader{file: file}
	stamp := StampOf(file)
	pool, err := loadPool(file)
	if err != nil {
		return nil, err
	}
	r.pool, r.stamp, r.checked = pool, stamp, time.Now()
	return r, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("holds no PEM certificate")
	}
	return pool, nil
}

// current returns the pool, read again if the file changed.
func (r *poolReloader) current() *x509.CertPool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < certCheckEvery {
		return r.pool
	}
	r.checked = time.Now()
	if stamp := StampOf(r.file); stamp != r.stamp {
		if pool, err := loadPool(r.file); err == nil {
			r.pool, r.stamp = pool, stamp
		}
	}
	return r.pool
}

// verifyServer is tls.Config.VerifyConnection for a client whose CA bundle
// may change: crypto/tls's own verification reads RootCAs once, so the
// configuration skips it (InsecureSkipVerify) and this does the same
// checks, chain and name, against the current bundle. Its errors are
// crypto/x509's, as the built-in verification's would be.
func (r *poolReloader) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName: cs.ServerName, Roots: r.current(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
