package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"slices"
	"sync"
	"time"
)

// certCheckEvery is how often, at most, a TLS handshake looks whether the
// certificate or key file changed: two stat calls a second at most.
var certCheckEvery = time.Second

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

// reloader holds what load makes of some files (a certificate and its
// key, a CA bundle), made again when one of them changes (a renewed
// certificate, a Kubernetes Secret updated in place), so that renewing
// needs no restart. It looks at most once every certCheckEvery. A load
// that fails (the key written before the certificate, say) leaves the
// last good value in use, tried again at the next look.
type reloader[T any] struct {
	files []string
	load  func() (T, error)

	mu      sync.Mutex
	val     T
	stamps  []FileStamp
	checked time.Time
}

// newReloader loads once; its error is the caller's to word.
func newReloader[T any](load func() (T, error), files ...string) (*reloader[T], error) {
	r := &reloader[T]{files: files, load: load, stamps: stampsOf(files)}
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.val, r.checked = v, time.Now()
	return r, nil
}

func stampsOf(files []string) []FileStamp {
	out := make([]FileStamp, len(files))
	for i, f := range files {
		out[i] = StampOf(f)
	}
	return out
}

// current returns the value, made again if a file changed.
func (r *reloader[T]) current() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < certCheckEvery {
		return r.val
	}
	r.checked = time.Now()
	if stamps := stampsOf(r.files); !slices.Equal(stamps, r.stamps) {
		if v, err := r.load(); err == nil {
			r.val, r.stamps = v, stamps
		}
	}
	return r.val
}

// certReloader serves a certificate and its key (the HTTP API's, the
// ZooKeeper client's), read again when its files change.
func certReloader(certFile, keyFile string) (*reloader[*tls.Certificate], error) {
	return newReloader(func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		return &cert, err
	}, certFile, keyFile)
}

// poolReloader serves a CA bundle, read again when its file changes.
func poolReloader(file string) (*reloader[*x509.CertPool], error) {
	return newReloader(func() (*x509.CertPool, error) {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("holds no PEM certificate")
		}
		return pool, nil
	}, file)
}

// verifyServer is tls.Config.VerifyConnection for a client whose CA bundle
// may change: crypto/tls's own verification reads RootCAs once, so the
// configuration skips it (InsecureSkipVerify) and this does the same
// checks, chain and name, against the current bundle. Its errors are
// crypto/x509's, as the built-in verification's would be.
func verifyServer(r *reloader[*x509.CertPool], cs tls.ConnectionState) error {
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
