package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// setting is one configurable value: its key and how to read and write it
// as text. The table below is the only list of settings; the YAML loader,
// ApplyEnv, Flags, String and the documentation tests all walk it.
type setting struct {
	key  string // YAML key; the flag and env names derive from it
	typ  string // shown in flag help: string, duration, int, bool, list, secret
	help string
	// sep separates a list's elements in its text (a comma; a
	// semicolon where an element may hold commas, as x509 subjects do).
	sep string
	// set parses text into the setting of c; get returns it as text that
	// set accepts (secrets revealed: only tests and set's own checks use
	// it); display is get with secrets redacted.
	set func(c *Config, text string) error
	get func(c *Config) string
}

func (s setting) display(c *Config) string {
	if s.typ == "secret" {
		return Secret(s.get(c)).String()
	}
	return s.get(c)
}

func stringSetting(key, help string, field func(*Config) *string) setting {
	return setting{key: key, typ: "string", help: help,
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c *Config) string { return *field(c) },
	}
}

func secretSetting(key, help string, field func(*Config) *Secret) setting {
	return setting{key: key, typ: "secret", help: help,
		set: func(c *Config, v string) error { *field(c) = Secret(v); return nil },
		get: func(c *Config) string { return field(c).Reveal() },
	}
}

func durationSetting(key, help string, field func(*Config) *time.Duration) setting {
	return setting{key: key, typ: "duration", help: help,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%q is not a duration (write it like 10s, 1m30s, 500ms)", v)
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return field(c).String() },
	}
}

func intSetting(key, help string, field func(*Config) *int64) setting {
	return setting{key: key, typ: "int", help: help,
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not a whole number", v)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
	}
}

// boolSetting is true or false (also 1/0, t/f, TRUE/FALSE, as
// strconv.ParseBool reads them). As a flag it may be given bare
// (--allow-standalone-zookeeper means true).
func boolSetting(key, help string, field func(*Config) *bool) setting {
	return setting{key: key, typ: "bool", help: help,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%q is not true or false", v)
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

// listSetting is a list separated by sep; empty elements are dropped.
func listSetting(key, sep, help string, field func(*Config) *[]string) setting {
	return setting{key: key, typ: "list", help: help, sep: sep,
		set: func(c *Config, v string) error {
			var out []string
			for _, e := range strings.Split(v, sep) {
				if e = strings.TrimSpace(e); e != "" {
					out = append(out, e)
				}
			}
			*field(c) = out
			return nil
		},
		get: func(c *Config) string { return strings.Join(*field(c), sep) },
	}
}

// settings is every setting, in the order String and the docs list them.
var settings = []setting{
	listSetting("zk", ",", "ZooKeeper servers, comma-separated host:port",
		func(c *Config) *[]string { return &c.ZK }),
	durationSetting("zk_session_timeout", "ZooKeeper session timeout",
		func(c *Config) *time.Duration { return &c.ZKSessionTimeout }),
	durationSetting("zk_connect_timeout", "how long to wait for the first ZooKeeper session (0: 30s for serve, 5s for the other commands)",
		func(c *Config) *time.Duration { return &c.ZKConnectTimeout }),
	secretSetting("zk_digest", "ZooKeeper digest credentials user:password (prefer the environment or the file)",
		func(c *Config) *Secret { return &c.ZKDigest }),
	boolSetting("zk_tls", "speak TLS to ZooKeeper (its secureClientPort); implied by any zk_tls_*_file",
		func(c *Config) *bool { return &c.ZKTLS }),
	stringSetting("zk_tls_ca_file", "PEM CA bundle that signed ZooKeeper's certificates (unset: the system's CAs)",
		func(c *Config) *string { return &c.ZKTLSCAFile }),
	stringSetting("zk_tls_cert_file", "PEM client certificate for ZooKeeper (its subject is the x509 identity), with zk_tls_key_file",
		func(c *Config) *string { return &c.ZKTLSCertFile }),
	stringSetting("zk_tls_key_file", "PEM private key of zk_tls_cert_file",
		func(c *Config) *string { return &c.ZKTLSKeyFile }),
	stringSetting("zk_tls_server_name", "name ZooKeeper's certificates must hold (unset: each server's host in zk)",
		func(c *Config) *string { return &c.ZKTLSServerName }),
	listSetting("zk_acl_admin", ";", "ACL layout: the admin identities, ';'-separated (x509:<subject>, digest:<user>:<hash>, ip:<cidr>); with any zk_acl_* set, the replicas create every znode with the layout and the primary holds the root to it, after a ZooKeeper loss too (docs/security.md)",
		func(c *Config) *[]string { return &c.ZKACL[seqzk.Admin] }),
	listSetting("zk_acl_replica", ";", "ACL layout: the replicas' identities (see zk_acl_admin)",
		func(c *Config) *[]string { return &c.ZKACL[seqzk.Replica] }),
	listSetting("zk_acl_worker", ";", "ACL layout: the workers' identities (see zk_acl_admin)",
		func(c *Config) *[]string { return &c.ZKACL[seqzk.Worker] }),
	listSetting("zk_acl_reader", ";", "ACL layout: the readers' identities (see zk_acl_admin)",
		func(c *Config) *[]string { return &c.ZKACL[seqzk.Reader] }),
	stringSetting("root", "znode under which the sequences live",
		func(c *Config) *string { return &c.Root }),
	stringSetting("election_path", "znode directory of the replicas' leader election (unset: derived from root, /seqkeeper/election for the default root)",
		func(c *Config) *string { return &c.ElectionPath }),
	stringSetting("marker_path", "cluster marker znode that tells a wiped ZooKeeper from a healthy one (unset: derived from root, /seqkeeper/cluster for the default root)",
		func(c *Config) *string { return &c.MarkerPath }),
	stringSetting("store", "durable store: s3://bucket/prefix[?endpoint=URL&region=R&sse_kms_key_id=KEY] or file:///path",
		func(c *Config) *string { return &c.Store }),
	stringSetting("http", "host:port the HTTP ID API listens on",
		func(c *Config) *string { return &c.HTTP }),
	secretSetting("http_token", "bearer token the HTTP API requires (prefer http_token_file)",
		func(c *Config) *Secret { return &c.HTTPToken }),
	stringSetting("http_token_file", "file holding the bearer token the HTTP API requires",
		func(c *Config) *string { return &c.HTTPTokenFile }),
	secretSetting("http_admin_token", "bearer token of the admin routes, create and delete over HTTP (prefer http_admin_token_file; unset: those routes answer 403)",
		func(c *Config) *Secret { return &c.HTTPAdminToken }),
	stringSetting("http_admin_token_file", "file holding the bearer token of the admin routes",
		func(c *Config) *string { return &c.HTTPAdminTokenFile }),
	stringSetting("http_tls_cert_file", "PEM certificate (chain) file: the HTTP API serves HTTPS (with http_tls_key_file)",
		func(c *Config) *string { return &c.HTTPTLSCertFile }),
	stringSetting("http_tls_key_file", "PEM private key file of http_tls_cert_file",
		func(c *Config) *string { return &c.HTTPTLSKeyFile }),
	stringSetting("http_tls_client_ca_file", "PEM CA file: the HTTP API requires client certificates signed by these CAs",
		func(c *Config) *string { return &c.HTTPTLSClientCAFile }),
	durationSetting("shutdown_delay", "on SIGTERM, keep serving this long with /readyz at 503 so load balancers drop the endpoint first (5s suits Kubernetes)",
		func(c *Config) *time.Duration { return &c.ShutdownDelay }),
	durationSetting("crash_probe", "how often the replica next in line connects to the leader's advertised address, and reads its heartbeat, to learn its process is gone or stopped and take over without waiting for its session (0: off; a crash then hands over after the session timeout)",
		func(c *Config) *time.Duration { return &c.CrashProbe }),
	intSetting("metrics_top_sequences", "sequences with series of their own on /metrics (shortest runway, most IDs served); 0: aggregates only",
		func(c *Config) *int64 { return &c.MetricsTopSequences }),
	stringSetting("log_level", "log level: trace, debug, info, warn, error (default info for serve, error for the operator commands)",
		func(c *Config) *string { return &c.LogLevel }),
	stringSetting("log_format", "log format: auto (console on a terminal, else json), json, console",
		func(c *Config) *string { return &c.LogFormat }),
	durationSetting("ceiling_wait", "how long a take waits at the ceiling for the primary to raise it",
		func(c *Config) *time.Duration { return &c.CeilingWait }),
	durationSetting("runway", "how long each sequence's reserve should last at its recent rate",
		func(c *Config) *time.Duration { return &c.Runway }),
	intSetting("min_reserve", "smallest reserve of IDs the primary keeps for any sequence, 1 to 2^50",
		func(c *Config) *int64 { return &c.MinReserve }),
	intSetting("max_reserve", "largest reserve of IDs the primary keeps for any sequence, min_reserve to 2^50",
		func(c *Config) *int64 { return &c.MaxReserve }),
	durationSetting("sweep_interval", "how often the primary checks every sequence",
		func(c *Config) *time.Duration { return &c.SweepInterval }),
	durationSetting("audit_interval", "how often the primary reads the whole store and persists again what it lost",
		func(c *Config) *time.Duration { return &c.AuditInterval }),
	boolSetting("create_bucket", "let serve create the store's S3 bucket (or directory) when it is missing; false for credentials without s3:CreateBucket",
		func(c *Config) *bool { return &c.CreateBucket }),
	boolSetting("allow_standalone_zookeeper", "let serve run on a standalone ZooKeeper, where a rollback of its data goes unseen and IDs can be handed out twice (see docs/guarantees.md)",
		func(c *Config) *bool { return &c.AllowStandaloneZooKeeper }),
	stringSetting("id", "this replica's unique id in the election (default: the host name)",
		func(c *Config) *string { return &c.ID }),
	stringSetting("advertise", "host:port others reach this replica's HTTP API at (default: from http)",
		func(c *Config) *string { return &c.Advertise }),
}

// lookup returns the setting with key.
func lookup(key string) (setting, bool) {
	i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key })
	if i < 0 {
		return setting{}, false
	}
	return settings[i], true
}

// Keys returns every setting's key, in documentation order.
func Keys() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.key
	}
	return out
}

// FlagName returns the command-line flag of a setting: its key with '-'
// for '_' (zk_session_timeout -> zk-session-timeout).
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// EnvName returns the environment variable of a setting: SEQKEEPER_ and
// its key in upper case (zk_session_timeout -> SEQKEEPER_ZK_SESSION_TIMEOUT).
func EnvName(key string) string { return EnvPrefix + strings.ToUpper(key) }

// ApplyEnv overlays the settings found in the environment, read through
// lookup (os.LookupEnv in production). A variable that is set but empty is
// ignored, so that "SEQKEEPER_STORE=" in a compose file means "not set".
// Errors name the variable and wrap ErrInvalid; every bad variable is
// reported at once (errors.Join).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	var errs []error
	for _, s := range settings {
		v, ok := lookup(EnvName(s.key))
		if !ok || v == "" {
			continue
		}
		if err := s.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("%w: environment variable %s: %v", ErrInvalid, EnvName(s.key), err))
		}
	}
	return errors.Join(errs...)
}

// Flags binds settings to command-line flags. Register flags with Add on
// any number of flag sets (a command's own, or persistent ones) and, after
// parsing, write the ones given on the command line into a Config with
// Apply. A flag's value is checked as it is parsed, so a bad value is a
// flag error. The zero value is ready to use.
type Flags struct {
	values []*flagValue
}

// flagValue is a pflag.Value holding a setting's raw text until Apply.
type flagValue struct {
	s    setting
	text string
	set  bool
}

func (v *flagValue) String() string {
	if v.s.typ == "secret" {
		return Secret(v.text).String()
	}
	return v.text
}

func (v *flagValue) Set(text string) error {
	// Parse into a scratch Config now, so that the flag parser reports a
	// bad value (as a usage error) before anything runs.
	if err := v.s.set(DefaultConfig(), text); err != nil {
		return err
	}
	v.text, v.set = text, true
	return nil
}

func (v *flagValue) Type() string { return v.s.typ }

// Add defines a flag on fs for each key (see Keys). It panics on an unknown
// key: that is a programming error, not a user's.
func (f *Flags) Add(fs *pflag.FlagSet, keys ...string) {
	for _, key := range keys {
		s, ok := lookup(key)
		if !ok {
			panic(fmt.Sprintf("config: no setting %q", key))
		}
		// The text starts as the default, for the help to show; only a
		// value given on the command line (set) is applied.
		v := &flagValue{s: s, text: s.display(DefaultConfig())}
		f.values = append(f.values, v)
		fl := fs.VarPF(v, FlagName(key), "", fmt.Sprintf("%s (env %s)", s.help, EnvName(key)))
		if s.typ == "bool" {
			fl.NoOptDefVal = "true" // a bare --flag means true, as for any bool flag
		}
	}
}

// Apply writes the flags that were given on the command line into c, in
// the order they were added.
func (f *Flags) Apply(c *Config) error {
	for _, v := range f.values {
		if !v.set {
			continue
		}
		if err := v.s.set(c, v.text); err != nil {
			return fmt.Errorf("%w: flag --%s: %v", ErrInvalid, FlagName(v.s.key), err)
		}
	}
	return nil
}

// Resolve builds the effective configuration: DefaultConfig, then the file
// at path (if path is not empty), then the environment read through
// lookupEnv, then flags (may be nil); and validates it. Every error wraps
// ErrInvalid. The errors of the file and of the environment come together,
// every one of them; the settings are validated (again every problem at
// once) when they all parsed.
func Resolve(path string, lookupEnv func(string) (string, bool), flags *Flags) (*Config, error) {
	c := DefaultConfig()
	var errs []error
	if path != "" {
		errs = append(errs, c.LoadFile(path))
	}
	errs = append(errs, c.ApplyEnv(lookupEnv))
	if flags != nil {
		errs = append(errs, flags.Apply(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
