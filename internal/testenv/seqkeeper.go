package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// seqkeeperPackage is the command SeqkeeperBinary builds.
const seqkeeperPackage = "github.com/seqkeeper/seqkeeper/cmd/seqkeeper"

var seqkeeperBin struct {
	once sync.Once
	path string
	err  error
}

// SeqkeeperBinary returns the path of the seqkeeper command, built from
// this checkout (go build ./cmd/seqkeeper) on first use and shared by every
// test of the test binary. Main removes it when the tests end.
// SEQKEEPER_TEST_BIN names a binary to use instead (another commit's, to
// compare them under the same benchmark: scripts/pace.sh).
func SeqkeeperBinary(t testing.TB) string {
	t.Helper()
	seqkeeperBin.once.Do(func() {
		if bin := os.Getenv("SEQKEEPER_TEST_BIN"); bin != "" {
			seqkeeperBin.path = bin
			return
		}
		seqkeeperBin.path, seqkeeperBin.err = buildSeqkeeper()
	})
	if seqkeeperBin.err != nil {
		t.Fatal(seqkeeperBin.err)
	}
	return seqkeeperBin.path
}

func buildSeqkeeper() (string, error) {
	dir, err := os.MkdirTemp("", "seqkeeper-bin-")
	if err != nil {
		return "", err
	}
	atExit(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "seqkeeper")
	// The test's own working directory lies in the module, so the import
	// path names this checkout's command. No VCS stamp: a test needs none,
	// and a worktree or an unpacked copy need not have git.
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", path, seqkeeperPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", seqkeeperPackage, err, out)
	}
	return path, nil
}

// ClusterOptions configure a Cluster; the zero value is three replicas
// sharing a file store.
type ClusterOptions struct {
	// Replicas is the number of serve processes (default 3).
	Replicas int
	// Store is the store URL; default a file:// store in a temporary
	// directory, shared by the replicas (they run on one machine).
	Store string
	// Env sets settings as environment variables, over the defaults
	// (e.g. "SEQKEEPER_RUNWAY": "5s"), and anything else the processes
	// need (AWS_ACCESS_KEY_ID for an S3 store).
	Env map[string]string
}

// ClusterDefaults are the settings a Cluster's replicas get unless
// ClusterOptions.Env says otherwise: a short session timeout (a killed
// primary is replaced within seconds), a short ceiling wait (a take at the
// ceiling answers 503 rather than hang), and a fast reservation loop.
var ClusterDefaults = map[string]string{
	"SEQKEEPER_ZK_SESSION_TIMEOUT": "4s",
	"SEQKEEPER_CEILING_WAIT":       "1s",
	"SEQKEEPER_RUNWAY":             "2s",
	"SEQKEEPER_SWEEP_INTERVAL":     "200ms",
	"SEQKEEPER_LOG_FORMAT":         "json",
}

// Cluster is replicas of `seqkeeper serve`, run as processes of the built
// binary against a ZooKeeper, with the sequences root, election path and
// marker under the test's ZooKeeper root. Each replica keeps its loopback
// address across restarts. The test's end stops them all; when the test
// failed, it logs the end of each replica's log and keeps the logs.
//
// Replica indexes are 0-based; replica i's id is "r<i>".
type Cluster struct {
	t testing.TB
	// Root, ElectionPath and MarkerPath are the cluster's znodes, Store its
	// store URL.
	Root, ElectionPath, MarkerPath, Store string

	bin    string
	env    []string
	addrs  []string
	procs  []*process
	logDir string
	hc     *http.Client
}

// StartCluster starts the replicas of a cluster on z and waits until every
// one is ready (/readyz).
func StartCluster(t testing.TB, z *ZK, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Replicas == 0 {
		opts.Replicas = 3
	}
	c := &Cluster{
		t: t, bin: SeqkeeperBinary(t),
		Root: z.Path("all-sequences"), ElectionPath: z.Path("election"), MarkerPath: z.Path("cluster"),
		Store: opts.Store,
		hc:    &http.Client{Timeout: 2 * time.Second},
	}
	if c.Store == "" {
		c.Store = "file://" + filepath.Join(t.TempDir(), "store")
	}
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "TMPDIR": os.TempDir(),
		"SEQKEEPER_ZK":            strings.Join(z.Servers, ","),
		"SEQKEEPER_ROOT":          c.Root,
		"SEQKEEPER_ELECTION_PATH": c.ElectionPath,
		"SEQKEEPER_MARKER_PATH":   c.MarkerPath,
		"SEQKEEPER_STORE":         c.Store,
	}
	for k, v := range ClusterDefaults {
		env[k] = v
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	for k, v := range env {
		c.env = append(c.env, k+"="+v)
	}
	sort.Strings(c.env)
	var err error
	if c.logDir, err = os.MkdirTemp("", "seqkeeper-cluster-"); err != nil {
		t.Fatal(err)
	}
	for i := range opts.Replicas {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p := &process{
			name:     fmt.Sprintf("seqkeeper serve r%d (%s)", i, addr),
			argv:     []string{c.bin, "serve", "--id", fmt.Sprintf("r%d", i), "--http", addr},
			env:      c.env,
			cleanEnv: true,
			dir:      c.logDir,
			logPath:  filepath.Join(c.logDir, fmt.Sprintf("r%d.log", i)),
			// serve's own bound on a graceful shutdown is 20 s.
			grace: 30 * time.Second,
		}
		register(p)
		c.addrs = append(c.addrs, addr)
		c.procs = append(c.procs, p)
	}
	t.Cleanup(c.stopAll)
	for i := range c.procs {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.procs {
		if err := c.WaitReady(i, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// stopAll stops every replica at the test's end, gracefully and at once,
// and shows the logs if the test failed.
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(func() { _ = p.stop(syscall.SIGTERM) })
	}
	wg.Wait()
	if !c.t.Failed() {
		_ = os.RemoveAll(c.logDir)
		return
	}
	for i := range c.procs {
		c.t.Logf("replica r%d (%s), log %s: %v", i, c.addrs[i], c.LogPath(i), tailN(c.LogPath(i), 4000))
	}
	c.t.Logf("the replicas' logs are kept in %s", c.logDir)
}

// Len is the number of replicas.
func (c *Cluster) Len() int { return len(c.procs) }

// Addr is replica i's HTTP address (host:port); it never changes.
func (c *Cluster) Addr(i int) string { return c.addrs[i] }

// URL is replica i's base URL.
func (c *Cluster) URL(i int) string { return "http://" + c.addrs[i] }

// Endpoints are the replicas' base URLs, in index order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.addrs))
	for i := range c.addrs {
		eps[i] = c.URL(i)
	}
	return eps
}

// LogPath is the file replica i's output goes to (every incarnation's,
// each after a line saying when it started).
func (c *Cluster) LogPath(i int) string { return c.procs[i].logPath }

// Running reports whether replica i's process is alive.
func (c *Cluster) Running(i int) bool { return c.procs[i].running() }

// Start starts replica i on its address unless it is running. It does not
// wait until the replica is ready (WaitReady).
func (c *Cluster) Start(i int) error { return c.procs[i].start() }

// Kill sends replica i SIGKILL (a crash: nothing is pushed back, its
// ZooKeeper session lives until it expires) and waits until it exited.
func (c *Cluster) Kill(i int) { c.procs[i].kill() }

// Freeze sends replica i SIGSTOP: a host that vanished, as the others see
// it (its port accepts connections through the kernel's backlog, nothing
// answers, its session is not touched). Thaw undoes it; a frozen replica
// still stops at the test's end.
func (c *Cluster) Freeze(i int) { c.procs[i].signal(syscall.SIGSTOP) }

// Thaw sends replica i SIGCONT.
func (c *Cluster) Thaw(i int) { c.procs[i].signal(syscall.SIGCONT) }

// Stop sends replica i SIGTERM (a graceful stop: it drains, pushes its
// buffered IDs back and hands leadership over) and waits until it exited.
// It returns an error unless the replica exited with status 0 (nil also
// when it was not running).
func (c *Cluster) Stop(i int) error {
	if err := c.procs[i].stop(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s after SIGTERM: %w", c.procs[i].name, err)
	}
	return nil
}

// Restart stops replica i gracefully if it runs, then starts it again on
// the same address. It does not wait until it is ready.
func (c *Cluster) Restart(i int) error {
	if err := c.Stop(i); err != nil {
		return err
	}
	return c.Start(i)
}

// WaitReady waits until replica i answers /readyz with 200, and fails at
// once if its process exits meanwhile.
func (c *Cluster) WaitReady(i int, timeout time.Duration) error {
	return c.procs[i].waitFor(timeout, func(ctx context.Context) error {
		code, err := c.get(ctx, i, "/readyz", nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz: %d", code)
		}
		return nil
	})
}

// Status is what replica i's GET /v1/status says of the election.
type Status struct {
	// Leading: this replica is the primary.
	Leading bool `json:"leading"`
	// Primary is the replica the election names primary; nil when it
	// cannot be read now.
	Primary *struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	} `json:"primary"`
}

// Status asks replica i for its status.
func (c *Cluster) Status(ctx context.Context, i int) (Status, error) {
	var st Status
	code, err := c.get(ctx, i, "/v1/status", &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("replica r%d: GET /v1/status: %d", i, code)
	}
	return st, err
}

// Leader returns the index of the running replica whose status says it
// leads, or -1 when none does now.
func (c *Cluster) Leader(ctx context.Context) int {
	for i := range c.procs {
		if !c.Running(i) {
			continue
		}
		if st, err := c.Status(ctx, i); err == nil && st.Leading {
			return i
		}
	}
	return -1
}

func (c *Cluster) get(ctx context.Context, i int, path string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(i)+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if into == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(into)
}

// Run runs a seqkeeper command (create, describe, ...) with the cluster's
// settings and returns its standard output; an error carries the exit
// status and standard error.
func (c *Cluster) Run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errors.Join(fmt.Errorf("seqkeeper %s: %w", strings.Join(args, " "), err), errors.New(strings.TrimSpace(errOut.String())))
	}
	return out.String(), nil
}
