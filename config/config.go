// Package config is the one place where seqkeeper's settings are defined,
// defaulted, read and checked.
//
// Every setting has one name used three ways: a YAML key in the config file
// (zk_session_timeout), a command-line flag (--zk-session-timeout) and an
// environment variable (SEQKEEPER_ZK_SESSION_TIMEOUT). Sources are layered
// in a fixed order, each overriding the one before it:
//
//	DefaultConfig()  <  config file (--config, SEQKEEPER_CONFIG)  <  environment  <  flags
//
// Resolve does all of it and then Validate, which holds every check in one
// place (as hashicorp/raft's ValidateConfig does), so a program never runs
// on a half-checked configuration.
//
// Secrets (the ZooKeeper digest, the HTTP token) are of type Secret, whose
// String, GoString, MarshalJSON, MarshalText and MarshalYAML all print
// "[redacted]": a Config can be logged or printed whole without leaking them.
// Reveal is the one way to read a secret's value.
//
// # What is not checked
//
// Validate checks the form of every setting, not whether the servers behind
// them answer: an unreachable ZooKeeper or store is found when it is dialled.
// The store URL is checked for its scheme and shape only; the store package
// owns its query parameters. The HTTP token file is read by BearerToken, not
// by Validate, so that commands that do not serve HTTP do not fail on it.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Defaults of the settings, applied by DefaultConfig (those of the
// primary's by DefaultPrimary) and named by the documentation and tests.
const (
	DefaultRoot             = seqzk.DefaultRoot // the library's, so the two cannot differ
	DefaultElectionPath     = "/seqkeeper/election"
	DefaultMarkerPath       = "/seqkeeper/cluster"
	DefaultHTTP             = "127.0.0.1:7070"
	DefaultLogFormat        = LogFormatAuto
	DefaultZKSessionTimeout = zkclient.DefaultSessionTimeout
	// DefaultZKConnectTimeout is serve's wait for its first ZooKeeper
	// session (an ensemble starting beside it gets time to form);
	// DefaultCLIZKConnectTimeout the operator commands', which fail fast.
	// zk_connect_timeout 0 (the default) picks the one that fits.
	DefaultZKConnectTimeout    = 30 * time.Second
	DefaultCLIZKConnectTimeout = 5 * time.Second
	DefaultCeilingWait         = seqzk.DefaultCeilingWait
	DefaultCrashProbe          = 250 * time.Millisecond
	DefaultRunway              = 60 * time.Second
	DefaultMinReserve          = 1000
	DefaultMaxReserve          = 1 << 40
	DefaultSweepInterval       = 10 * time.Second
	DefaultAuditInterval       = 5 * time.Minute
)

// MaxMetricsTopSequences bounds metrics_top_sequences: per-sequence series
// are for the few that matter, not a second export of every sequence.
const MaxMetricsTopSequences = 1000

// MaxReserveLimit is the largest min_reserve and max_reserve accepted:
// 2^50 (1125899906842624, about 1.1e15). The primary computes 2*reserve
// and next+reserve in int64; the cap keeps that arithmetic far from
// overflow, and no sequence needs a runway of more than 10^15 IDs.
const MaxReserveLimit = 1 << 50

// Log formats accepted by Config.LogFormat.
const (
	// LogFormatAuto writes human-readable lines when standard error is a
	// terminal and JSON otherwise.
	LogFormatAuto = "auto"
	// LogFormatJSON writes one JSON object per line.
	LogFormatJSON = "json"
	// LogFormatConsole writes human-readable lines.
	LogFormatConsole = "console"
)

// EnvPrefix starts the name of every environment variable read by
// ApplyEnv; the rest is the setting's key in upper case.
const EnvPrefix = "SEQKEEPER_"

// EnvConfigFile names the environment variable holding the config file
// path, the fallback of the --config flag.
const EnvConfigFile = EnvPrefix + "CONFIG"

// ErrInvalid is wrapped by every error of Validate, LoadFile, Parse,
// ApplyEnv and Flags.Apply: the configuration, not the environment, is at
// fault, and the user must change a setting.
var ErrInvalid = errors.New("invalid configuration")

// Config is every setting of seqkeeper. Create it with DefaultConfig and
// check it with Validate before use; the zero value is not valid.
//
// Invariants checked by Validate, beyond each field's own form:
//   - Root, ElectionPath and MarkerPath do not contain one another: a
//     candidate node or the marker under Root would look like a sequence.
//   - the primary's own (see Primary), 1 <= MinReserve <= MaxReserve <=
//     MaxReserveLimit among them.
//   - SweepInterval <= Runway: the sweep backs up missed watches, and a
//     sequence must not be able to burn through its runway between sweeps.
//   - AuditInterval >= SweepInterval: the audit runs at a sweep.
//   - HTTPToken and HTTPTokenFile are not both set.
type Config struct {
	// ZK lists the ZooKeeper servers as host:port. Required.
	ZK []string
	// ZKSessionTimeout is the session timeout asked of ZooKeeper. It must
	// lie within the servers' negotiable range (by default 4s to 40s), as
	// leadership safety margins are derived from it.
	ZKSessionTimeout time.Duration
	// ZKConnectTimeout bounds the wait for the first ZooKeeper session; 0
	// means the command's own default (ConnectTimeout).
	ZKConnectTimeout time.Duration
	// ZKDigest is "user:password" for ZooKeeper digest authentication; when
	// set, every znode seqkeeper creates carries a digest ACL for this user.
	ZKDigest Secret
	// ZKTLSCAFile, ZKTLSCertFile and ZKTLSKeyFile make every ZooKeeper
	// connection TLS (ZooKeeper's secureClientPort): the CA bundle that
	// signed the servers' certificates (empty: the system's), and this
	// process's client certificate and key (both or neither). With a client
	// certificate, ZooKeeper's x509 scheme makes its subject the session's
	// identity. All three are read again when they change.
	ZKTLSCAFile, ZKTLSCertFile, ZKTLSKeyFile string
	// ZKTLS turns TLS on with none of the files (the system's CAs, no
	// client certificate); any of them turns it on too.
	ZKTLS bool
	// ZKTLSServerName is the name the servers' certificates must hold;
	// empty: each server's name as given in ZK.
	ZKTLSServerName string
	// ZKACL is the ACL layout, the identities of each role indexed by
	// seqkeeper's roles (seqzk.Reader to seqzk.Admin), as 'seqkeeper acl
	// apply' takes them. Set, it is what every znode the replicas create
	// carries, and what the primary holds the root to: the layout comes
	// back after ZooKeeper loses its data. Empty: the root's ACL decides.
	ZKACL [4][]string
	// Root is the znode under which sequences live.
	Root string
	// ElectionPath is the directory of the replicas' leader election
	// candidates; every replica and the CLI of one cluster must agree.
	// Empty: derived from Root (DerivedPaths), filled in by Validate.
	ElectionPath string
	// derived records which of ElectionPath and MarkerPath Validate
	// derived from Root rather than found set (see PathDerived).
	derived struct{ election, marker bool }
	// Store is the durable store URL: s3://bucket/prefix (with
	// ?endpoint=URL&region=R for S3-compatible servers, and
	// &sse_kms_key_id=KEY for SSE-KMS) or file:///path.
	// Empty means no store: serve refuses to run as primary, and delete
	// refuses to run.
	Store string
	// CreateBucket lets serve create a missing S3 bucket (or store
	// directory). Off, serve never calls CreateBucket, so credentials
	// without s3:CreateBucket work; a missing bucket then fails the first
	// store read with an error naming it.
	CreateBucket bool
	// HTTP is the host:port the HTTP ID API listens on.
	HTTP string
	// HTTPToken, when set, is the bearer token every API call must carry.
	HTTPToken Secret
	// HTTPTokenFile names a file holding the bearer token (trailing newline
	// ignored), so the token stays out of the process environment.
	HTTPTokenFile string
	// HTTPAdminToken, when set, is the bearer token of the admin routes
	// (POST /v1/sequences, DELETE /v1/sequences/{name}); it also works on
	// every other route. Unset, the admin routes answer 403.
	HTTPAdminToken Secret
	// HTTPAdminTokenFile names a file holding the admin token.
	HTTPAdminTokenFile string
	// HTTPTLSCertFile and HTTPTLSKeyFile, both or neither, make the HTTP
	// API serve HTTPS with this PEM certificate (chain) and key.
	HTTPTLSCertFile string
	HTTPTLSKeyFile  string
	// HTTPTLSClientCAFile, with TLS on, makes the API require a client
	// certificate signed by one of this PEM file's CAs.
	HTTPTLSClientCAFile string
	// ShutdownDelay is how long serve keeps serving after SIGTERM with
	// /readyz answering 503, so that load balancers and Kubernetes remove
	// the endpoint before connections are refused. 0: shut down at once.
	ShutdownDelay time.Duration
	// CrashProbe is how often the replica next in line for leadership
	// connects to the leader's advertised address and reads its
	// heartbeat, to learn that its process is gone (the port refuses
	// connections) or has stopped (the heartbeat stood still past its loss
	// limit) and take over without waiting for its session to expire
	// (election.Config.CrashProbe). 0: off; a crash then hands over after
	// one session timeout.
	CrashProbe time.Duration
	// MetricsTopSequences is how many sequences get series of their own on
	// /metrics (the N with the shortest runway, the N that served the most
	// IDs); 0, the default, exports aggregates only, so that the series
	// count does not grow with the number of sequences.
	MetricsTopSequences int64
	// LogLevel is a zerolog level (trace, debug, info, warn, error, fatal,
	// panic, disabled). Empty lets each command choose: info for serve,
	// error for the operator commands (whose ZooKeeper session ends with
	// a "connection lost" warning).
	LogLevel string
	// LogFormat is auto, json or console.
	LogFormat string
	// CeilingWait bounds how long a take waits at a sequence's ceiling for
	// the primary to raise it before failing.
	CeilingWait time.Duration
	// Primary holds the primary's tunables: the settings marker_path,
	// runway, min_reserve, max_reserve, sweep_interval and audit_interval,
	// and the ones only tests change. 'seqkeeper serve' passes it to the
	// primary as it is.
	Primary
	// AllowStandaloneZooKeeper lets serve run against a ZooKeeper in
	// standalone mode, where a rollback of ZooKeeper's data (a restore
	// from an older copy) goes unseen and can hand IDs out twice. Without
	// it serve refuses to start on a standalone server; see
	// docs/guarantees.md.
	AllowStandaloneZooKeeper bool
	// ID names this replica in the election; unique per replica. Default:
	// the host name.
	ID string
	// Roots, from the config file's roots: list, are the roots serve
	// hosts in one process, each with its own election, primary and
	// store; Root and Store are then left unset. Empty: the one root of
	// Root and Store. See RootConfig and ForRoot.
	Roots []RootConfig
	// Advertise is the host:port other replicas and operators reach this
	// replica's HTTP API at. Empty: derived from HTTP (see AdvertiseAddr).
	Advertise string
}

// DefaultConfig returns a Config holding every default. ZK has none and
// must be set.
//
// ElectionPath and MarkerPath are left empty: Validate derives them from
// Root unless they are set (DerivedPaths).
func DefaultConfig() *Config {
	c := &Config{
		ZKSessionTimeout: DefaultZKSessionTimeout,
		Root:             DefaultRoot,
		HTTP:             DefaultHTTP,
		LogFormat:        DefaultLogFormat,
		CeilingWait:      DefaultCeilingWait,
		CrashProbe:       DefaultCrashProbe,
		Primary:          DefaultPrimary(),
		ID:               defaultID(),
		CreateBucket:     true,
	}
	c.MarkerPath = ""
	return c
}

// ConnectTimeout is how long to wait for the first ZooKeeper session:
// zk_connect_timeout when set, else def (DefaultZKConnectTimeout for serve,
// DefaultCLIZKConnectTimeout for the operator commands).
func (c *Config) ConnectTimeout(def time.Duration) time.Duration {
	if c.ZKConnectTimeout > 0 {
		return c.ZKConnectTimeout
	}
	return def
}

// defaultID is the host name, or "seqkeeper" where there is none.
func defaultID() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "seqkeeper"
}

// Level returns the configured log level, or def when LogLevel is empty.
// It assumes Validate passed.
func (c *Config) Level(def zerolog.Level) zerolog.Level {
	if c.LogLevel == "" {
		return def
	}
	l, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil {
		return def
	}
	return l
}

// BearerTokens returns the tokens that take IDs: HTTPToken, or every line
// of HTTPTokenFile (several during a rotation: the new one is added, the
// clients move to it, the old one is removed); nil when neither is set.
func (c *Config) BearerTokens() ([]string, error) {
	return readTokens("http_token_file", c.HTTPToken.Reveal(), c.HTTPTokenFile)
}

// AdminTokens returns the admin routes' tokens, as BearerTokens does. None
// may also be a taker's token: one token for both would let every worker
// create and delete sequences.
func (c *Config) AdminTokens() ([]string, error) {
	admin, err := readTokens("http_admin_token_file", c.HTTPAdminToken.Reveal(), c.HTTPAdminTokenFile)
	if err != nil || len(admin) == 0 {
		return admin, err
	}
	// A taker's file that does not read is its own error (BearerTokens);
	// the admin tokens are still checked against what it held by
	// httpapi.Server.SetTokens.
	taker, _ := c.BearerTokens()
	for _, a := range admin {
		if slices.Contains(taker, a) {
			return nil, fmt.Errorf("%w: an admin token (http_admin_token) is also a token of http_token: give the admin routes tokens of their own, or every worker that takes IDs could delete sequences", ErrInvalid)
		}
	}
	return admin, nil
}

// readTokens returns inline, or the lines of file (the setting key),
// each without surrounding white space, blank lines skipped.
func readTokens(key, inline, file string) ([]string, error) {
	if file == "" {
		if inline == "" {
			return nil, nil
		}
		return []string{inline}, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, key, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			continue
		case strings.ContainsFunc(t, unicode.IsSpace):
			return nil, fmt.Errorf("%w: %s %s: want one token per line, without white space inside", ErrInvalid, key, file)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s %s is empty: write the token into it", ErrInvalid, key, file)
	}
	return out, nil
}

// TLSConfig returns the HTTP API's TLS configuration, or nil when TLS is
// off. It reads the certificate, key and client CA files: a file that is
// missing or holds no usable PEM is an ErrInvalid naming it.
func (c *Config) TLSConfig() (*tls.Config, error) {
	if c.HTTPTLSCertFile == "" {
		return nil, nil
	}
	certs, err := certReloader(c.HTTPTLSCertFile, c.HTTPTLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: http_tls_cert_file %s with http_tls_key_file %s: %v", ErrInvalid, c.HTTPTLSCertFile, c.HTTPTLSKeyFile, err)
	}
	// The certificate is read again when its files change (tlsreload.go).
	tc := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return certs.current(), nil }}
	if c.HTTPTLSClientCAFile != "" {
		pem, err := os.ReadFile(c.HTTPTLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: http_tls_client_ca_file: %v", ErrInvalid, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: http_tls_client_ca_file %s holds no PEM certificate", ErrInvalid, c.HTTPTLSClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// AdvertiseAddr is the address published in the election: Advertise if
// set, else HTTP with an unspecified host (":7070", "0.0.0.0:7070")
// replaced by ID, which defaults to the host name.
func (c *Config) AdvertiseAddr() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	host, port, err := net.SplitHostPort(c.HTTP)
	if err != nil {
		return c.HTTP
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = c.ID
	}
	return net.JoinHostPort(host, port)
}

// Warnings lists settings that are valid but probably not what the
// operator wants, for serve to log at start.
func (c *Config) Warnings() []string {
	var out []string
	host, _, err := net.SplitHostPort(c.HTTP)
	if err == nil && c.HTTPToken.Reveal() == "" && c.HTTPTokenFile == "" && c.HTTPTLSClientCAFile == "" && !isLoopback(host) {
		out = append(out, fmt.Sprintf("the HTTP API listens on %s without a bearer token: anyone who can reach it can take IDs; set http_token_file", c.HTTP))
	}
	if c.Store == "" && len(c.Roots) == 0 {
		out = append(out, "no store configured: this replica will not act as primary (ceilings must be durable before use); set store")
	}
	if w := c.layoutWarning(); w != "" {
		out = append(out, w)
	}
	return out
}

// layoutWarning says when the configured ACL layout (zk_acl_*) gives none
// of this process's ZooKeeper identities the replica or the admin role: a
// primary that re-creates the root after ZooKeeper lost its data would
// create it with an ACL that refuses the primary itself.
func (c *Config) layoutWarning() string {
	l, err := c.Layout()
	ids, idErr := c.ZKIdentities()
	if err != nil || idErr != nil || len(l.Roles) == 0 {
		return ""
	}
	for _, id := range append(l.Roles[seqzk.Replica], l.Roles[seqzk.Admin]...) {
		if id.Scheme == "world" || id.Scheme == "ip" || slices.Contains(ids, id) {
			return ""
		}
	}
	mine := "none: no client certificate and no zk_digest"
	if len(ids) > 0 {
		mine = fmt.Sprint(ids)
	}
	return fmt.Sprintf("zk_acl_replica and zk_acl_admin name none of this process's ZooKeeper identities (%s): "+
		"after ZooKeeper loses its data, the primary would re-create the root with a layout that refuses it; add its identity to zk_acl_replica", mine)
}

// LoopbackOnly reports whether the HTTP API listens on a loopback address
// only, out of reach of other hosts, containers and Kubernetes probes.
func (c *Config) LoopbackOnly() bool {
	host, _, err := net.SplitHostPort(c.HTTP)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String lists every setting as key=value in a fixed order, secrets
// redacted.
func (c *Config) String() string {
	var b strings.Builder
	for i, s := range settings {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", s.key, s.display(c))
	}
	return b.String()
}
