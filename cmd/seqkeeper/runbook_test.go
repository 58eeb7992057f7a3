package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// The runbooks of the docs run as written: each is a script in
// testdata/runbooks, run by testscript (go-internal's, the way the go
// command tests itself) with the seqkeeper command built into the test
// binary, against the shared real ZooKeeper and a real MinIO bucket of
// the script's own. A runbook in the docs names its script in a comment
// above it (<!-- runbook: testdata/runbooks/NAME.txtar -->), and
// TestRunbooksMatchTheDocs holds the two together: every seqkeeper
// command the doc shows runs, in the doc's order, in the script.
//
// Each script starts with $SEQKEEPER_ZK, $SEQKEEPER_ROOT, $SEQKEEPER_STORE
// (and the bucket's credentials) and $SEQKEEPER_HTTP set (and a second
// replica's address in $REPLICA_B_HTTP), so the doc's
// commands run as a reader types them, and has these commands beside
// testscript's own:
//
//	exits N prog args...   runs prog, which must exit with status N
//	lose-zookeeper         ZooKeeper loses every znode of the script's root
//	                       (its sequences, election and marker), as a wipe
//	                       of its servers does
//	serving [URL]          waits until the replica at URL (default
//	                       http://$SEQKEEPER_HTTP) leads and its primary
//	                       works (the status's reserve view leads)
//	ready [URL]            waits until it is ready (a standby too)
//	candidates N           waits until N replicas stand in the election
//	legacy-counter NAME N  writes NAME as Curator's 8-byte counter at N
//	expand FILE...         replaces each $VAR or ${VAR} in the files with
//	                       its value ($ZROOT: a znode of the script's own)
func TestRunbooks(t *testing.T) {
	t.Parallel()
	deadline, _ := t.Deadline() // background replicas are stopped by then
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/runbooks",
		Deadline:            deadline,
		RequireExplicitExec: true,
		Setup:               runbookSetup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":          runbookExits,
			"lose-zookeeper": runbookLoseZooKeeper,
			"serving":        runbookServing,
			"ready":          runbookReady,
			"candidates":     runbookCandidates,
			"legacy-counter": runbookLegacyCounter,
			"expand":         runbookExpand,
		},
	})
}

// runbookZK is the key of a script's ZooKeeper connection and root.
type runbookZK struct{}

type runbookEnv struct {
	conn *zkclient.Client
	// base holds the script's roots; their elections and markers are
	// derived from them, under config.RootsPrefix.
	base     string
	election string // $SEQKEEPER_ROOT's
}

// lose deletes every znode of the script's roots, their derived
// elections and markers included.
func (z runbookEnv) lose() error {
	derived, _, err := z.conn.Session().Children(context.Background(), config.RootsPrefix)
	if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return err
	}
	mine := url.PathEscape(strings.TrimPrefix(z.base, "/") + "/")
	for _, d := range derived {
		if strings.HasPrefix(d, mine) {
			if err := testenv.DeleteAll(z.conn, config.RootsPrefix+"/"+d); err != nil {
				return err
			}
		}
	}
	return testenv.DeleteAll(z.conn, z.base)
}

func runbookSetup(env *testscript.Env) error {
	t, ok := env.T().(testing.TB)
	if !ok {
		return errors.New("testscript's T is not a testing.TB")
	}
	z, conn, err := runbookZooKeeper(t, env)
	if err != nil {
		return err
	}
	bucket := testenv.ObjectStore(t)
	root := z.Root + "/all-sequences"
	election, _ := config.DerivedPaths(root)
	z1 := runbookEnv{conn: conn, base: z.Root, election: election}
	// After the script's background replicas are stopped (env.Defer
	// would run before).
	t.Cleanup(func() { _ = z1.lose(); conn.Close() })
	env.Values[runbookZK{}] = z1
	env.Vars = append(env.Vars,
		"SEQKEEPER_ZK="+strings.Join(z.Servers, ","),
		"SEQKEEPER_ROOT="+root,
		fmt.Sprintf("SEQKEEPER_STORE=s3://%s/runbook?endpoint=%s&region=%s", bucket.Bucket, bucket.Endpoint, bucket.Region),
		"AWS_ACCESS_KEY_ID="+bucket.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+bucket.SecretKey,
		"SEQKEEPER_HTTP="+freeAddr(t),
		"REPLICA_B_HTTP="+freeAddr(t), // a second replica's (--http)
		"SEQKEEPER_LOG_FORMAT=json",
		"ZROOT="+z.Root,
		"S3_BUCKET="+bucket.Bucket, "S3_ENDPOINT="+bucket.Endpoint, // for a file of several roots
		// What a runbook waits for, at a test's pace: a replica raises
		// ceilings every 200 ms, and a take at the ceiling waits 5 s.
		"SEQKEEPER_SWEEP_INTERVAL=200ms",
		"SEQKEEPER_CEILING_WAIT=5s",
	)
	return nil
}

// runbookZooKeeper is the script's ZooKeeper and an all-powerful session
// on it: the shared one, or for a script named tls-* a TLS-only ensemble
// of its own that knows clients by certificate. There the commands run
// as x509:CN=ops ($SEQKEEPER_ZK_TLS_*), and $<ROLE>_CERT and $<ROLE>_KEY
// hold the certificates of CN=ops (OPS), CN=seqkeeper-replica (REPLICA),
// CN=orders-service (WORKER) and CN=stranger (STRANGER).
func runbookZooKeeper(t testing.TB, env *testscript.Env) (*testenv.ZK, *zkclient.Client, error) {
	if !strings.HasPrefix(path.Base(t.Name()), "tls-") {
		z := testenv.ZooKeeper(t)
		conn, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
		return z, conn, err
	}
	testenv.Slow(t) // an ensemble of its own: 30 s of JVM start
	e := testenv.StartTLSEnsemble(t, 1)
	ca, cert, key := e.TLSFiles(t, "ops")
	env.Vars = append(env.Vars, "SEQKEEPER_ZK_TLS_CA_FILE="+ca, "SEQKEEPER_ZK_TLS_CERT_FILE="+cert, "SEQKEEPER_ZK_TLS_KEY_FILE="+key,
		"OPS_CERT="+cert, "OPS_KEY="+key)
	for role, cn := range map[string]string{"REPLICA": "seqkeeper-replica", "WORKER": "orders-service", "STRANGER": "stranger"} {
		_, cert, key := e.TLSFiles(t, cn)
		env.Vars = append(env.Vars, role+"_CERT="+cert, role+"_KEY="+key)
	}
	conn, err := zkclient.Dial(context.Background(), e.Servers(), zkclient.Options{TLS: e.ClientTLS(t, testenv.TLSSuperUserCN)})
	return &testenv.ZK{Servers: e.Servers(), Root: "/runbook"}, conn, err
}

// runbookExits runs a program that must exit with the given status.
func runbookExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N prog args...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d; want %d", strings.Join(args[1:], " "), got, want)
	}
}

// runbookLoseZooKeeper deletes every znode of the script's root: what a
// wipe of the ensemble's data does to it.
func runbookLoseZooKeeper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: lose-zookeeper")
	}
	ts.Check(ts.Value(runbookZK{}).(runbookEnv).lose())
}

// runbookServing waits until a replica's primary works (serving), not
// just until the election names it (the status's "leading"): the primary
// then still takes the store and restores what ZooKeeper lost, which can
// outlast a take's ceiling wait; or until the replica is ready (ready).
func runbookServing(ts *testscript.TestScript, neg bool, args []string) {
	runbookWaitReplica(ts, neg, args, "serving", "/v1/status", `"reserve":{"leading":true`)
}

func runbookReady(ts *testscript.TestScript, neg bool, args []string) {
	runbookWaitReplica(ts, neg, args, "ready", "/readyz", "")
}

var runbookHTTP = &http.Client{Timeout: 5 * time.Second}

// runbookWaitReplica waits until the replica at args[0] (default
// $SEQKEEPER_HTTP) answers route with 200 and a body holding want.
func runbookWaitReplica(ts *testscript.TestScript, neg bool, args []string, cmd, route, want string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: %s [URL]", cmd)
	}
	url := "http://" + ts.Getenv("SEQKEEPER_HTTP")
	if len(args) == 1 {
		url = args[0]
	}
	runbookWait(ts, func() (bool, string) {
		resp, err := runbookHTTP.Get(url + route)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), want),
			fmt.Sprintf("%s: the replica at %s did not answer %s with 200 %s (last: %s)", cmd, url, route, want, resp.Status)
	})
}

// runbookWait polls ok until it holds, for up to 30 s; then the script
// fails with what ok said last.
func runbookWait(ts *testscript.TestScript, ok func() (bool, string)) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, last := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("after 30 s: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runbookCandidates waits until the root's election has N candidates.
func runbookCandidates(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: candidates N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	z := ts.Value(runbookZK{}).(runbookEnv)
	runbookWait(ts, func() (bool, string) {
		kids, _, err := z.conn.Session().Children(context.Background(), z.election)
		n := 0
		for _, k := range kids {
			if strings.HasPrefix(k, "_c_") { // a candidate (election/candidate.go), not leader-beat
				n++
			}
		}
		return err == nil && n == want, fmt.Sprintf("the election %s has %d candidates (%v); want %d", z.election, n, err, want)
	})
}

// runbookLegacyCounter writes a Curator DistributedAtomicLong's counter.
func runbookLegacyCounter(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: legacy-counter NAME N")
	}
	n, err := strconv.ParseUint(args[1], 10, 63)
	ts.Check(err)
	z := ts.Value(runbookZK{}).(runbookEnv)
	root := ts.Getenv("SEQKEEPER_ROOT")
	ts.Check(z.conn.EnsurePath(context.Background(), root))
	_, err = z.conn.Session().Create(context.Background(), root+"/"+args[0], binary.BigEndian.AppendUint64(nil, n), 0)
	ts.Check(err)
}

// runbookExpand expands the script's variables in files of its archive.
func runbookExpand(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expand FILE...")
	}
	for _, f := range args {
		data, err := os.ReadFile(ts.MkAbs(f))
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(f), []byte(os.Expand(string(data), ts.Getenv)), 0o600))
	}
}

// runbookMarker names a runbook's script in the docs, above its block.
var runbookMarker = regexp.MustCompile(`^<!-- runbook: (testdata/runbooks/[a-z0-9-]+\.txtar) -->$`)

// TestRunbooksMatchTheDocs holds each runbook of the docs to its script:
// the seqkeeper commands of the block under the marker, in order, with the
// variables a command line sets, are commands the script runs, in order,
// with those variables set (the script runs more: its setup and its
// checks). Every script belongs to a runbook.
func TestRunbooksMatchTheDocs(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	used := map[string]bool{}
	for _, doc := range docs {
		for _, b := range runbooksOf(t, doc) {
			used[b.script] = true
			data, err := os.ReadFile(b.script)
			if err != nil {
				t.Errorf("%s:%d: the runbook names %s, which cannot be read: %v", doc, b.line, b.script, err)
				continue
			}
			ran := scriptCommands(data)
			if missing, ok := notInOrder(b.cmds, ran); !ok {
				var lines []string
				for _, c := range ran {
					lines = append(lines, c.String())
				}
				t.Errorf("%s:%d: the runbook shows %q, which %s does not run in the runbook's order; the script runs:\n  %s",
					doc, b.line, missing.String(), b.script, strings.Join(lines, "\n  "))
			}
		}
	}
	scripts, _ := filepath.Glob("testdata/runbooks/*.txtar")
	for _, s := range scripts {
		if !used[s] {
			t.Errorf("%s is the runbook of no doc: put <!-- runbook: %s --> above the doc's block it runs", s, s)
		}
	}
}

// command is a seqkeeper command line and the variables set for it.
type command struct {
	env  map[string]string
	line string
}

func (c command) String() string {
	var env []string
	for k, v := range c.env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return strings.Join(append(env, c.line), " ")
}

// runbook is a marked block of a doc: its line, its script and the
// seqkeeper commands it shows.
type runbook struct {
	line   int
	script string
	cmds   []command
}

// runbooksOf returns the marked blocks of doc, each with its commands: a
// transcript's "$ ..." lines, or every line of a shell block, each
// without its trailing comment. A command that is not seqkeeper's (bar
// "echo $?", which the script's exits checks) fails the test: the script
// could not run it as written.
func runbooksOf(t *testing.T, doc string) []runbook {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out []runbook
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := runbookMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "<!--") && strings.Contains(l, "runbook") {
				t.Errorf("%s:%d: %q is not a runbook marker: <!-- runbook: testdata/runbooks/NAME.txtar -->", doc, i+1, lines[i])
			}
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			t.Errorf("%s:%d: a runbook marker must stand right above a fenced block", doc, i+1)
			continue
		}
		b := runbook{line: i + 1, script: m[1]}
		var block []string
		for i += 2; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			block = append(block, strings.TrimSpace(lines[i]))
		}
		transcript := slices.ContainsFunc(block, func(l string) bool { return strings.HasPrefix(l, "$ ") })
		for j := 0; j < len(block); j++ {
			l := block[j]
			if transcript && !strings.HasPrefix(l, "$ ") || l == "" || strings.HasPrefix(l, "#") {
				continue // output, or a comment
			}
			l = strings.TrimPrefix(l, "$ ")
			for strings.HasSuffix(l, "\\") && j+1 < len(block) {
				j++
				l = strings.TrimSuffix(l, "\\") + " " + block[j]
			}
			if c, _, ok := strings.Cut(l, " #"); ok {
				l = c
			}
			c := command{env: map[string]string{}}
			f := strings.Fields(l)
			for ; len(f) > 1 && strings.Contains(f[0], "="); f = f[1:] {
				k, v, _ := strings.Cut(f[0], "=")
				c.env[k] = v
			}
			switch {
			case len(f) > 0 && f[0] == "seqkeeper":
				c.line = strings.Join(f, " ")
				b.cmds = append(b.cmds, c)
			case strings.Join(f, " ") == "echo $?":
			default:
				t.Errorf("%s:%d: the runbook shows %q, which its script cannot run as written: only seqkeeper commands (and echo $?) belong in a runbook", doc, b.line, l)
			}
		}
		if len(b.cmds) == 0 {
			t.Errorf("%s:%d: the runbook shows no seqkeeper command", doc, b.line)
		}
		out = append(out, b)
	}
	return out
}

// scriptCommands returns the seqkeeper commands a script runs, as typed,
// with the variables its env commands set by then: from "exec seqkeeper
// ...", "! exec seqkeeper ..." and "exits N seqkeeper ...", without a
// background marker, in the script itself (not its files) up to a skip
// or stop.
func scriptCommands(data []byte) []command {
	var out []command
	env := map[string]string{}
	for _, l := range strings.Split(string(txtar.Parse(data).Comment), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
			continue
		case f[0] == "skip" || f[0] == "stop":
			return out
		case f[0] == "env":
			for _, kv := range f[1:] {
				if k, v, _ := strings.Cut(kv, "="); v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			continue
		case f[0] == "!":
			f = f[1:]
		case len(f) > 2 && f[0] == "exits":
			f = f[1:]
			f[0] = "exec"
		}
		if len(f) < 2 || f[0] != "exec" || f[1] != "seqkeeper" {
			continue
		}
		f = f[1:]
		if last := f[len(f)-1]; strings.HasPrefix(last, "&") && strings.HasSuffix(last, "&") {
			f = f[:len(f)-1]
		}
		out = append(out, command{env: maps.Clone(env), line: strings.Join(f, " ")})
	}
	return out
}

// notInOrder returns the first of want that does not follow the ones
// before it in got (same line, and every variable want sets set so).
func notInOrder(want, got []command) (command, bool) {
	for _, w := range want {
		i := slices.IndexFunc(got, func(g command) bool {
			if g.line != w.line {
				return false
			}
			for k, v := range w.env {
				if g.env[k] != v {
					return false
				}
			}
			return true
		})
		if i < 0 {
			return w, false
		}
		got = got[i+1:]
	}
	return command{}, true
}
