// Validation of the whole configuration: every problem at once, each
// naming its setting and the fix.

package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Validate checks every setting and every invariant between settings, and
// returns all problems at once (joined), each naming the setting and how to
// set it. Every error wraps ErrInvalid.
//
// Validate first derives election_path and marker_path from root where
// they are not set (DerivedPaths).
func (c *Config) Validate() error {
	c.derivePaths()
	var p problems
	c.checkZK(&p)
	if _, err := c.Layout(); err != nil {
		p = append(p, err)
	}
	c.checkPaths(&p)
	if len(c.Roots) > 0 {
		p = append(p, c.validateRoots()...)
	}
	if err := storeProblem(c.Store); err != nil {
		p.bad("store", "%s: %v", RedactURL(c.Store), err)
	}
	c.checkHTTPAndTLS(&p)
	c.checkService(&p)
	c.checkPacing(&p)
	switch {
	case c.ID == "":
		p.bad("id", "empty: each replica needs a unique id")
	case len(c.ID) > 255 || strings.ContainsFunc(c.ID, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		p.bad("id", "%q must be at most 255 printable characters without spaces", c.ID)
	}
	return errors.Join(p...)
}

// problems collects what Validate finds wrong, in the order it checks.
type problems []error

// bad records a problem with setting key (see settingError).
func (p *problems) bad(key, format string, args ...any) {
	*p = append(*p, settingError(key, fmt.Sprintf(format, args...)))
}

// positive records a problem with setting key unless d is positive and at
// most limit.
func (p *problems) positive(key string, d, limit time.Duration) {
	if d <= 0 || d > limit {
		p.bad(key, "%s must be positive and at most %s", d, limit)
	}
}

// checkZK checks the ZooKeeper servers (host:port each, no chroot), the
// session and connect timeouts, and the shape of zk_digest (never echoing
// its value).
func (c *Config) checkZK(p *problems) {
	if len(c.ZK) == 0 {
		p.bad("zk", "no ZooKeeper servers given")
	}
	for _, s := range c.ZK {
		if hp, chroot, ok := strings.Cut(s, "/"); ok {
			p.bad("zk", "server %q: a chroot (%q) is not supported in the server list; give %q and move the paths instead, e.g. --root /%s/all-sequences, --election-path /%s/election and --marker-path /%s/cluster",
				s, "/"+chroot, hp, chroot, chroot, chroot)
			continue
		}
		if msg := hostPortProblem(s, false); msg != "" {
			p.bad("zk", "server %q: %s", s, msg)
		}
	}
	p.positive("zk_session_timeout", c.ZKSessionTimeout, 10*time.Minute)
	if c.ZKConnectTimeout != 0 {
		p.positive("zk_connect_timeout", c.ZKConnectTimeout, time.Hour)
	}
	if d := c.ZKDigest.Reveal(); d != "" {
		if user, _, ok := strings.Cut(d, ":"); !ok || user == "" {
			p.bad("zk_digest", "must be user:password") // never echo the value
		}
	}
}

// checkPaths checks that root, election_path and marker_path are valid
// znode paths and that none contains another. An invalid marker_path is
// left to the primary's checks (Primary.problems), which report it.
func (c *Config) checkPaths(p *problems) {
	paths := []struct{ key, val string }{{"root", c.Root}, {"election_path", c.ElectionPath}, {"marker_path", c.MarkerPath}}
	pathsOK := true
	for _, q := range paths {
		if err := zkclient.ValidateRoot(q.val); err != nil {
			if q.key != "marker_path" {
				p.bad(q.key, "%v", err)
			}
			pathsOK = false
		}
	}
	if !pathsOK {
		return
	}
	for i, a := range paths {
		for _, b := range paths[i+1:] {
			if within(a.val, b.val) || within(b.val, a.val) {
				p.bad(b.key, "%s and %s %s must not contain each other (a node of one under the other would be misread)", b.val, a.key, a.val)
			}
		}
	}
}

// checkHTTPAndTLS checks the HTTP listener's address, its tokens (one
// source each, no white space), and that TLS settings come in pairs and
// only where TLS is on.
func (c *Config) checkHTTPAndTLS(p *problems) {
	if msg := hostPortProblem(c.HTTP, true); msg != "" {
		p.bad("http", "%q: %s", c.HTTP, msg)
	}
	for _, t := range []struct {
		key, token, file string
	}{{"http_token", c.HTTPToken.Reveal(), c.HTTPTokenFile}, {"http_admin_token", c.HTTPAdminToken.Reveal(), c.HTTPAdminTokenFile}} {
		if t.token != "" && t.file != "" {
			p.bad(t.key, "set either %s or %s_file, not both", t.key, t.key)
		}
		if strings.ContainsFunc(t.token, unicode.IsSpace) {
			p.bad(t.key, "must not contain white space")
		}
	}
	if (c.ZKTLSCertFile == "") != (c.ZKTLSKeyFile == "") {
		p.bad("zk_tls_cert_file", "set both zk_tls_cert_file and zk_tls_key_file, or neither")
	}
	if c.ZKTLSServerName != "" && !c.zkTLSOn() {
		p.bad("zk_tls_server_name", "only means something with TLS: set zk_tls_ca_file (or zk_tls: true)")
	}
	if (c.HTTPTLSCertFile == "") != (c.HTTPTLSKeyFile == "") {
		p.bad("http_tls_cert_file", "set both http_tls_cert_file and http_tls_key_file, or neither")
	}
	if c.HTTPTLSClientCAFile != "" && c.HTTPTLSCertFile == "" {
		p.bad("http_tls_client_ca_file", "client certificates need TLS: set http_tls_cert_file and http_tls_key_file too")
	}
}

// checkService checks the settings of the running replica: the metrics'
// top sequences, the shutdown delay, the crash probe, the advertised
// address and logging.
func (c *Config) checkService(p *problems) {
	if c.MetricsTopSequences < 0 || c.MetricsTopSequences > MaxMetricsTopSequences {
		p.bad("metrics_top_sequences", "%d must be between 0 and %d", c.MetricsTopSequences, MaxMetricsTopSequences)
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > 10*time.Minute {
		p.bad("shutdown_delay", "%s must be between 0 and 10m", c.ShutdownDelay)
	}
	if c.CrashProbe < 0 || c.CrashProbe > c.ZKSessionTimeout {
		p.bad("crash_probe", "%s must be between 0 (off) and zk_session_timeout (%s)", c.CrashProbe, c.ZKSessionTimeout)
	}
	if c.Advertise != "" {
		if msg := hostPortProblem(c.Advertise, false); msg != "" {
			p.bad("advertise", "%q: %s", c.Advertise, msg)
		}
	}
	if c.LogLevel != "" {
		if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel != strings.ToLower(c.LogLevel) {
			p.bad("log_level", "%q is not one of trace, debug, info, warn, error, fatal, panic, disabled", c.LogLevel)
		}
	}
	switch c.LogFormat {
	case LogFormatAuto, LogFormatJSON, LogFormatConsole:
	default:
		p.bad("log_format", "%q is not one of auto, json, console", c.LogFormat)
	}
}

// checkPacing checks the primary's settings (Primary.problems) and how
// its intervals fit together: the ceiling wait, and an audit and a runway
// that the sweep interval can keep up with.
func (c *Config) checkPacing(p *problems) {
	p.positive("ceiling_wait", c.CeilingWait, time.Hour)
	*p = append(*p, c.Primary.problems()...)
	if c.AuditInterval > 0 && c.AuditInterval < c.SweepInterval {
		p.bad("audit_interval", "%s is shorter than the sweep interval %s: the audit runs at a sweep", c.AuditInterval, c.SweepInterval)
	}
	if c.Runway > 0 && c.SweepInterval > c.Runway {
		p.bad("sweep_interval", "%s is longer than the runway %s: a sequence could use up its reserve between two sweeps", c.SweepInterval, c.Runway)
	}
}

// settingError makes an error about one setting that says how to set it.
func settingError(key, msg string) error {
	return fmt.Errorf("%w: %s: %s (%s)", ErrInvalid, key, msg, Where(key))
}

// Where says how a setting is set: its flag, environment variable and
// config file key.
func Where(key string) string {
	return fmt.Sprintf("set it with --%s, %s or '%s:' in the config file", FlagName(key), EnvName(key), key)
}

// within reports whether znode path p is q or lies under it.
func within(p, q string) bool { return p == q || strings.HasPrefix(p, q+"/") }

// hostPortProblem says what is wrong with a host:port, or "". With
// anyHost an empty host (":7070", all interfaces) is accepted.
func hostPortProblem(s string, anyHost bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "want host:port"
	}
	if host == "" && !anyHost {
		return "the host is empty"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !anyHost) {
		return fmt.Sprintf("port %q is not a port number", port)
	}
	return ""
}

// RedactURL returns a URL for a message or a log line with every secret it
// may hold taken out: user information (of the URL and of any URL in its
// query, such as an S3 endpoint) and the values of query parameters other
// than endpoint, region and sse_kms_key_id (a KMS key's name or ARN says
// which key, and is no secret: IAM decides who may use it). Text that does not parse as a URL is not shown
// at all.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("(an unparseable URL of %d bytes)", len(s))
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				if k != "endpoint" && k != "region" && k != "sse_kms_key_id" {
					vs[i] = "REDACTED"
				} else if e, err := url.Parse(v); err == nil && e.User != nil {
					e.User = url.User("REDACTED")
					vs[i] = e.String()
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return strconv.Quote(u.String())
}

// storeProblem checks a store URL as the store opens it; unset is no
// problem here.
func storeProblem(s string) error {
	if s == "" {
		return nil
	}
	return persist.CheckURL(s)
}

// Layout returns the configured ACL layout (ZKACL); the zero Layout when
// none is set. A layout needs an admin identity, as 'seqkeeper acl apply'
// does: without one no one could change it again.
func (c *Config) Layout() (seqzk.Layout, error) {
	l, role, err := seqzk.ParseLayout(c.ZKACL)
	switch {
	case err != nil:
		return seqzk.Layout{}, settingError("zk_acl_"+role.String(), err.Error())
	case len(l.Roles) == 0:
		return l, nil
	case len(l.Roles[seqzk.Admin]) == 0:
		return seqzk.Layout{}, settingError("zk_acl_admin", "empty while other zk_acl_* are set: a layout needs an admin identity, or no one could change it again")
	}
	return l, nil
}
