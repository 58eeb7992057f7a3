package main

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// zkModeCase runs `seqkeeper serve` in-process against the ZooKeeper at
// servers, with a root and store of the test's own.
type zkModeCase struct {
	t       *testing.T
	servers []string
	env     map[string]string
}

func newZKModeCase(t *testing.T, servers []string) *zkModeCase {
	root := "/standalone-test/" + strings.ReplaceAll(t.Name(), "/", "-")
	return &zkModeCase{t: t, servers: servers, env: map[string]string{
		"SEQKEEPER_ZK":             strings.Join(servers, ","),
		"SEQKEEPER_ROOT":           root + "/all-sequences",
		"SEQKEEPER_ELECTION_PATH":  root + "/election",
		"SEQKEEPER_MARKER_PATH":    root + "/cluster",
		"SEQKEEPER_STORE":          "file://" + t.TempDir() + "/store",
		"SEQKEEPER_LOG_FORMAT":     "json",
		"SEQKEEPER_SWEEP_INTERVAL": "200ms",
		"SEQKEEPER_RUNWAY":         "2s",
	}}
}

// start runs serve with args in the background; the test's end stops it.
func (c *zkModeCase) start(args ...string) *replicaProc {
	c.t.Helper()
	r := &replicaProc{id: "r1", addr: freeAddr(c.t), exit: make(chan int, 1), stderr: &testenv.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	g := &globals{
		stdin: strings.NewReader(""), stdout: &testenv.Buffer{}, stderr: r.stderr,
		lookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
	}
	go func() {
		r.exit <- run(ctx, g, append([]string{"serve", "--http", r.addr, "--id", r.id}, args...))
	}()
	c.t.Cleanup(func() {
		cancel()
		select {
		case <-r.exit:
		case <-time.After(30 * time.Second):
			c.t.Errorf("serve did not stop")
		}
	})
	return r
}

// exited waits for serve to exit by itself and returns its exit code.
func (r *replicaProc) exited(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.exit:
		r.exit <- code // for the cleanup
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit\n%s", r.stderr)
		return 0
	}
}

// leading waits until r is ready and leads the election.
func (r *replicaProc) leading(t *testing.T) {
	t.Helper()
	eventually(t, "replica "+r.id+" leads", func() bool {
		var st struct {
			Leading bool `json:"leading"`
		}
		return r.get(t, "/readyz", nil) == http.StatusOK && r.get(t, "/v1/status", &st) == http.StatusOK && st.Leading
	})
}

// stop sends serve the equivalent of SIGTERM and checks it exits 0.
func (r *replicaProc) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if code := r.exited(t); code != 0 {
		t.Fatalf("serve exited %d after a stop, want 0\n%s", code, r.stderr)
	}
}

// On a standalone ZooKeeper serve refuses to start (exit 2) before it
// writes anything, and says why and how to fix it.
func TestServeRefusesStandaloneZooKeeper(t *testing.T) {
	t.Parallel()
	e := testenv.StartStandalone(t)
	c := newZKModeCase(t, e.Servers())
	r := c.start()
	if code := r.exited(t); code != 2 {
		t.Fatalf("serve on a standalone ZooKeeper exited %d, want 2\n%s", code, r.stderr)
	}
	out := r.stderr.String()
	for _, want := range []string{
		"seqkeeper: ZooKeeper " + e.Addr(0) + " runs in standalone mode (/zookeeper/config lists no servers",
		"IDs handed out since the copy will be handed out again",
		"standaloneEnabled=false and a server.1= line in zoo.cfg",
		"--allow-standalone-zookeeper (SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER=true, or 'allow_standalone_zookeeper: true' in the config file)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	conn := testenv.Connect(t, e.Servers(), 10*time.Second)
	if ok, _, err := conn.Session().Exists(context.Background(), "/standalone-test"); err != nil || ok {
		t.Fatalf("serve wrote to ZooKeeper before refusing: /standalone-test exists=%v, %v", ok, err)
	}

	// An explicit false is a refusal too.
	c.env["SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER"] = "true"
	if code := c.start("--allow-standalone-zookeeper=false").exited(t); code != 2 {
		t.Fatalf("--allow-standalone-zookeeper=false: exit %d, want 2", code)
	}

	// The built binary's exit code, as an operator's script sees it.
	delete(c.env, "SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER")
	c.env["SEQKEEPER_HTTP"] = freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, seqkeeperBinary(t), "serve")
	cmd.Env = (&cli{env: c.env}).environ()
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "runs in standalone mode") {
		t.Fatalf("seqkeeper serve (binary) on a standalone ZooKeeper: %v\n%s\nwant exit status 2", err, stderr.String())
	}
}

// With the flag (or its environment variable, or its config file key),
// serve accepts a standalone ZooKeeper, warns, and works.
func TestServeOnStandaloneZooKeeperWhenAllowed(t *testing.T) {
	t.Parallel()
	e := testenv.StartStandalone(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"--allow-standalone-zookeeper"}},
		{"env", map[string]string{"SEQKEEPER_ALLOW_STANDALONE_ZOOKEEPER": "true"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newZKModeCase(t, e.Servers())
			for k, v := range tc.env {
				c.env[k] = v
			}
			r := c.start(tc.args...)
			r.leading(t)
			out := r.stderr.String()
			for _, want := range []string{
				`"level":"warn"`, `"zookeeper_mode":"standalone"`,
				"runs in standalone mode and allow_standalone_zookeeper is set: a rollback of ZooKeeper's data",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
			r.stop(t)
		})
	}
}

// On a quorum-mode ZooKeeper (one server, standaloneEnabled=false) serve
// starts without the flag and logs the mode it found.
func TestServeOnQuorumZooKeeper(t *testing.T) {
	t.Parallel()
	e := testenv.StartEnsemble(t, 1)
	c := newZKModeCase(t, e.Servers())
	r := c.start()
	r.leading(t)
	out := r.stderr.String()
	if !strings.Contains(out, `"zookeeper_mode":"quorum"`) || strings.Contains(out, "standalone mode") {
		t.Fatalf("serve on a quorum-mode ZooKeeper logged:\n%s", out)
	}
	r.stop(t)
}
