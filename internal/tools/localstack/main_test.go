package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// The stack comes up, and the operator commands work from DIR/env as the
// package's doc says: create and take, and with -tls under the layout
// (acl show), as the admin whose certificate DIR/env names.
func TestLocalStack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tls   bool
		after string
	}{
		{"plain", false, ""},
		{"tls", true, " && seqkeeper acl show"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.tls {
				testenv.Slow(t) // a TLS ensemble: 30 s of JVM start
			}
			dir := t.TempDir()
			addr := freeAddr(t)
			ready := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, options{dir: dir, http: addr, tls: tc.tls, ready: ready}, io.Discard, io.Discard)
			}()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != context.Canceled {
					t.Errorf("run ended with %v; want context.Canceled", err)
				}
			})
			select {
			case <-ready:
			case err := <-done:
				done <- err
				t.Fatalf("run: %v", err)
			case <-time.After(2 * time.Minute):
				t.Fatal("the stack did not start within 2 minutes")
			}
			waitReady(t, "http://"+addr+"/readyz")
			script := "source " + filepath.Join(dir, "env") + " && seqkeeper create orders && seqkeeper take orders -n 3" + tc.after
			out, err := exec.Command("bash", "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", script, err, out)
			}
			if !strings.Contains(string(out), "\n1:3\n") {
				t.Fatalf("%s: want 1:3 taken; got\n%s", script, out)
			}
			if tc.tls && !strings.Contains(string(out), "x509:CN=orders-service") {
				t.Fatalf("acl show after acl apply:\n%s", out)
			}
		})
	}
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 60 s (last: %v)", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// A directory that is not localstack's is never emptied.
func TestRefusesADirectoryNotItsOwn(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareDir(dir); err == nil || !strings.Contains(err.Error(), "is not localstack's") {
		t.Fatalf("prepareDir of a directory with a file of its own: %v; want a refusal", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the directory's file: %v", err)
	}
	// Its own directory is emptied for the next start.
	own := filepath.Join(dir, "own")
	if _, err := prepareDir(own); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "old-data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareDir(own); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(own, "old-data")); !os.IsNotExist(err) {
		t.Fatalf("the old stack's data after a new start: %v; want it gone", err)
	}
}

// The environment file survives values a shell would break on.
func TestEnvFileQuotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	if err := writeEnv(path, []string{"SEQKEEPER_STORE=s3://b/p?x=1&y='2'", "PATH=/tmp/o'neil $x/bin:$PATH"}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", "source "+path+` && printf '%s\n%s\n' "$SEQKEEPER_STORE" "${PATH%%:*}"`).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "s3://b/p?x=1&y='2'\n/tmp/o'neil $x/bin\n"; string(out) != want {
		t.Fatalf("sourced: %q; want %q", out, want)
	}
}
