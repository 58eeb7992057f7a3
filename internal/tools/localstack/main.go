// Command localstack runs seqkeeper on this machine without Docker: a
// ZooKeeper 3.8 in quorum mode (one server, as the tests run it) and a MinIO
// with a bucket, as processes of this machine, and one `seqkeeper serve`
// against them, until interrupted. It writes the environment of the
// operator commands to DIR/env: in another terminal,
//
//	source .localstack/env && seqkeeper create orders && seqkeeper take orders -n 5
//
// With -tls ZooKeeper serves TLS only and knows clients by certificate, with
// throwaway certificates in DIR/tls, under the least-privilege ACL layout
// (docs/security.md), applied before the replica starts: the replica runs
// as x509:CN=seqkeeper-replica, DIR/env names the admin's certificate
// (x509:CN=ops), and CN=orders-service's is there for a worker.
//
// ZooKeeper and MinIO come from `bash scripts/setup.sh` (Debian's
// zookeeper package, MinIO built from source), as for the tests; without
// Docker, setup builds MinIO alone. DIR is emptied at start when it is
// localstack's (or empty); any other is refused.
//
//	go run ./internal/tools/localstack [-dir .localstack] [-http 127.0.0.1:7070] [-tls]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", ".localstack", "where the servers keep their data, logs and certificates (emptied at start if it is localstack's)")
	flag.StringVar(&o.http, "http", "127.0.0.1:7070", "the replica's HTTP API address")
	flag.BoolVar(&o.tls, "tls", false, "ZooKeeper serves TLS only and knows clients by certificate")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "localstack: no arguments expected, got %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once
	}()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, http string
	tls       bool
	// ready, when set, is closed once the replica has started.
	ready chan<- struct{}
}

// run starts the servers and the replica, and stops them all when ctx is
// done or the replica exits.
func run(ctx context.Context, o options, out, log io.Writer) error {
	dir, err := prepareDir(o.dir)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("-http %s: %w", o.http, err)
	}
	l.Close()
	fmt.Fprintf(out, "localstack: ZooKeeper (quorum mode%s) and MinIO under %s\n", map[bool]string{true: ", TLS only"}[o.tls], dir)
	zk, env, operator, err := startZooKeeper(dir, o.tls)
	if err != nil {
		return err
	}
	defer zk.StopAll()
	store, creds, stopStore, err := startMinIO(ctx, dir)
	if err != nil {
		return err
	}
	defer stopStore()
	shared := append(creds, "SEQKEEPER_ZK="+strings.Join(zk.Servers(), ","), "SEQKEEPER_STORE="+store,
		"SEQKEEPER_HTTP="+o.http)
	env = append(env, shared...)
	operator = append(operator, shared...)
	return serve(ctx, o, dir, env, operator, out, log)
}

// stamp marks a directory as localstack's, which a later start may empty.
const stamp = ".localstack"

// prepareDir empties dir (made absolute) for a new stack if it is
// localstack's or empty, creating it when missing, and refuses any other.
func prepareDir(d string) (string, error) {
	dir, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, stamp)); err != nil {
			return "", fmt.Errorf("-dir %s holds files and is not localstack's (no %s in it): give an empty or new directory", dir, stamp)
		}
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o700); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, stamp), []byte("a localstack directory: its next start empties it\n"), 0o600)
}

// startZooKeeper starts one server in quorum mode and returns the
// environment of the replica and of the operator: with -tls, the
// certificates of CN=seqkeeper-replica and of CN=ops.
func startZooKeeper(dir string, withTLS bool) (e *testenv.Ensemble, replica, operator []string, err error) {
	zdir := filepath.Join(dir, "zookeeper")
	if err := os.MkdirAll(zdir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	newEnsemble := testenv.NewEnsemble
	if withTLS {
		newEnsemble = testenv.NewTLSEnsemble
	}
	if e, err = newEnsemble(zdir, 1); err != nil {
		return nil, nil, nil, err
	}
	if err := e.StartAll(); err != nil {
		e.StopAll()
		return nil, nil, nil, err
	}
	if !withTLS {
		return e, nil, nil, nil
	}
	env := map[string][]string{}
	for _, cn := range []string{"seqkeeper-replica", "ops", "orders-service"} {
		ca, cert, key, err := e.WriteTLSFiles(filepath.Join(dir, "tls"), cn)
		if err != nil {
			e.StopAll()
			return nil, nil, nil, err
		}
		env[cn] = []string{"SEQKEEPER_ZK_TLS_CA_FILE=" + ca, "SEQKEEPER_ZK_TLS_CERT_FILE=" + cert, "SEQKEEPER_ZK_TLS_KEY_FILE=" + key}
	}
	return e, env["seqkeeper-replica"], env["ops"], nil
}

// startMinIO starts MinIO with a bucket "ids" and returns the store URL
// and the credentials.
func startMinIO(ctx context.Context, dir string) (string, []string, func(), error) {
	mdir := filepath.Join(dir, "minio")
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return "", nil, nil, err
	}
	m, err := testenv.NewMinIO(mdir)
	if err != nil {
		return "", nil, nil, err
	}
	if err := m.Start(); err != nil {
		m.Stop()
		return "", nil, nil, err
	}
	s := m.S3()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ids")}); err != nil {
		m.Stop()
		return "", nil, nil, fmt.Errorf("create the bucket: %w", err)
	}
	creds := []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey}
	return fmt.Sprintf("s3://ids/seqkeeper?endpoint=%s&region=%s", s.Endpoint, s.Region), creds, m.Stop, nil
}

// serve builds seqkeeper into dir and runs `seqkeeper serve` with env until
// ctx is done, after writing DIR/env (operator's) for the operator commands.
func serve(ctx context.Context, o options, dir string, env, operator []string, out, log io.Writer) error {
	bin := filepath.Join(dir, "bin", "seqkeeper")
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", bin, "github.com/seqkeeper/seqkeeper/cmd/seqkeeper")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("go build seqkeeper (run localstack in seqkeeper's module): %w", err)
	}
	if err := writeEnv(filepath.Join(dir, "env"), append(operator, "PATH="+filepath.Dir(bin)+":$PATH")); err != nil {
		return err
	}
	if o.tls {
		// The layout before the replica starts, as docs/security.md asks.
		apply := exec.CommandContext(ctx, bin, "acl", "apply", "--admin", "x509:CN=ops",
			"--replica", "x509:CN=seqkeeper-replica", "--worker", "x509:CN=orders-service")
		apply.Env = append(cleanEnviron(), operator...)
		apply.Stdout, apply.Stderr = out, log
		if err := apply.Run(); err != nil {
			return fmt.Errorf("seqkeeper acl apply: %w", err)
		}
	}
	fmt.Fprintf(out, "localstack: seqkeeper serve on http://%s; in another terminal: source %s\n", o.http, filepath.Join(dir, "env"))
	cmd := exec.Command(bin, "serve", "--id", "local")
	cmd.Env = append(cleanEnviron(), env...)
	cmd.Stdout, cmd.Stderr = out, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // gone with localstack
	if err := cmd.Start(); err != nil {
		return err
	}
	if o.ready != nil {
		close(o.ready)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Errorf("seqkeeper serve exited: %w", err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return ctx.Err()
	}
}

// cleanEnviron is this process's environment without seqkeeper's settings:
// the stack's own replace them all.
func cleanEnviron() []string {
	var env []string
	for _, v := range os.Environ() {
		if !strings.HasPrefix(v, "SEQKEEPER_") {
			env = append(env, v)
		}
	}
	return env
}

// writeEnv writes vars as a file for the shell's source: every other
// seqkeeper setting unset, each value quoted, and PATH ahead of $PATH.
func writeEnv(path string, vars []string) error {
	var b strings.Builder
	set := map[string]bool{}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		set[k] = true
		if k == "PATH" {
			fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(strings.TrimSuffix(val, ":$PATH")))
			continue
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(val))
	}
	for _, v := range os.Environ() {
		if k, _, _ := strings.Cut(v, "="); strings.HasPrefix(k, "SEQKEEPER_") && !set[k] {
			fmt.Fprintf(&b, "unset %s\n", k)
		}
	}
	for _, k := range []string{"SEQKEEPER_ZK_TLS_CA_FILE", "SEQKEEPER_ZK_TLS_CERT_FILE", "SEQKEEPER_ZK_TLS_KEY_FILE"} {
		if !set[k] {
			fmt.Fprintf(&b, "unset %s\n", k) // a -tls stack's, sourced before
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
