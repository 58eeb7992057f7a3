package config

import (
	"crypto/tls"
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
	stamp   [2]fileStamp
	checked time.Time
}

// fileStamp tells whether a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path) // follows symbolic links, as Secret mounts use
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.ModTime(), fi.Size()}
}

// newCertReloader loads the pair once; its error is the caller's to word.
func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	stamp := [2]fileStamp{stampOf(certFile), stampOf(keyFile)}
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
	stamp := [2]fileStamp{stampOf(r.certFile), stampOf(r.keyFile)}
	if stamp == r.stamp {
		return r.cert, nil
	}
	if cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile); err == nil {
		r.cert, r.stamp = &cert, stamp
	}
	return r.cert, nil
}
