package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// Black-box tests: the built seqkeeper binary, run as a process against the
// real test ZooKeeper.

// seqkeeperBinary is the built seqkeeper command, one build per test
// binary (testenv.SeqkeeperBinary).
func seqkeeperBinary(t *testing.T) string {
	t.Helper()
	return testenv.SeqkeeperBinary(t)
}

// exe runs the binary with the cli's environment and returns stdout,
// stderr and the exit code.
func (c *cli) exe(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(seqkeeperBinary(c.t), append([]string{"--root", c.root}, args...)...)
	cmd.Env = c.environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func (c *cli) environ() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range c.env {
		env = append(env, k+"="+v)
	}
	return env
}

func TestBinaryErrorsAndExitCodes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_ZK_CONNECT_TIMEOUT"] = "2s" // the no-ZooKeeper case fails fast
	badConfig := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badConfig, []byte("zk: [a:1]\nrunwya: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "bb")
	c.initialise("bb", 100)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"unknown sequence", []string{"take", "nope"}, 1, "unknown sequence"},
		{"bad name", []string{"take", "a/b"}, 2, "invalid sequence name"},
		{"bad range", []string{"push", "bb", "9:x"}, 2, "9:x"},
		{"never issued", []string{"push", "bb", "50:60"}, 2, "never issued"},
		{"bad store URL", []string{"--store", "ftp://x", "describe", "bb"}, 2, "store"},
		{"bad config file", []string{"--config", badConfig, "list"}, 2, "runwya"},
		{"unknown flag", []string{"take", "bb", "--bogus"}, 2, "bogus"},
		{"no zookeeper", []string{"--zk", "127.0.0.1:1", "list"}, 1, "zookeeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := c.exe(tc.args...)
			if code != tc.code || !strings.Contains(strings.ToLower(errOut), strings.ToLower(tc.want)) {
				t.Fatalf("seqkeeper %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
			}
		})
	}
	if out, _, code := c.exe("take", "bb", "-n", "3"); code != 0 || strings.TrimSpace(out) != "1:3" {
		t.Fatalf("take: exit %d, %q", code, out)
	}
}

// SIGTERM to the primary's process: it exits 0 and another replica leads.
func TestBinarySIGTERMHandsOver(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	start := func(id string) (*exec.Cmd, string, *bytes.Buffer) {
		addr := freeAddr(t)
		cmd := exec.Command(seqkeeperBinary(t), "--root", c.root, "serve", "--http", addr, "--id", id)
		cmd.Env = c.environ()
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, addr, &logs
	}
	leading := func(addr string) bool {
		r := &replicaProc{addr: addr}
		var st struct {
			Leading bool `json:"leading"`
		}
		return r.get(t, "/v1/status", &st) == http.StatusOK && st.Leading
	}
	// bin-a starts first, so it leads; bin-b queues behind it.
	a, aAddr, aLogs := start("bin-a")
	eventually(t, "bin-a leads", func() bool { return leading(aAddr) })
	_, bAddr, _ := start("bin-b")
	eventually(t, "bin-b ready", func() bool { return (&replicaProc{addr: bAddr}).get(t, "/readyz", nil) == http.StatusOK })
	began := time.Now()
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, aLogs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	eventually(t, "bin-b leads", func() bool { return leading(bAddr) })
	t.Logf("SIGTERM to the primary: exit 0, successor leading after %s", time.Since(began))
}
