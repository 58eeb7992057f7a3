package zkclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"
)

// tlsDial wraps dial so that every connection speaks TLS with a clone of
// cfg, as ZooKeeper's secureClientPort expects. go-zookeeper resolves
// server names before it dials, so the address is an IP address; the name
// the certificate must hold is cfg.ServerName if set, or else the server
// name (of those the client was given) that resolves to that address. The
// handshake runs within the dial's timeout, and its failure is explained
// (explainTLS) and recorded for Dial's error.
func (c *Client) tlsDial(dial func(string, string, time.Duration) (net.Conn, error), cfg *tls.Config) func(string, string, time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		raw, err := dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		tc := cfg.Clone()
		if tc.ServerName == "" {
			tc.ServerName = serverName(c.servers, address)
		}
		conn := tls.Client(raw, tc)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			err = explainTLS(address, tc.ServerName, err)
			c.lastDialErr.Store(&err)
			return nil, err
		}
		c.lastDialErr.Store(nil)
		return conn, nil
	}
}

// recordDial wraps dial so that its failures are kept for Dial's error.
func (c *Client) recordDial(dial func(string, string, time.Duration) (net.Conn, error)) func(string, string, time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := dial(network, address, timeout)
		if err != nil {
			c.lastDialErr.Store(&err)
		} else {
			c.lastDialErr.Store(nil)
		}
		return conn, err
	}
}

// serverName is the host of the first of servers that is, or resolves to,
// address's IP; or that IP when none does (a certificate may hold an IP
// address).
func serverName(servers []string, address string) string {
	ip, _, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	for _, s := range servers {
		host, _, err := net.SplitHostPort(s)
		if err != nil {
			host = s // no port: ZooKeeper's default is added later
		}
		if host == ip {
			return host
		}
		if net.ParseIP(host) != nil {
			continue
		}
		if addrs, err := net.LookupHost(host); err == nil && slices.Contains(addrs, ip) {
			return host
		}
	}
	return ip
}

// ErrTLS marks a connection whose TLS handshake with a server failed; its
// message names the likely fix.
var ErrTLS = errors.New("zookeeper TLS")

// explainTLS words a failed handshake with server (as name) so that its
// message says what to change: the CA bundle, the server name, the port or
// the client certificate.
func explainTLS(address, name string, err error) error {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		alert     tls.AlertError
	)
	var hint string
	switch {
	case errors.As(err, &unknownCA):
		hint = "the server's certificate is signed by an authority the CA bundle does not hold: " +
			"give the CA that signed ZooKeeper's certificate (zk_tls_ca_file)"
	case errors.As(err, &hostname):
		hint = fmt.Sprintf("the server's certificate is not valid for %q: connect by a name it holds, "+
			"or set the name to verify (zk_tls_server_name) to one", name)
	case errors.As(err, &invalid):
		hint = "the server's certificate is not valid (expired, or not for server authentication): renew it"
	case errors.As(err, &record):
		hint = "the server does not speak TLS on this port: is it ZooKeeper's plain clientPort? " +
			"Give the secureClientPort"
	case errors.As(err, &alert), isAlert(err):
		hint = "the server refused this client's certificate: ZooKeeper needs one signed by a CA in its " +
			"ssl.trustStore (zk_tls_cert_file and zk_tls_key_file)"
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded):
		hint = "the server closed or stalled the TLS handshake: is it ZooKeeper's plain clientPort? " +
			"Give the secureClientPort (if it is that port, ZooKeeper refused this client: it requires a " +
			"client certificate signed by a CA in its ssl.trustStore, zk_tls_cert_file and zk_tls_key_file)"
	default:
		hint = "check the CA bundle, the client certificate and the port"
	}
	return fmt.Errorf("%w: handshake with %s: %w: %s", ErrTLS, address, err, hint)
}

// isAlert reports whether err is a TLS alert the peer sent (tls.AlertError
// is the local kind; a remote alert is an unexported type whose message
// starts "remote error: tls:").
func isAlert(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s := e.Error(); len(s) >= 17 && s[:17] == "remote error: tls" {
			return true
		}
	}
	return false
}
