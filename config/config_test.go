package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/zkclient"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// valid returns a configuration that passes Validate.
func valid() *Config {
	c := DefaultConfig()
	c.ZK = []string{"127.0.0.1:2181"}
	return c
}

func TestDefaultConfigNeedsOnlyZooKeeper(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil || !strings.Contains(err.Error(), "no ZooKeeper servers") {
		t.Fatalf("DefaultConfig().Validate() = %v, want the missing zk named", err)
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("defaults with zk: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"several servers", func(c *Config) { c.ZK = []string{"a:2181", "b:2182", "[::1]:2183"} }, ""},
		{"no servers", func(c *Config) { c.ZK = nil }, "zk: no ZooKeeper servers given (set it with --zk, SEQKEEPER_ZK or 'zk:' in the config file)"},
		{"server without port", func(c *Config) { c.ZK = []string{"zoo1"} }, `zk: server "zoo1": want host:port`},
		{"server with bad port", func(c *Config) { c.ZK = []string{"zoo1:http"} }, `port "http" is not a port number`},
		{"server port 0", func(c *Config) { c.ZK = []string{"zoo1:0"} }, `port "0"`},
		{"server without host", func(c *Config) { c.ZK = []string{":2181"} }, "the host is empty"},
		{"zero session timeout", func(c *Config) { c.ZKSessionTimeout = 0 }, "zk_session_timeout: 0s must be positive"},
		{"huge session timeout", func(c *Config) { c.ZKSessionTimeout = time.Hour }, "at most 10m0s"},
		{"negative connect timeout", func(c *Config) { c.ZKConnectTimeout = -time.Second }, "zk_connect_timeout"},
		{"connect timeout 0 is the command's default", func(c *Config) { c.ZKConnectTimeout = 0 }, ""},
		{"server with a chroot", func(c *Config) { c.ZK = []string{"zoo1:2181/app"} },
			`zk: server "zoo1:2181/app": a chroot ("/app") is not supported in the server list; give "zoo1:2181" and move the paths instead, e.g. --root /app/all-sequences`},
		{"digest", func(c *Config) { c.ZKDigest = "user:pw" }, ""},
		{"digest without colon", func(c *Config) { c.ZKDigest = "userpw" }, "zk_digest: must be user:password"},
		{"digest without user", func(c *Config) { c.ZKDigest = ":pw" }, "zk_digest"},
		{"layout without admin", func(c *Config) { c.ZKACL[seqzk.Worker] = []string{"x509:CN=w"} }, "zk_acl_admin: empty while other zk_acl_* are set"},
		{"layout identity without scheme", func(c *Config) { c.ZKACL = [4][]string{seqzk.Admin: {"CN=ops"}} }, `zk_acl_admin: zookeeper identity "CN=ops": want scheme:id`},
		{"relative root", func(c *Config) { c.Root = "seq" }, "root: zookeeper path \"seq\""},
		{"root /", func(c *Config) { c.Root = "/" }, "root:"},
		{"root trailing slash", func(c *Config) { c.Root = "/a/" }, "must be clean"},
		{"root under /zookeeper", func(c *Config) { c.Root = "/zookeeper/x" }, "reserved"},
		{"election path bad", func(c *Config) { c.ElectionPath = "x" }, "election_path:"},
		{"election under root", func(c *Config) { c.ElectionPath = c.Root + "/election" }, "must not contain each other"},
		{"root under election", func(c *Config) { c.ElectionPath = "/e"; c.Root = "/e/seq" }, "must not contain each other"},
		{"root containing its derived paths", func(c *Config) { c.Root = "/seqkeeper" }, "must not contain each other"},
		{"derived paths of another root", func(c *Config) { c.Root = "/billing/ids" }, ""},
		{"election equals root", func(c *Config) { c.ElectionPath = c.Root }, "must not contain each other"},
		{"marker under root", func(c *Config) { c.MarkerPath = c.Root + "/m" }, "marker_path: " + DefaultRoot + "/m and root"},
		{"marker equals election", func(c *Config) { c.ElectionPath = "/e"; c.MarkerPath = "/e" }, "marker_path:"},
		{"marker bad", func(c *Config) { c.MarkerPath = "m" }, "marker_path: zookeeper path"},
		{"max reserve below min", func(c *Config) { c.MaxReserve = c.MinReserve - 1 }, "max_reserve: 999 must be at least min_reserve (1000)"},
		{"max reserve equal min", func(c *Config) { c.MaxReserve = c.MinReserve }, ""},
		{"sibling prefix is fine", func(c *Config) { c.Root = "/seq"; c.ElectionPath = "/seqkeeper/election" }, ""},
		{"s3 store", func(c *Config) { c.Store = "s3://bucket/prefix?endpoint=http://minio:9000&region=us-east-1" }, ""},
		{"s3 store without prefix", func(c *Config) { c.Store = "s3://bucket" }, ""},
		{"file store", func(c *Config) { c.Store = "file:///var/lib/seqkeeper" }, ""},
		{"s3 without bucket", func(c *Config) { c.Store = "s3:///prefix" }, "no bucket"},
		{"s3 with credentials", func(c *Config) { c.Store = "s3://key:secret@bucket/p" }, "credentials do not belong in the store URL"},
		{"file relative", func(c *Config) { c.Store = "file://data" }, "only local paths work"},
		{"file root dir", func(c *Config) { c.Store = "file:///" }, "file URL of the root directory"},
		{"bare path store", func(c *Config) { c.Store = "/var/lib/seqkeeper" }, "no scheme"},
		{"gcs store", func(c *Config) { c.Store = "gs://b/p" }, `unsupported scheme "gs"`},
		{"http all interfaces", func(c *Config) { c.HTTP = ":7070" }, ""},
		{"http any port", func(c *Config) { c.HTTP = "127.0.0.1:0" }, ""},
		{"http without port", func(c *Config) { c.HTTP = "localhost" }, "http: \"localhost\": want host:port"},
		{"token and file", func(c *Config) { c.HTTPToken = "t"; c.HTTPTokenFile = "/f" }, "either http_token or http_token_file"},
		{"token with space", func(c *Config) { c.HTTPToken = "a b" }, "white space"},
		{"advertise", func(c *Config) { c.Advertise = "host1:7070" }, ""},
		{"advertise without port", func(c *Config) { c.Advertise = "host1" }, "advertise:"},
		{"log level", func(c *Config) { c.LogLevel = "debug" }, ""},
		{"log level unknown", func(c *Config) { c.LogLevel = "verbose" }, `log_level: "verbose" is not one of`},
		{"log level upper case", func(c *Config) { c.LogLevel = "DEBUG" }, "log_level"},
		{"log format json", func(c *Config) { c.LogFormat = "json" }, ""},
		{"log format unknown", func(c *Config) { c.LogFormat = "text" }, `log_format: "text"`},
		{"ceiling wait zero", func(c *Config) { c.CeilingWait = 0 }, "ceiling_wait"},
		{"runway zero", func(c *Config) { c.Runway = 0 }, "runway: 0s must be positive"},
		{"min reserve zero", func(c *Config) { c.MinReserve = 0 }, "min_reserve: 0 must be at least 1"},
		{"min reserve negative", func(c *Config) { c.MinReserve = -5 }, "min_reserve: -5 must be at least 1 and at most 1125899906842624 (2^50)"},
		{"min reserve at limit", func(c *Config) { c.MinReserve, c.MaxReserve = MaxReserveLimit, MaxReserveLimit }, ""},
		{"min reserve above limit", func(c *Config) { c.MinReserve, c.MaxReserve = MaxReserveLimit+1, MaxReserveLimit }, "min_reserve: 1125899906842625 must be at least 1 and at most 1125899906842624 (2^50) (set it with --min-reserve"},
		{"min reserve max int64", func(c *Config) { c.MinReserve, c.MaxReserve = math.MaxInt64, math.MaxInt64 }, "min_reserve: 9223372036854775807 must be at least 1 and at most 1125899906842624"},
		{"max reserve at limit", func(c *Config) { c.MaxReserve = MaxReserveLimit }, ""},
		{"max reserve above limit", func(c *Config) { c.MaxReserve = MaxReserveLimit + 1 }, "max_reserve: 1125899906842625 must be at least min_reserve (1000) and at most 1125899906842624 (2^50) (set it with --max-reserve, SEQKEEPER_MAX_RESERVE or 'max_reserve:' in the config file)"},
		{"max reserve max int64", func(c *Config) { c.MaxReserve = math.MaxInt64 }, "max_reserve: 9223372036854775807 must be at least min_reserve (1000) and at most 1125899906842624 (2^50)"},
		{"max reserve negative", func(c *Config) { c.MaxReserve = -1 }, "max_reserve: -1 must be at least min_reserve (1000)"},
		{"allow standalone zookeeper", func(c *Config) { c.AllowStandaloneZooKeeper = true }, ""},
		{"sweep longer than runway", func(c *Config) { c.SweepInterval = 2 * c.Runway }, "longer than the runway"},
		{"sweep equal to runway", func(c *Config) { c.SweepInterval = c.Runway }, ""},
		{"id empty", func(c *Config) { c.ID = "" }, "id: empty"},
		{"id with space", func(c *Config) { c.ID = "a b" }, "printable characters without spaces"},
		{"id control", func(c *Config) { c.ID = "a\x00" }, "id:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate() = %v\nwant it to contain %q", err, tt.want)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Fatalf("Validate() = %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	c := DefaultConfig()
	c.Root, c.MinReserve, c.LogFormat = "x", 0, "xml"
	err := c.Validate()
	for _, key := range []string{"zk:", "root:", "min_reserve:", "log_format:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v, want it to name %s", err, key)
		}
	}
}

func TestValidateNeverEchoesTheDigest(t *testing.T) {
	c := valid()
	c.ZKDigest = "no-colon-secret-value"
	err := c.Validate()
	if err == nil || strings.Contains(err.Error(), "no-colon-secret-value") {
		t.Fatalf("Validate() = %v: want an error that does not contain the secret", err)
	}
}

// writeFile writes a config file for the test and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seqkeeper.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolvePrecedenceFileEnvFlag(t *testing.T) {
	file := writeFile(t, `
zk: [file1:2181, file2:2181]
root: /from-file
store: file:///from/file
http: 127.0.0.1:1111
log_level: debug
runway: 2m
min_reserve: 5
`)
	environ := map[string]string{
		"SEQKEEPER_ROOT":      "/from-env",
		"SEQKEEPER_STORE":     "s3://env-bucket/p",
		"SEQKEEPER_HTTP":      "127.0.0.1:2222",
		"SEQKEEPER_LOG_LEVEL": "", // set but empty: ignored
		"SEQKEEPER_RUNWAY":    "3m",
		"UNRELATED":           "x",
	}
	var flags Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	flags.Add(fs, Keys()...)
	if err := fs.Parse([]string{"--http=127.0.0.1:3333", "--runway", "4m"}); err != nil {
		t.Fatal(err)
	}
	c, err := Resolve(file, env(environ), &flags)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ what, got, want string }{
		{"zk (file only)", strings.Join(c.ZK, ","), "file1:2181,file2:2181"},
		{"min_reserve (file only)", fmt.Sprint(c.MinReserve), "5"},
		{"log_level (file; empty env ignored)", c.LogLevel, "debug"},
		{"root (env over file)", c.Root, "/from-env"},
		{"store (env over file)", c.Store, "s3://env-bucket/p"},
		{"http (flag over env over file)", c.HTTP, "127.0.0.1:3333"},
		{"runway (flag over env over file)", c.Runway.String(), "4m0s"},
		{"sweep_interval (default)", c.SweepInterval.String(), "10s"},
		{"election_path (derived from root)", c.ElectionPath, RootsPrefix + "/from-env/election"},
		{"marker_path (derived from root)", c.MarkerPath, RootsPrefix + "/from-env/cluster"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
		}
	}
}

// Every bad line of the file and every bad variable of the environment is
// reported at once, as the docs promise, not one parse error at a time.
func TestResolveReportsEveryParseErrorAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seqkeeper.yaml")
	file := "zk: a:1\nmin_reserv: 5\nzk_session_timeout: ten\nzk: b:1\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve(path, env(map[string]string{"SEQKEEPER_MIN_RESERVE": "many", "SEQKEEPER_RUNWAY": "soon"}), nil)
	for _, want := range []string{"line 2: unknown key \"min_reserv\"", "line 3: zk_session_timeout", "line 4: key \"zk\" repeated", "SEQKEEPER_MIN_RESERVE", "SEQKEEPER_RUNWAY"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve = %v\nwant it to say %q", err, want)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve = %v, want ErrInvalid", err)
	}
}

func TestResolveValidatesTheResult(t *testing.T) {
	_, err := Resolve("", env(map[string]string{"SEQKEEPER_ZK": "a:1", "SEQKEEPER_MIN_RESERVE": "0"}), nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "min_reserve") {
		t.Fatalf("Resolve = %v, want min_reserve rejected", err)
	}
}

func TestApplyEnvErrorsNameTheVariable(t *testing.T) {
	c := DefaultConfig()
	err := c.ApplyEnv(env(map[string]string{"SEQKEEPER_ZK_SESSION_TIMEOUT": "ten"}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "SEQKEEPER_ZK_SESSION_TIMEOUT") || !strings.Contains(err.Error(), "10s") {
		t.Fatalf("ApplyEnv = %v, want the variable named and an example", err)
	}
}

func TestEveryFieldHasASettingAndEnvAndFlagNames(t *testing.T) {
	wantFlag := map[string]string{
		"zk": "zk", "zk_session_timeout": "zk-session-timeout", "http_token_file": "http-token-file",
	}
	for key, flag := range wantFlag {
		if got := FlagName(key); got != flag {
			t.Errorf("FlagName(%q) = %q, want %q", key, got, flag)
		}
	}
	for key, envName := range map[string]string{
		"zk": "SEQKEEPER_ZK", "root": "SEQKEEPER_ROOT", "store": "SEQKEEPER_STORE", "http": "SEQKEEPER_HTTP",
		"http_token": "SEQKEEPER_HTTP_TOKEN", "log_level": "SEQKEEPER_LOG_LEVEL",
	} {
		if got := EnvName(key); got != envName {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, envName)
		}
	}
	// Every setting round-trips through its text form, so a value read
	// from the file, the environment or a flag means the same thing.
	c := exampleConfig()
	for _, s := range settings {
		d := DefaultConfig()
		if err := s.set(d, s.get(c)); err != nil {
			t.Fatalf("%s: set(get()) = %v", s.key, err)
		}
		if s.get(d) != s.get(c) {
			t.Errorf("%s: round trip gave %q, want %q", s.key, s.get(d), s.get(c))
		}
	}
}

// exampleConfig sets every setting to a non-default value.
func exampleConfig() *Config {
	return &Config{
		ZK: []string{"z1:2181", "z2:2181"}, ZKSessionTimeout: 7 * time.Second, ZKConnectTimeout: 3 * time.Second,
		ZKDigest: "user:pw", Root: "/r", ElectionPath: "/e/lection", Store: "file:///s", HTTP: "127.0.0.1:9",
		HTTPToken: "tok", LogLevel: "warn", LogFormat: "json", CeilingWait: time.Second,
		ID: "r1", Advertise: "r1:9", AllowStandaloneZooKeeper: true,
		ZKACL: [4][]string{seqzk.Admin: {"x509:CN=ops,O=example"}, seqzk.Worker: {"x509:CN=a", "digest:b:c="}},
		Primary: Primary{MarkerPath: "/m/arker", Runway: time.Minute, MinReserve: 9, MaxReserve: 99,
			SweepInterval: time.Second, AuditInterval: time.Hour},
	}
}

func TestParseStrict(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown key", "zk: a:1\nzk_sesion_timeout: 5s\n", `config file f.yaml: line 2: unknown key "zk_sesion_timeout": did you mean "zk_session_timeout"?`},
		{"unknown key, nothing close", "zk: a:1\nzookeepers: 5s\n", `config file f.yaml: line 2: unknown key "zookeepers": known keys are zk, `},
		{"dashed key", "zk-session-timeout: 5s\n", `line 1: unknown key "zk-session-timeout": did you mean "zk_session_timeout"?`},
		{"repeated key", "root: /a\nstore: \nroot: /b\n", `line 3: key "root" repeated (first at line 1)`},
		{"bad duration", "runway: 60\n", `line 1: runway: "60" is not a duration`},
		{"bad int", "min_reserve: 1e3\n", `line 1: min_reserve: "1e3" is not a whole number`},
		{"null duration", "runway:\n", "runway: no value"},
		{"list for scalar", "root: [/a, /b]\n", "root: want a single value, found a list"},
		{"mapping value", "zk:\n  servers: a:1\n", "line 2: zk: want a value, found a mapping"},
		{"nested list", "zk: [[a:1]]\n", "list elements must be single values"},
		{"comma in list element", "zk: ['a:1,b:2']\n", `contains ",", which separates the elements`},
		{"not a mapping", "- zk\n", "line 1: want 'key: value' lines (a mapping), found a list"},
		{"scalar document", "hello\n", `found the value "hello"`},
		{"two documents", "root: /a\n---\nroot: /b\n", "line 2: a second YAML document"},
		{"syntax", "root: /a\n  bad: indent\n", "config file f.yaml: line 2:"},
		{"merge key", "base: &b {root: /a}\n<<: *b\n", `unknown key "base"`},
		{"tab indentation", "root:\t/a\n\tstore: x\n", "config file f.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			before := *c
			err := c.Parse("f.yaml", []byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v\nwant an error containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %v does not wrap ErrInvalid", err)
			}
			if c.String() != before.String() || c.ZKDigest != before.ZKDigest {
				t.Fatalf("a failed Parse changed the config:\n%s\nwas\n%s", c, &before)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name, text string
		check      func(*Config) string
	}{
		{"empty", "", func(c *Config) string { return c.Root }},
		{"only comments", "# nothing\n", func(c *Config) string { return c.Root }},
		{"null document", "~\n", func(c *Config) string { return c.Root }},
		{"comma string", "zk: a:1, b:2\n", func(c *Config) string { return strings.Join(c.ZK, ",") }},
		{"list", "zk:\n  - a:1\n  - b:2\n", func(c *Config) string { return strings.Join(c.ZK, ",") }},
		{"empty store", "store:\n", func(c *Config) string { return "[" + c.Store + "]" }},
		{"anchor", "x_root: &r /a\n", nil},
		{"crlf", "root: /crlf\r\nhttp: 127.0.0.1:1\r\n", func(c *Config) string { return c.Root + " " + c.HTTP }},
		{"quoted", "id: \"replica 1\"\n", func(c *Config) string { return c.ID }},
		{"identities", "zk_acl_worker:\n  - x509:CN=orders,O=example\n  - digest:legacy:kV9=\n", func(c *Config) string { return strings.Join(c.ZKACL[seqzk.Worker], " | ") }},
	}
	want := map[string]string{
		"empty": DefaultRoot, "only comments": DefaultRoot, "null document": DefaultRoot,
		"comma string": "a:1,b:2", "list": "a:1,b:2", "empty store": "[]",
		"crlf": "/crlf 127.0.0.1:1", "quoted": "replica 1", "identities": "x509:CN=orders,O=example | digest:legacy:kV9=",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Store = "file:///x"
			err := c.Parse("f.yaml", []byte(tt.text))
			if tt.check == nil {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.check(c); got != want[tt.name] {
				t.Fatalf("got %q, want %q", got, want[tt.name])
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	err := DefaultConfig().LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "SEQKEEPER_CONFIG") {
		t.Fatalf("LoadFile(missing) = %v, want a hint at --config/SEQKEEPER_CONFIG", err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", maxFileSize)+"\n")
	if err := DefaultConfig().LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("LoadFile(big) = %v", err)
	}
	c := DefaultConfig()
	err = c.LoadFile(writeFile(t, "zk: a:1\nrunway: 90s\n"))
	if err != nil || c.Runway != 90*time.Second || c.SweepInterval != DefaultSweepInterval {
		t.Fatalf("LoadFile(good) = %+v, %v", c, err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := exampleConfig()
	c.ZKDigest = "alice:hunter2-digest"
	c.HTTPToken = "tok-hunter2-http"
	var logged bytes.Buffer
	log := zerolog.New(&logged)
	log.Info().Interface("config", c).Str("s", c.String()).Msg("start")
	log.Info().Stringer("digest", c.ZKDigest).Interface("token", c.HTTPToken).Msg("x")
	js, _ := json.Marshal(c)
	ym, _ := yaml.Marshal(c)
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", *c), "%#v": fmt.Sprintf("%#v", *c),
		"%s": fmt.Sprintf("%s", c.ZKDigest), "%q": fmt.Sprintf("%q", c.HTTPToken), "%x": fmt.Sprintf("%x", c.HTTPToken),
		"json": string(js), "yaml": string(ym), "zerolog": logged.String(),
		"flag": func() string {
			var f Flags
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			f.Add(fs, "http_token")
			_ = fs.Parse([]string{"--http-token=tok-hunter2-http"})
			return fs.Lookup("http-token").Value.String()
		}(),
	}
	for name, out := range outputs {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s leaks a secret: %s", name, out)
		}
		if name != "%x" && !strings.Contains(out, "[redacted]") {
			t.Errorf("%s does not show [redacted]: %s", name, out)
		}
	}
	if c.ZKDigest.Reveal() != "alice:hunter2-digest" {
		t.Fatal("Reveal lost the value")
	}
	if Secret("").String() != "" {
		t.Fatal("an empty secret should print empty")
	}
}

func TestBearerTokens(t *testing.T) {
	c := valid()
	if ts, err := c.BearerTokens(); len(ts) != 0 || err != nil {
		t.Fatalf("no token: %q, %v", ts, err)
	}
	c.HTTPToken = "abc"
	if ts, _ := c.BearerTokens(); !slices.Equal(ts, []string{"abc"}) {
		t.Fatalf("tokens = %q", ts)
	}
	c.HTTPToken = ""
	c.HTTPTokenFile = writeFile(t, "from-file\n")
	if ts, err := c.BearerTokens(); !slices.Equal(ts, []string{"from-file"}) || err != nil {
		t.Fatalf("token file: %q, %v", ts, err)
	}
	c.HTTPTokenFile = writeFile(t, "\n")
	if _, err := c.BearerTokens(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token file: %v", err)
	}
	c.HTTPTokenFile = filepath.Join(t.TempDir(), "none")
	if _, err := c.BearerTokens(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing token file: %v", err)
	}
}

func TestAdvertiseAddrAndWarnings(t *testing.T) {
	c := valid()
	c.ID = "replica7"
	for http, want := range map[string]string{
		"127.0.0.1:7070": "127.0.0.1:7070", ":7070": "replica7:7070", "0.0.0.0:80": "replica7:80", "[::]:81": "replica7:81",
	} {
		c.HTTP = http
		if got := c.AdvertiseAddr(); got != want {
			t.Errorf("HTTP %s: AdvertiseAddr = %q, want %q", http, got, want)
		}
	}
	c.Advertise = "lb:1"
	if got := c.AdvertiseAddr(); got != "lb:1" {
		t.Errorf("AdvertiseAddr = %q", got)
	}

	c.HTTP, c.Store = "0.0.0.0:7070", ""
	w := strings.Join(c.Warnings(), "\n")
	if !strings.Contains(w, "without a bearer token") || !strings.Contains(w, "no store configured") {
		t.Fatalf("Warnings = %q", w)
	}
	c.HTTP, c.Store = "localhost:7070", "file:///x"
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings = %q, want none", w)
	}

	// A layout that leaves this process's own identity out.
	c.ZKDigest = "replica:pw"
	c.ZKACL = [4][]string{seqzk.Admin: {"x509:CN=ops"}, seqzk.Replica: {"digest:other:aGFzaA=="}}
	if w := strings.Join(c.Warnings(), "\n"); !strings.Contains(w, "zk_acl_replica and zk_acl_admin name none of this process's ZooKeeper identities ([digest:replica:") {
		t.Fatalf("Warnings = %q, want the layout's", w)
	}
	c.ZKACL[seqzk.Replica] = append(c.ZKACL[seqzk.Replica], zkclient.DigestID("replica:pw").String())
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings = %q, want none with the replica's digest in the layout", w)
	}
}

func TestLevel(t *testing.T) {
	c := valid()
	if c.Level(zerolog.WarnLevel) != zerolog.WarnLevel {
		t.Fatal("empty level should take the command's default")
	}
	c.LogLevel = "debug"
	if c.Level(zerolog.WarnLevel) != zerolog.DebugLevel {
		t.Fatal("set level ignored")
	}
}

func TestFlagsRejectBadValuesAtParse(t *testing.T) {
	var f Flags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	f.Add(fs, "runway", "zk")
	err := fs.Parse([]string{"--runway=soon"})
	if err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Fatalf("Parse = %v", err)
	}
	if def := fs.Lookup("runway").DefValue; def != "1m0s" {
		t.Fatalf("runway default shown as %q", def)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Add with an unknown key should panic")
		}
	}()
	f.Add(fs, "nope")
}

// encodeYAML writes c as a config file, secrets revealed (tests only).
func encodeYAML(c *Config) []byte {
	var b bytes.Buffer
	for _, s := range settings {
		v, _ := yaml.Marshal(s.get(c))
		fmt.Fprintf(&b, "%s: %s", s.key, v)
	}
	return b.Bytes()
}

func TestFileRoundTrip(t *testing.T) {
	c := exampleConfig()
	d := DefaultConfig()
	if err := d.Parse("rt.yaml", encodeYAML(c)); err != nil {
		t.Fatal(err)
	}
	if d.String() != c.String() || d.ZKDigest != c.ZKDigest || d.HTTPToken != c.HTTPToken {
		t.Fatalf("round trip:\n%s\nwant\n%s", d, c)
	}
}

// The reserve cap holds whichever source sets the value, and the error
// says the allowed range.
func TestReserveLimitFromEverySource(t *testing.T) {
	over := fmt.Sprint(int64(MaxReserveLimit) + 1)
	_, err := Resolve("", env(map[string]string{"SEQKEEPER_ZK": "a:1", "SEQKEEPER_MAX_RESERVE": over}), nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "max_reserve: "+over+" must be at least min_reserve (1000) and at most 1125899906842624 (2^50)") {
		t.Fatalf("Resolve with SEQKEEPER_MAX_RESERVE=%s = %v, want the range named", over, err)
	}
	file := writeFile(t, "zk: a:1\nmin_reserve: "+over+"\n")
	_, err = Resolve(file, env(nil), nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "min_reserve: "+over+" must be at least 1 and at most 1125899906842624 (2^50)") {
		t.Fatalf("Resolve with min_reserve %s in the file = %v, want the range named", over, err)
	}
	var flags Flags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	flags.Add(fs, "max_reserve")
	if err := fs.Parse([]string{"--max-reserve", fmt.Sprint(int64(MaxReserveLimit))}); err != nil {
		t.Fatal(err)
	}
	c, err := Resolve("", env(map[string]string{"SEQKEEPER_ZK": "a:1"}), &flags)
	if err != nil || c.MaxReserve != MaxReserveLimit {
		t.Fatalf("--max-reserve 2^50: %v, %v; want it accepted", c, err)
	}
	if DefaultMinReserve > MaxReserveLimit || DefaultMaxReserve > MaxReserveLimit {
		t.Fatal("a default reserve is above MaxReserveLimit")
	}
}

func TestAllowStandaloneZooKeeperFromEverySource(t *testing.T) {
	const key = "allow_standalone_zookeeper"
	if DefaultConfig().AllowStandaloneZooKeeper {
		t.Fatal("standalone ZooKeeper must be refused by default")
	}
	if EnvName(key) != "SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER" || FlagName(key) != "allow-standalone-zookeeper" {
		t.Fatalf("names: %s, %s", EnvName(key), FlagName(key))
	}
	resolve := func(file string, environ map[string]string, args ...string) (*Config, error) {
		t.Helper()
		var flags Flags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		flags.Add(fs, key)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if environ == nil {
			environ = map[string]string{}
		}
		environ["SEQKEEPER_ZK"] = "a:1"
		return Resolve(file, env(environ), &flags)
	}
	for _, tt := range []struct {
		name    string
		file    string // config file text, "" for none
		environ map[string]string
		args    []string
		want    bool
	}{
		{"default", "", nil, nil, false},
		{"bare flag", "", nil, []string{"--allow-standalone-zookeeper"}, true},
		{"flag true", "", nil, []string{"--allow-standalone-zookeeper=true"}, true},
		{"flag false over env", "", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": "true"}, []string{"--allow-standalone-zookeeper=false"}, false},
		{"env", "", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": "true"}, nil, true},
		{"empty env is unset", "allow_standalone_zookeeper: true\n", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": ""}, nil, true},
		{"env over file", "allow_standalone_zookeeper: true\n", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": "false"}, nil, false},
		{"file", "allow_standalone_zookeeper: true\n", nil, nil, true},
		{"file false", "allow_standalone_zookeeper: false\n", nil, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = writeFile(t, tt.file)
			}
			c, err := resolve(file, tt.environ, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.AllowStandaloneZooKeeper != tt.want {
				t.Fatalf("AllowStandaloneZooKeeper = %v, want %v", c.AllowStandaloneZooKeeper, tt.want)
			}
		})
	}
	// Bad values name the source and say what is accepted.
	if _, err := resolve("", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": "yes please"}); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), `SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER: "yes please" is not true or false`) {
		t.Fatalf("bad env value: %v", err)
	}
	if _, err := resolve(writeFile(t, "allow_standalone_zookeeper: maybe\n"), nil); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), `line 1: allow_standalone_zookeeper: "maybe" is not true or false`) {
		t.Fatalf("bad file value: %v", err)
	}
	if _, err := resolve(writeFile(t, "allow_standalone_zookeeper:\n"), nil); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Fatalf("empty file value: %v", err)
	}
	if _, err := resolve("", nil, "--allow-standalone-zookeeper=sure"); err == nil || !strings.Contains(err.Error(), `"sure" is not true or false`) {
		t.Fatalf("bad flag value: %v", err)
	}
}

// No secret appears in a message: a store URL with
// credentials, in the URL or in its endpoint, is refused without them.
func TestStoreErrorsShowNoSecret(t *testing.T) {
	t.Parallel()
	for _, store := range []string{
		"s3://AKIAEXAMPLE:SuperSecret123@bucket/p",
		"s3://bucket/p?endpoint=http://minio:SuperSecret123@x:9000&region=r&x=SuperSecret123",
		"file://user:SuperSecret123@host/x",
		"%zz:SuperSecret123",
	} {
		c := DefaultConfig()
		c.ZK = []string{"a:1"}
		c.Store = store
		err := c.Validate()
		if err == nil && !strings.Contains(store, "endpoint") {
			t.Errorf("%s: no error", store)
		}
		if err != nil && strings.Contains(err.Error(), "SuperSecret123") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
	for _, raw := range []string{"s3://bucket/p?endpoint=http://minio:SuperSecret123@x:9000"} {
		_, err := persist.ParseS3URL(raw)
		if err == nil || strings.Contains(err.Error(), "SuperSecret123") {
			t.Errorf("ParseS3URL(%s) = %v; want an error without the secret", raw, err)
		}
	}
}
