package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// TestMain holds every request to a replica's API, and every answer, to
// the OpenAPI document (internal/apitest). The test binary is also the
// seqkeeper command of the runbooks' scripts (TestRunbooks).
func TestMain(m *testing.M) {
	testscript.Main(checkedRun{m}, map[string]func(){"seqkeeper": main})
}

type checkedRun struct{ m *testing.M }

// loadTransport holds a load generator's round trips to the document, a
// sample of each kind (apitest.Transport.Sampled).
var loadTransport http.RoundTripper

func (r checkedRun) Run() int {
	loadTransport = apitest.InstallDefault().Sampled(50, 10)
	return max(testenv.Run(r.m), apitest.Check())
}

// cli runs the seqkeeper command line in-process against the shared real
// ZooKeeper, with a root of the test's own.
type cli struct {
	t        *testing.T
	servers  []string
	root     string
	election string
	env      map[string]string
	admin    *seqzk.Client // stands in for the primary
	conn     *zkclient.Client

	// storeCeiling is given to every run: the real store reader unless a
	// test replaces it.
	storeCeiling storeCeilingFunc
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	z := testenv.ZooKeeper(t)
	c := &cli{t: t, servers: z.Servers, root: z.Root + "/all-sequences", election: z.Root + "/election", storeCeiling: storeCeiling}
	c.env = map[string]string{
		"SEQKEEPER_ZK":            strings.Join(z.Servers, ","),
		"SEQKEEPER_ELECTION_PATH": c.election,
		"SEQKEEPER_MARKER_PATH":   z.Root + "/cluster", // every root its own marker
		"SEQKEEPER_CEILING_WAIT":  "500ms",
		"SEQKEEPER_LOG_FORMAT":    "json",
		"SEQKEEPER_ROOT":          "/somewhere-else", // the --root flag given by run wins
	}
	zc, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	c.conn = zc
	if c.admin, err = seqzk.NewClient(zc, seqzk.Options{Root: c.root}); err != nil {
		t.Fatal(err)
	}
	return c
}

// run executes seqkeeper --root <test root> args... with stdin and returns
// stdout, stderr and the exit code.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	var stdout, stderr testenv.Buffer
	g := &globals{
		stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		lookupEnv:    func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
		storeCeiling: c.storeCeiling,
	}
	code := run(context.Background(), g, append([]string{"--root", c.root}, args...))
	return stdout.String(), stderr.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != 0 {
		c.t.Fatalf("seqkeeper %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// initialise stands in for the primary: initialise the registration and
// raise its ceiling.
func (c *cli) initialise(name string, ceiling int64) {
	c.t.Helper()
	if _, err := c.admin.Keeper().Revalidate(context.Background(), name, 0, ceiling); err != nil {
		c.t.Fatal(err)
	}
}

func TestCreateTakePushListDescribeText(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if out := c.ok("create", "orders"); !strings.Contains(out, `created sequence "orders": IDs 1 to 9223372036854775807, 0 windows`) {
		t.Fatalf("create: %q", out)
	}
	c.ok("create", "invoices", "--start", "1000", "--max", "2000", "--windows", "2")
	out := c.ok("list")
	for _, want := range []string{"NAME", "invoices  uninitialised  1000  -", "orders    uninitialised  1  "} {
		if !strings.Contains(out, want) {
			t.Errorf("list before the primary lacks %q:\n%s", want, out)
		}
	}

	c.initialise("orders", 1000)
	if out := c.ok("take", "orders", "-n", "5"); out != "1:5\n" {
		t.Fatalf("take -n 5: %q", out)
	}
	if out := c.ok("take", "orders"); out != "6:6\n" {
		t.Fatalf("take: %q", out)
	}
	if out := c.ok("push", "orders", "2:3", "5"); out != "pushed 3 IDs back to \"orders\": 2:3 5\n" {
		t.Fatalf("push: %q", out)
	}
	out = c.ok("describe", "orders")
	for _, want := range []string{
		"sequence:          orders", "kind:              sequence", "next:              7",
		"zookeeper ceiling: 1000", "stored ceiling:    (store not configured)", "end:               9223372036854775807",
		"available:         997", "recycled:          3 IDs in 2 ranges: 2:3 5", "windows:           none", "health:            ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	out = c.ok("list")
	if !strings.Contains(out, "orders    sequence       7     1000     997        3         0/0      ok") {
		t.Errorf("list after takes:\n%s", out)
	}
	// Recycled IDs go out first.
	if out := c.ok("take", "orders", "-n", "4"); out != "2:3\n5:5\n7:7\n" {
		t.Fatalf("take after push: %q", out)
	}
}

func TestJSONOutputs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var created map[string]any
	if err := json.Unmarshal([]byte(c.ok("create", "j", "--start", "10", "-o", "json")), &created); err != nil || created["start"] != 10.0 {
		t.Fatalf("create -o json: %v %v", created, err)
	}
	c.initialise("j", 100)
	if out := c.ok("take", "j", "-n", "3", "-o", "json"); out != `{"sequence":"j","ranges":[[10,12]]}`+"\n" {
		t.Fatalf("take -o json: %q", out)
	}
	if out := c.ok("push", "j", "11", "-o", "json"); out != `{"ranges":[[11,11]],"recycled":1,"sequence":"j"}`+"\n" {
		t.Fatalf("push -o json: %q", out)
	}
	c.env["SEQKEEPER_OUTPUT"] = "json" // the environment works as well as -o
	if out := c.ok("take", "j", "-n", "2"); out != `{"sequence":"j","ranges":[[11,11],[13,13]]}`+"\n" {
		t.Fatalf("take with SEQKEEPER_OUTPUT=json: %q", out)
	}
	var list struct{ Sequences []httpapi.SequenceSummary }
	if err := json.Unmarshal([]byte(c.ok("list")), &list); err != nil || len(list.Sequences) != 1 || list.Sequences[0].Next != 14 {
		t.Fatalf("list -o json: %+v %v", list, err)
	}
	for _, args := range [][]string{{"list"}, {"describe", "j"}} {
		wantSnakeCase(t, strings.Join(args, " "), []byte(c.ok(args...)))
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(c.ok("describe", "j")), &raw); err != nil {
		t.Fatal(err)
	}
	if v, ok := raw["unsafe"]; !ok || v != false {
		t.Fatalf("describe -o json: unsafe = %v (present %v); want false, never omitted", v, ok)
	}
	var d describeOutput
	if err := json.Unmarshal([]byte(c.ok("describe", "j")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "j" || d.Start != 10 || d.Next != 14 || d.Ceiling != 100 || d.Store != "not configured" || d.StoredCeiling != nil {
		t.Fatalf("describe -o json: %+v", d)
	}
	// An empty list is [] in JSON, not null.
	if err := testenv.DeleteAll(c.conn, c.root+"/j"); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("list"); out != `{"sequences":[]}`+"\n" {
		t.Fatalf("empty list: %q", out)
	}
}

func TestExitCodesAndMessages(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("create", "orders")
	c.initialise("orders", 100)
	c.ok("take", "orders", "-n", "10")
	badConfig := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badConfig, []byte("zk: a:1\nzk_sesion_timeout: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no command", nil, 2, "no command given"},
		{"unknown command", []string{"bogus"}, 2, `unknown command "bogus"`},
		{"unknown flag", []string{"take", "orders", "--nope"}, 2, "unknown flag: --nope"},
		{"missing name", []string{"take"}, 2, "accepts 1 arg(s), received 0"},
		{"bad name", []string{"take", "bad/name"}, 2, `invalid sequence name "bad/name": '/' would make it a path`},
		{"bad count", []string{"take", "orders", "-n", "0"}, 2, "-n 0: want 1 to"},
		{"bad count type", []string{"take", "orders", "-n", "x"}, 2, "invalid argument"},
		{"bad output", []string{"list", "-o", "xml"}, 2, `-o "xml": want text, json or yaml`},
		{"bad range", []string{"push", "orders", "5:3"}, 2, "start 5 is above end 3"},
		{"not a range", []string{"push", "orders", "abc"}, 2, `"abc" is not a plain base-10 integer; write ranges as start:end`},
		{"overlapping ranges", []string{"push", "orders", "1:3", "2"}, 2, "overlap"},
		{"never issued", []string{"push", "orders", "50:60"}, 2, "push refused"},
		{"push without ranges", []string{"push", "orders"}, 2, "requires at least 2 arg(s)"},
		{"unknown sequence", []string{"take", "nosuch"}, 1, `unknown sequence: ` + c.root + `/nosuch does not exist; 'seqkeeper list' shows the sequences under ` + c.root + `; 'seqkeeper create nosuch' makes a new one, starting at 1`},
		{"describe unknown", []string{"describe", "nosuch"}, 1, "unknown sequence"},
		{"create twice", []string{"create", "orders"}, 1, `sequence "orders" already exists`},
		{"create bad start", []string{"create", "x", "--start", "-1"}, 2, "--start -1"},
		{"create bad max", []string{"create", "x", "--start", "10", "--max", "5"}, 2, "--max 5: must be at least the start (10)"},
		{"create bad windows", []string{"create", "x", "--windows", "5000"}, 2, "--windows 5000"},
		{"at the ceiling", []string{"take", "orders", "-n", "91"}, 0, ""},
		{"ceiling reached", []string{"take", "orders"}, 1, "reserved ceiling reached"},
		{"bad config file", []string{"--config", badConfig, "list"}, 2, `line 2: unknown key "zk_sesion_timeout"`},
		{"missing config file", []string{"--config", badConfig + ".none", "list"}, 2, "no such file"},
		{"bad flag value", []string{"--zk", "nohost", "list"}, 2, `zk: server "nohost": want host:port`},
		{"bad log level", []string{"--log-level", "loud", "list"}, 2, `log_level: "loud"`},
		{"bad store", []string{"--store", "ftp://x", "list"}, 2, `store: "ftp://x": bad store URL: unsupported scheme "ftp"`},
		{"delete without store", []string{"delete", "orders", "--yes"}, 2, "delete needs the store"},
		{"delete with a missing store", []string{"delete", "orders", "--yes", "--store", "file:///nonexistent/seqkeeper-test"}, 1, "delete: open the store"},
		{"bench bad clients", []string{"bench", "orders", "--clients", "0"}, 2, "--clients 0"},
		{"leader with args", []string{"leader", "x"}, 2, `unknown command "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := c.run("", tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("seqkeeper %s: exit %d, stderr %q (stdout %q)\nwant exit %d and stderr containing %q",
					strings.Join(tt.args, " "), code, errOut, out, tt.code, tt.want)
			}
		})
	}
}

func TestVersionAndHelpNeedNoConfig(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	g := &globals{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, lookupEnv: func(string) (string, bool) { return "", false }}
	if code := run(context.Background(), g, []string{"version"}); code != 0 || strings.TrimSpace(stdout.String()) == "" {
		t.Fatalf("version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	for _, args := range [][]string{{"--help"}, {"help", "take"}, {"take", "--help"}} {
		stdout.Reset()
		if code := run(context.Background(), g, args); code != 0 || !strings.Contains(stdout.String(), "Usage:") {
			t.Fatalf("%v: exit %d, %q", args, code, stdout.String())
		}
	}
	// Without ZooKeeper configured, a command that needs it is a usage error.
	stderr.Reset()
	if code := run(context.Background(), g, []string{"list"}); code != 2 || !strings.Contains(stderr.String(), "no ZooKeeper servers given (set it with --zk, SEQKEEPER_ZK") {
		t.Fatalf("list without zk: exit %d, %q", code, stderr.String())
	}
}

func TestNoZooKeeper(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_ZK_CONNECT_TIMEOUT"] = "1s"
	_, errOut, code := c.run("", "--zk", "127.0.0.1:1", "list")
	if code != 1 || !strings.Contains(errOut, "no zookeeper session with 127.0.0.1:1") || !strings.Contains(errOut, "are the servers up and reachable?") {
		t.Fatalf("no ZooKeeper: exit %d, %q", code, errOut)
	}

	// A server that accepts connections and never answers, with the
	// operator commands' own default wait (serve's is longer).
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	delete(c.env, "SEQKEEPER_ZK_CONNECT_TIMEOUT")
	addr := silent.Addr().String()
	_, errOut, code = c.run("", "--zk", addr, "list")
	want := fmt.Sprintf("no zookeeper session with %s after %s", addr, config.DefaultCLIZKConnectTimeout)
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("silent ZooKeeper: exit %d, %q; want %q", code, errOut, want)
	}
}

func TestConfigFileAndPrecedence(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	delete(c.env, "SEQKEEPER_ZK")
	file := filepath.Join(t.TempDir(), "seqkeeper.yaml")
	text := fmt.Sprintf("zk: [%s]\nroot: /not-this-one\nceiling_wait: 2s\n", strings.Join(c.servers, ", "))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env["SEQKEEPER_CONFIG"] = file
	// zk from the file, root from the flag (over the env over the file).
	c.ok("create", "fromfile")
	if _, _, err := c.admin.Describe(context.Background(), "fromfile"); err != nil {
		t.Fatalf("created in the wrong root: %v", err)
	}
}

func TestLeader(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, errOut, code := c.run("", "leader")
	if code != 1 || !strings.Contains(errOut, "no leader elected: is 'seqkeeper serve' running against the same --zk and --root?") {
		t.Fatalf("leader without election: exit %d, %q", code, errOut)
	}
	if err := testenv.CreateAll(c.conn, c.election); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := c.run("", "leader"); code != 1 || !strings.Contains(errOut, "no leader elected") {
		t.Fatalf("leader with an empty election: exit %d, %q", code, errOut)
	}
	// Two candidates, as election.Election creates them; a stray node is
	// ignored. The first created (lowest sequence) leads, whatever the
	// GUIDs' order.
	for _, cand := range []struct{ guid, data string }{
		{"ffff", `{"id":"replica-a","address":"10.0.0.1:7070","version":"v1"}`},
		{"0000", `{"id":"replica-b","address":"10.0.0.2:7070"}`},
	} {
		if _, err := c.conn.Session().Create(context.Background(), c.election+"/_c_"+cand.guid+"-n_", []byte(cand.data), zkclient.Ephemeral|zkclient.Sequential); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.conn.Session().Create(context.Background(), c.election+"/stray", nil, 0); err != nil {
		t.Fatal(err)
	}
	out := c.ok("leader")
	if out != "leader:     replica-a\naddress:    10.0.0.1:7070\nversion:    v1\ncandidates: 2\n" {
		t.Fatalf("leader: %q", out)
	}
	var lo leaderOutput
	if err := json.Unmarshal([]byte(c.ok("leader", "-o", "json")), &lo); err != nil || lo.ID != "replica-a" || lo.Candidates != 2 || !strings.HasPrefix(lo.Node, c.election+"/_c_ffff-n_") {
		t.Fatalf("leader -o json: %+v %v", lo, err)
	}
	// --election-path overrides the environment.
	if _, errOut, code := c.run("", "leader", "--election-path", c.root+"-elsewhere"); code != 1 || !strings.Contains(errOut, c.root+"-elsewhere") {
		t.Fatalf("leader --election-path: exit %d %q", code, errOut)
	}
}

func TestBench(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("create", "b")
	c.initialise("b", 1<<40)
	var res benchResult
	out := c.ok("bench", "b", "--clients", "3", "--batch", "10", "--duration", "1s", "-o", "json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench -o json: %q: %v", out, err)
	}
	if res.IDs == 0 || res.IDs != res.Takes*10 || res.Duplicates != 0 || res.RoundTripsPerID <= 0 || res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P99 {
		t.Fatalf("bench result: %+v", res)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("bench -o json should print one line: %q", out)
	}
	text := c.ok("bench", "b", "--clients", "1", "--duration", "1s")
	for _, want := range []string{"bench b: 1 clients, batch 100", "IDs:", "ZK round trips:", "take latency:    p50", "duplicate IDs:   0"} {
		if !strings.Contains(text, want) {
			t.Errorf("bench text lacks %q:\n%s", want, text)
		}
	}
	// At the ceiling with no primary, bench says so and fails (the takes
	// wait longer than the run).
	c.env["SEQKEEPER_CEILING_WAIT"] = "5s"
	c.ok("create", "stuck")
	c.initialise("stuck", 5)
	c.ok("take", "stuck", "-n", "5")
	if _, errOut, code := c.run("", "bench", "stuck", "--duration", "1s"); code != 1 || !strings.Contains(errOut, "is at its ceiling") {
		t.Fatalf("bench at the ceiling: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "bench", "nosuch", "--duration", "100ms"); code != 1 || !strings.Contains(errOut, "unknown sequence") {
		t.Fatalf("bench unknown: exit %d %q", code, errOut)
	}
}

func TestDuplicatesCount(t *testing.T) {
	for _, tt := range []struct {
		rs   []sequence.Range
		want int64
	}{
		{nil, 0},
		{[]sequence.Range{{Start: 1, End: 5}, {Start: 6, End: 9}}, 0},
		{[]sequence.Range{{Start: 1, End: 5}, {Start: 5, End: 9}}, 1},
		{[]sequence.Range{{Start: 1, End: 10}, {Start: 2, End: 3}, {Start: 4, End: 4}}, 3},
		{[]sequence.Range{{Start: 3, End: 3}, {Start: 1, End: 10}, {Start: 3, End: 3}}, 2},
	} {
		if got := duplicates(tt.rs); got != tt.want {
			t.Errorf("duplicates(%v) = %d, want %d", tt.rs, got, tt.want)
		}
	}
}

func TestDeleteTombstonesFirst(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	c.env["SEQKEEPER_STORE"] = "file://" + dir
	c.ok("create", "w", "--windows", "1")
	c.initialise("w", 500)
	if _, err := c.admin.Keeper().OpenWindow(context.Background(), "w", 100); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "keep")
	store := func() *persist.Store {
		b, err := persist.NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := persist.NewStore(b, persist.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tombstone := func(name string) (persist.Record, bool) {
		rec, err := store().Get(context.Background(), name)
		if errors.Is(err, persist.ErrNotFound) {
			return rec, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return rec, rec.Deleted()
	}

	// Not confirmed: nothing happens.
	if _, errOut, code := c.run("nope\n", "delete", "w"); code != 1 || !strings.Contains(errOut, "not confirmed") || !strings.Contains(errOut, "Type the name to confirm") {
		t.Fatalf("delete not confirmed: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "delete", "w"); code != 2 || !strings.Contains(errOut, "pass --yes") {
		t.Fatalf("delete without an answer: exit %d %q", code, errOut)
	}
	if _, ok := tombstone("w"); ok {
		t.Fatal("tombstone written without confirmation")
	}
	// Confirmed by typing the name: tombstone in the real store, then the
	// znode, its window and its marker go.
	if out, errOut, code := c.run("w\n", "delete", "w"); code != 0 || !strings.Contains(out, `deleted sequence "w"; its tombstone keeps IDs up to 500`) {
		t.Fatalf("delete: exit %d %q %q", code, out, errOut)
	}
	if rec, ok := tombstone("w"); !ok || rec.Ceiling != 500 {
		t.Fatalf("tombstone of w: %+v, want deleted with ceiling 500", rec)
	}
	if ok, _, _ := c.conn.Session().Exists(context.Background(), c.root+"/w"); ok {
		t.Fatal("the znode survived delete")
	}
	// --yes, and a registration with start 1, which issued nothing: a
	// tombstone always ends something, so it takes ID 1 (a name created
	// again starts at 2).
	if out := c.ok("delete", "keep", "--yes", "-o", "json"); out != `{"deleted":true,"sequence":"keep","tombstone_ceiling":1}`+"\n" {
		t.Fatalf("delete --yes -o json: %q", out)
	}
	if _, errOut, code := c.run("", "delete", "gone", "--yes"); code != 1 || !strings.Contains(errOut, "unknown sequence") {
		t.Fatalf("delete unknown: exit %d %q", code, errOut)
	}

	// A store that cannot be opened: nothing is deleted.
	c.ok("create", "refused")
	c.env["SEQKEEPER_STORE"] = "file://" + filepath.Join(dir, "missing")
	if _, errOut, code := c.run("", "delete", "refused", "--yes"); code != 1 || !strings.Contains(errOut, "open the store: file store") {
		t.Fatalf("delete with a missing store: exit %d %q", code, errOut)
	}
	if ok, _, _ := c.conn.Session().Exists(context.Background(), c.root+"/refused"); !ok {
		t.Fatal("deleted although the tombstone failed")
	}
}

func TestDescribeStoreCeiling(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("create", "s")
	c.initialise("s", 1000)
	c.env["SEQKEEPER_STORE"] = "s3://bucket/prefix"

	for _, tt := range []struct {
		stored int64
		err    error
		code   int
		want   string
	}{
		{2000, nil, 0, "stored ceiling:    2000"},
		{1000, nil, 0, "health:            ok"},
		{500, nil, 0, "UNSAFE: the ZooKeeper ceiling is above the stored ceiling"},
		{0, fmt.Errorf("s: %w", errNotInStore), 0, "(no record yet"},
		{0, errors.New("access denied"), 1, "(error: access denied)"},
	} {
		c.storeCeiling = func(context.Context, *config.Config, string) (int64, error) { return tt.stored, tt.err }
		out, errOut, code := c.run("", "describe", "s")
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("stored %d, err %v: exit %d (%s)\n%s\nwant exit %d and %q", tt.stored, tt.err, code, errOut, out, tt.code, tt.want)
		}
	}
	c.storeCeiling = func(context.Context, *config.Config, string) (int64, error) { return 500, nil }
	var d describeOutput
	if err := json.Unmarshal([]byte(c.ok("describe", "s", "-o", "json")), &d); err != nil || !d.Unsafe || *d.StoredCeiling != 500 || d.Store != "ok" {
		t.Fatalf("describe -o json with the store: %+v %v", d, err)
	}
}

func TestDescribeKinds(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	legacy := make([]byte, 8)
	binary.BigEndian.PutUint64(legacy, 41)
	if err := testenv.CreateAll(c.conn, c.root); err != nil {
		t.Fatal(err)
	}
	if _, err := c.conn.Session().Create(context.Background(), c.root+"/old", legacy, 0); err != nil {
		t.Fatal(err)
	}
	out := c.ok("describe", "old")
	for _, want := range []string{"kind:              legacy", "next:              42 (the 8-byte counter holds 41", "zookeeper ceiling: none", "health:            legacy: no ceiling"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe legacy lacks %q:\n%s", want, out)
		}
	}
	if out := c.ok("list"); !strings.Contains(out, "old   legacy  42    -        -") {
		t.Errorf("list legacy:\n%s", out)
	}
	c.ok("create", "win", "--windows", "2")
	c.initialise("win", 1000)
	if _, err := c.admin.Keeper().OpenWindow(context.Background(), "win", 100); err != nil {
		t.Fatal(err)
	}
	out = c.ok("describe", "win")
	for _, want := range []string{"windows:           2 configured, 1 open w-", "(next 1, end 100, 100 left)", "available:         1000"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe windows lacks %q:\n%s", want, out)
		}
	}
}

func TestDigestACLAndNoSecretInLogs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// The root exists already (open), so that the test's cleanup, which
	// has no credentials, can delete what is created under it.
	if err := testenv.CreateAll(c.conn, c.root); err != nil {
		t.Fatal(err)
	}
	c.env["SEQKEEPER_ZK_DIGEST"] = "alice:hunter2-secret"
	c.env["SEQKEEPER_LOG_LEVEL"] = "trace"
	out, errOut, code := c.run("", "create", "guarded")
	if code != 0 {
		t.Fatalf("create with digest: exit %d %q %q", code, out, errOut)
	}
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("the digest reached the output:\n%s\n%s", out, errOut)
	}
	if !strings.Contains(errOut, `"level":"`) {
		t.Fatalf("no JSON log lines at trace level: %q", errOut)
	}
	// Only alice reaches it: a session with her credentials reads it, one
	// with another user's cannot.
	dial := func(digest string) *zkclient.Client {
		zc, err := zkclient.Dial(context.Background(), c.servers, zkclient.Options{Digest: digest})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(zc.Close)
		return zc
	}
	if _, _, err := dial("alice:hunter2-secret").Session().Get(context.Background(), c.root+"/guarded"); err != nil {
		t.Fatalf("read with the creating user's digest: %v", err)
	}
	if _, _, err := dial("bob:hunter2-secret").Session().Get(context.Background(), c.root+"/guarded"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("read with another user's digest: %v, want ErrNoAuth", err)
	}
	// The configured client can use it; an unauthenticated one cannot.
	if _, _, err := c.conn.Session().Get(context.Background(), c.root+"/guarded"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("unauthenticated read: %v, want ErrNoAuth", err)
	}
	if out := c.ok("describe", "guarded"); !strings.Contains(out, "uninitialised") {
		t.Fatalf("describe with digest: %q", out)
	}
}

func TestLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	g := &globals{stderr: &buf, cfg: config.DefaultConfig()}
	log := g.logger(0)
	log.Info().Str("k", "v").Msg("hello")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["message"] != "hello" || line["time"] == nil {
		t.Fatalf("auto format on a non-terminal should be JSON lines: %q %v", buf.String(), err)
	}
	// RFC 3339 with milliseconds: 2026-11-24T22:51:22.123Z.
	if ts, _ := line["time"].(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`).MatchString(ts) {
		t.Fatalf("time %q: want RFC 3339 with milliseconds", line["time"])
	}
	buf.Reset()
	g.cfg.LogFormat = config.LogFormatConsole
	log = g.logger(0)
	log.Info().Msg("hello")
	if strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), "hello") {
		t.Fatalf("console format: %q", buf.String())
	}
	buf.Reset()
	g.cfg.LogFormat, g.cfg.LogLevel = config.LogFormatJSON, "error"
	log = g.logger(0)
	log.Warn().Msg("quiet")
	if buf.Len() != 0 {
		t.Fatalf("warn logged at level error: %q", buf.String())
	}
}

// TestDocsListEverySetting keeps docs/cli.md true: every setting with its
// flag (where it has one) and environment variable.
func TestDocsListEverySetting(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	flagged := map[string]bool{}
	for _, k := range append(append([]string{}, globalSettings...), serveSettings...) {
		flagged[k] = true
	}
	for _, key := range config.Keys() {
		want := []string{"| `" + key + "` |", "`" + config.EnvName(key) + "`"}
		if flagged[key] {
			want = append(want, "`--"+config.FlagName(key)+"`")
		}
		for _, w := range want {
			if !strings.Contains(doc, w) {
				t.Errorf("docs/cli.md lacks %s", w)
			}
		}
	}
	// serveSettings can be bound next to the global flags without clashes.
	g := &globals{}
	cmd := newRootCmd(g)
	sub := &cobra.Command{Use: "serve"}
	cmd.AddCommand(sub)
	g.bindSettings(sub, serveSettings...)
}

// TestCommandSeesResolvedConfig checks what a command built on globals
// gets, as serve does: the resolved configuration, its own setting flags
// and the helpers.
func TestCommandSeesResolvedConfig(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var got *config.Config
	fakeServe := func(g *globals) *cobra.Command {
		cmd := &cobra.Command{
			Use:  "fake-serve",
			Args: usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				got = g.cfg
				log := g.logger(zerolog.InfoLevel)
				zc, err := dialZK(cmd.Context(), g.cfg, log)
				if err != nil {
					return err
				}
				defer zc.Close()
				_, err = newSequenceClient(zc, g.cfg)
				return err
			},
		}
		g.bindSettings(cmd, serveSettings...)
		return cmd
	}
	run := func(args ...string) (string, int) {
		var stderr testenv.Buffer
		g := &globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr,
			lookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }}
		root := newRootCmd(g)
		root.AddCommand(fakeServe(g))
		root.SetArgs(append([]string{"--root", c.root}, args...))
		root.SetOut(g.stdout)
		root.SetErr(g.stderr)
		err := root.ExecuteContext(context.Background())
		if err != nil {
			fmt.Fprintln(g.stderr, "seqkeeper:", err)
		}
		return stderr.String(), exitCode(err)
	}
	if errOut, code := run("fake-serve", "--http", "127.0.0.1:9999", "--runway", "5m", "--id", "r9"); code != 0 {
		t.Fatalf("fake serve: exit %d %q", code, errOut)
	}
	if got == nil || got.HTTP != "127.0.0.1:9999" || got.Runway != 5*time.Minute || got.ID != "r9" || got.Root != c.root {
		t.Fatalf("fake serve saw %+v", got)
	}
	if errOut, code := run("fake-serve", "--runway", "soon"); code != 2 || !strings.Contains(errOut, "not a duration") {
		t.Fatalf("bad serve flag: exit %d %q", code, errOut)
	}
}

// Scripts can run create and delete again: --if-not-exists succeeds when
// the sequence exists with the same settings and fails when they differ;
// --ignore-not-found succeeds when there is nothing to delete.
func TestIdempotentCreateAndDelete(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() // an existing directory: delete does not create it
	c.ok("create", "idem", "--start", "5", "--windows", "2", "--if-not-exists")
	if out := c.ok("create", "idem", "--start", "5", "--windows", "2", "--if-not-exists"); !strings.Contains(out, "exists with these settings") {
		t.Fatalf("second create --if-not-exists: %q", out)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(c.ok("create", "idem", "--start", "5", "--windows", "2", "--if-not-exists", "-o", "json")), &js); err != nil || js["created"] != false {
		t.Fatalf("create --if-not-exists -o json: %v %v", js, err)
	}
	_, errOut, code := c.run("", "create", "idem", "--start", "6", "--windows", "2", "--if-not-exists")
	if code != 1 || !strings.Contains(errOut, `sequence "idem" already exists with other settings: start 5 (asked 6)`) {
		t.Fatalf("create --if-not-exists with other settings: exit %d, %q", code, errOut)
	}
	_, errOut, code = c.run("", "create", "idem", "--start", "5", "--windows", "2")
	if code != 1 || !strings.Contains(errOut, `sequence "idem" already exists (with --if-not-exists`) {
		t.Fatalf("create without --if-not-exists: exit %d, %q", code, errOut)
	}

	c.ok("delete", "idem", "--yes", "--ignore-not-found")
	if out := c.ok("delete", "idem", "--yes", "--ignore-not-found"); !strings.Contains(out, `no sequence "idem": nothing to delete`) {
		t.Fatalf("second delete --ignore-not-found: %q", out)
	}
	if _, errOut, code := c.run("", "delete", "idem", "--yes"); code != 1 || !strings.Contains(errOut, "unknown sequence") {
		t.Fatalf("delete of a missing sequence without --ignore-not-found: exit %d, %q", code, errOut)
	}
}

// -o yaml prints what -o json prints, as YAML: the same keys and values.
func TestYAMLOutput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("create", "y1", "--start", "10")
	c.initialise("y1", 100)
	var fromJSON, fromYAML any
	dec := json.NewDecoder(strings.NewReader(c.ok("describe", "y1", "-o", "json")))
	dec.UseNumber() // end is 2^63-1: exact
	if err := dec.Decode(&fromJSON); err != nil {
		t.Fatal(err)
	}
	out := c.ok("describe", "y1", "-o", "yaml")
	if strings.HasPrefix(out, "{") || !strings.Contains(out, "name: y1\n") || !strings.Contains(out, "unsafe: false\n") {
		t.Fatalf("describe -o yaml:\n%s", out)
	}
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
		t.Fatal(err)
	}
	// Compare through JSON (YAML's ints and JSON's numbers print alike).
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	if string(a) != string(b) {
		t.Fatalf("yaml and json differ:\njson %s\nyaml %s", a, b)
	}
	// A string that looks like a number stays a string.
	c.ok("create", "123", "--if-not-exists")
	if out := c.ok("list", "-o", "yaml"); !strings.Contains(out, `name: "123"`) {
		t.Fatalf("list -o yaml: a numeric name lost its quotes:\n%s", out)
	}
	if _, errOut, code := c.run("", "list", "-o", "xml"); code != 2 || !strings.Contains(errOut, "want text, json or yaml") {
		t.Fatalf("-o xml: exit %d, %q", code, errOut)
	}
}

// list reads page by page and narrows by prefix and health.
func TestListPagesAndFilters(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, n := range []string{"p1", "p2", "p3", "q1"} {
		c.ok("create", n)
	}
	c.initialise("p2", 100)
	var lr struct {
		Sequences []httpapi.SequenceSummary `json:"sequences"`
	}
	if err := json.Unmarshal([]byte(c.ok("list", "--page-size", "1", "-o", "json")), &lr); err != nil || len(lr.Sequences) != 4 {
		t.Fatalf("list --page-size 1: %+v %v", lr, err)
	}
	out := c.ok("list", "--page-size", "2", "--prefix", "p")
	for _, n := range []string{"p1", "p2", "p3"} {
		if !strings.Contains(out, n+" ") {
			t.Errorf("list --prefix p lacks %s:\n%s", n, out)
		}
	}
	if strings.Contains(out, "q1") || strings.Count(out, "NAME") != 1 {
		t.Errorf("list --prefix p, pages of 2:\n%s", out)
	}
	if out := c.ok("list", "--health", "ok"); !strings.Contains(out, "p2 ") || strings.Contains(out, "p1 ") {
		t.Errorf("list --health ok:\n%s", out)
	}
	if out := c.ok("list", "--prefix", "zz"); !strings.Contains(out, `with prefix "zz"`) {
		t.Errorf("list --prefix zz: %q", out)
	}
	if _, errOut, code := c.run("", "list", "--health", "sick"); code != 2 || !strings.Contains(errOut, "want one of ok, at_ceiling") {
		t.Errorf("list --health sick: exit %d, %q", code, errOut)
	}
}

// Recovery by hand in the case it exists for, as docs/operations.md
// ("Restore") tells it, on a configuration that sets only the root (the
// election and marker paths derived from it): ZooKeeper lost the whole
// root, no replica runs. verify, restore --dry-run and restore work (they
// failed on the missing root), the lost sequence comes back above its
// stored ceiling, the deleted one does not come back, and the replica
// started last leads and serves: restore claimed the derived paths, so the
// root is not taken for one served on paths set by hand.
func TestRecoveryByHandOfALostRoot(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	derivedOnly(c)
	dir := t.TempDir()
	c.env["SEQKEEPER_STORE"] = "file://" + dir
	b, err := persist.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(b, persist.StoreOptions{Root: c.root})
	if err != nil {
		t.Fatal(err)
	}
	// What a primary left in the store: a live sequence and a tombstone.
	if err := s.Put(context.Background(), 0,
		persist.Record{Name: "orders", Live: 1, Start: 1, End: math.MaxInt64, Ceiling: 5000},
		persist.Record{Name: "gone", Ceiling: 300, Dead: 300}); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := c.conn.Session().Exists(context.Background(), c.root); ok {
		t.Fatal("the root exists: the test needs it lost")
	}
	if out, errOut, code := c.run("", "verify"); code != 3 || !strings.Contains(errOut, "1 sequence(s) lost with ZooKeeper's data and not re-created yet") || !strings.Contains(out, "orders: in the store but not in ZooKeeper: lost with ZooKeeper's data") || !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify on a lost root: exit %d (want 3, the loss not yet repaired)\n%s%s", code, out, errOut)
	}
	if out := c.ok("restore", "--dry-run"); !strings.Contains(out, "re-create at 5001") {
		t.Fatalf("restore --dry-run:\n%s", out)
	}
	c.ok("restore")
	if out := c.ok("take", "orders", "-n", "3"); strings.TrimSpace(out) != "5001:5003" {
		t.Fatalf("take after the restore: %q; want 5001:5003", out)
	}
	if ok, _, _ := c.conn.Session().Exists(context.Background(), c.root+"/gone"); ok {
		t.Fatal("the deleted sequence came back")
	}
	if out := c.ok("verify"); !strings.Contains(out, "0 unsafe") {
		t.Fatalf("verify after the restore:\n%s", out)
	}
	startTheReplicas(c, "orders", 5004)
}

// derivedOnly makes c's configuration set only the root, as a newcomer's
// does: election_path and marker_path are derived from it.
func derivedOnly(c *cli) {
	delete(c.env, "SEQKEEPER_ELECTION_PATH")
	delete(c.env, "SEQKEEPER_MARKER_PATH")
	election, _ := config.DerivedPaths(c.root)
	c.t.Cleanup(func() { _ = testenv.DeleteAll(c.conn, path.Dir(election)) })
}

// startTheReplicas is the last step of a runbook: a replica starts on c's
// configuration, leads, and hands out name's IDs from above (at least)
// from over HTTP.
func startTheReplicas(c *cli, name string, from int64) {
	t := c.t
	t.Helper()
	r := c.serve("a")
	eventually(t, "the replica leads and serves "+name, func() bool {
		select {
		case code := <-r.exit:
			r.exit <- code // for the cleanup
			t.Fatalf("serve exited %d:\n%s", code, r.stderr.String())
		default:
		}
		if r.get(t, "/readyz", nil) != http.StatusOK {
			return false
		}
		got, code := r.ids(t, name, 2)
		if code != http.StatusOK {
			return false
		}
		if got[0][0] < from {
			t.Fatalf("the replica handed out %v of %q; want from %d up", got, name, from)
		}
		return true
	})
}

// A mistyped root or name gets advice that cannot duplicate IDs: the
// root's absence is said, a name close to the typo is suggested, and
// nobody is told to create a sequence that may exist under the right root
// or name. Unknown flags and config keys get their close matches too.
func TestMistypesGetSafeAdvice(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, errOut, code := c.run("", "describe", "orders")
	if code != 1 || !strings.Contains(errOut, "the root "+c.root+" does not exist") || strings.Contains(errOut, "create it") {
		t.Fatalf("describe under a root that does not exist: exit %d %q", code, errOut)
	}
	c.ok("create", "orders")
	c.initialise("orders", 100)
	for _, args := range [][]string{{"take", "ordres"}, {"describe", "ordrs"}} {
		_, errOut, code = c.run("", args...)
		if code != 1 || !strings.Contains(errOut, `did you mean "orders"`) {
			t.Errorf("%s: exit %d %q; want the close name suggested", strings.Join(args, " "), code, errOut)
		}
	}
	if _, errOut, code = c.run("", "take", "orders", "--coutn", "2"); code != 2 || !strings.Contains(errOut, "did you mean --count") {
		t.Errorf("a mistyped flag: exit %d %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("runwya: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code = c.run("", "--config", bad, "list"); code != 2 || !strings.Contains(errOut, `did you mean "runway"`) {
		t.Errorf("a mistyped config key: exit %d %q", code, errOut)
	}
}

// A take that gets fewer IDs than asked says so, and why: 'take capped
// -n 60' on a 50-ID space prints 1:50 and, on stderr, that it took 50 of
// the 60 because the space ends at 50. The exit code stays 0: the IDs
// printed were handed out.
func TestTakeSaysWhenItGotFewer(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("create", "capped", "--max", "50")
	c.initialise("capped", 50)
	out, errOut, code := c.run("", "take", "capped", "-n", "60")
	if code != 0 || out != "1:50\n" || !strings.Contains(errOut, "took 50 of the 60 IDs asked for: its space ends at 50: the sequence is exhausted now") {
		t.Fatalf("take -n 60 of 50: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	c.ok("create", "short")
	c.initialise("short", 10)
	out, errOut, code = c.run("", "take", "short", "-n", "20")
	if code != 0 || out != "1:10\n" || !strings.Contains(errOut, "took 10 of the 20 IDs asked for: fewer remain below the reserved ceiling") {
		t.Fatalf("take -n 20 below a ceiling of 10: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, _ := c.run("", "take", "short", "-n", "1"); strings.Contains(errOut, "took") {
		t.Fatalf("a take that got what it asked for says %q", errOut)
	}
}

// widen moves the end of a space and the windows up, never down, and says
// what it did; without --max or --windows, or with zero, it is a usage
// error.
func TestWidenMaxAndWindows(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	c.ok("create", "cap", "--max", "100")
	c.initialise("cap", 10)
	for _, args := range [][]string{{"widen", "cap"}, {"widen", "cap", "--windows", "0"}, {"widen", "cap", "--max", "-5"}} {
		if _, errOut, code := c.run("", args...); code != 2 || !strings.Contains(errOut, "widen") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	if out := c.ok("widen", "cap", "--max", "500", "--windows", "2"); !strings.Contains(out, `widened sequence "cap": its space ends at 500 (was 100), 2 windows (were 0)`) {
		t.Fatalf("widen: %q", out)
	}
	if out := c.ok("widen", "cap", "--windows", "2", "-o", "json"); !strings.Contains(out, `"widened":false`) || !strings.Contains(out, `"windows":2`) {
		t.Fatalf("widen again -o json: %q", out)
	}
	if _, errOut, code := c.run("", "widen", "cap", "--windows", "1"); code != 2 || !strings.Contains(errOut, "windows never decrease") {
		t.Fatalf("fewer windows: exit %d, %q; want refused with exit 2", code, errOut)
	}
	if st, _, err := c.admin.Describe(context.Background(), "cap"); err != nil || st.End != 500 || st.Windows != 2 {
		t.Fatalf("after widen: %+v, %v", st, err)
	}
}

// adopt moves a Curator counter to the state format above its value, says
// what it did, and leaves an adopted sequence alone.
func TestAdoptCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	ctx := context.Background()
	if err := c.admin.ZK().EnsurePath(ctx, c.root); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.ZK().Session().Create(ctx, c.root+"/old", binary.BigEndian.AppendUint64(nil, 41), 0); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("adopt", "old"); !strings.Contains(out, `adopted "old": the curator 8-byte counter at 41 is now a sequence handing out IDs from 42`) {
		t.Fatalf("adopt: %q", out)
	}
	if out := c.ok("take", "old", "-n", "2"); out != "42:43\n" {
		t.Fatalf("take after adopt: %q", out)
	}
	if out := c.ok("adopt", "old", "-o", "json"); !strings.Contains(out, `"adopted":false`) {
		t.Fatalf("adopt again: %q", out)
	}
	if _, errOut, code := c.run("", "adopt", "missing"); code == 0 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("adopt of a missing name: exit %d, %q", code, errOut)
	}
}
