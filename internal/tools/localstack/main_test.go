package main

import (
	"context"
	"io"
	"net"
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
