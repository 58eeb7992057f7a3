// Command devcerts writes a throwaway certificate authority and the
// certificates of the demo stack's TLS mode (scripts/demo.sh --tls): a
// ZooKeeper server certificate with its key store, and client certificates
// whose subjects are the demo's x509 identities. Never use them for
// anything but a demo: the CA's key lies beside them.
//
//	go run ./internal/tools/devcerts -dir .demo-tls -hosts zoo1,zoo2,zoo3,localhost -clients seqkeeper-replica,seqkeeper-admin
//
// It writes ca.pem, server-keystore.pem (key, then certificate: ZooKeeper
// 3.8 reads it with ssl.keyStore.type=PEM) and <client>.pem and
// <client>-key.pem for each client, and leaves existing files alone (a
// running stack keeps trusting its CA) unless -force is given.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	dir := flag.String("dir", ".demo-tls", "directory to write the files into")
	hosts := flag.String("hosts", "localhost", "comma-separated names and addresses of the server certificate")
	clients := flag.String("clients", "", "comma-separated common names of client certificates")
	force := flag.Bool("force", false, "write new files over existing ones")
	flag.Parse()
	if err := run(*dir, split(*hosts), split(*clients), *force); err != nil {
		fmt.Fprintln(os.Stderr, "devcerts:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func run(dir string, hosts, clients []string, force bool) error {
	if len(hosts) == 0 {
		return errors.New("-hosts: give at least one name")
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err == nil && !force {
		fmt.Printf("devcerts: %s holds certificates already (-force to replace them)\n", dir)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seqkeeper demo CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, names []string) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		for _, h := range names {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key) // PKCS #8: what ZooKeeper's PEM reader takes
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
	}
	files := map[string][]byte{"ca.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	cert, key, err := issue(2, hosts[0], x509.ExtKeyUsageServerAuth, hosts)
	if err != nil {
		return err
	}
	files["server-keystore.pem"] = append(key, cert...)
	for i, cn := range clients {
		cert, key, err := issue(int64(3+i), cn, x509.ExtKeyUsageClientAuth, nil)
		if err != nil {
			return err
		}
		files[cn+".pem"], files[cn+"-key.pem"] = cert, key
	}
	for name, data := range files {
		// Readable by the containers' users (a demo: see the package doc).
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("devcerts: wrote a CA, a server certificate for %s and %d client certificate(s) to %s\n", strings.Join(hosts, ", "), len(clients), dir)
	return nil
}
