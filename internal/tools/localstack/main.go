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
// (ZooKeeper's super user, CN=testenv-super), and CN=orders-service's is
// there for a worker.
//
// ZooKeeper and MinIO come from `bash scripts/setup.sh` (Debian's
// zookeeper package, MinIO built from source), as for the tests.
//
//	go run ./internal/tools/localstack [-dir .localstack] [-http 127.0.0.1:7070] [-tls]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", ".localstack", "where the servers keep their data, logs and certificates (emptied at start)")
	flag.StringVar(&o.http, "http", "127.0.0.1:7070", "the replica's HTTP API address")
	flag.BoolVar(&o.tls, "tls", false, "ZooKeeper serves TLS only and knows clients by certificate")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "localstack: no arguments expected, got %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o700); err != nil {
		return err
	}
	fmt.Fprintf(out, "localstack: ZooKeeper (quorum mode%s) and MinIO under %s\n", map[bool]string{true: ", TLS only"}[o.tls], dir)
	zk, env, operator, err := startZooKeeper(dir, o.tls)
	if err != nil {
		return err
	}
	defer zk.StopAll()
	store, stopStore, err := startMinIO(ctx, dir)
	if err != nil {
		return err
	}
	defer stopStore()
	shared := []string{"SEQKEEPER_ZK=" + strings.Join(zk.Servers(), ","), "SEQKEEPER_STORE=" + store,
		"AWS_ACCESS_KEY_ID=minioadmin", "AWS_SECRET_ACCESS_KEY=minioadmin", "SEQKEEPER_HTTP=" + o.http}
	env = append(env, shared...)
	operator = append(operator, shared...)
	return serve(ctx, o, dir, env, operator, out, log)
}

// startZooKeeper starts one server in quorum mode and returns the
// environment of the replica and of the operator: with -tls, the
// certificates of CN=seqkeeper-replica and of the super user.
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
	for _, cn := range []string{"seqkeeper-replica", testenv.TLSSuperUserCN, "orders-service"} {
		ca, cert, key, err := e.WriteTLSFiles(filepath.Join(dir, "tls"), cn)
		if err != nil {
			e.StopAll()
			return nil, nil, nil, err
		}
		env[cn] = []string{"SEQKEEPER_ZK_TLS_CA_FILE=" + ca, "SEQKEEPER_ZK_TLS_CERT_FILE=" + cert, "SEQKEEPER_ZK_TLS_KEY_FILE=" + key}
	}
	return e, env["seqkeeper-replica"], env[testenv.TLSSuperUserCN], nil
}

// startMinIO starts MinIO with a bucket "ids" and returns the store URL.
func startMinIO(ctx context.Context, dir string) (string, func(), error) {
	mdir := filepath.Join(dir, "minio")
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return "", nil, err
	}
	m, err := testenv.NewMinIO(mdir)
	if err != nil {
		return "", nil, err
	}
	if err := m.Start(); err != nil {
		m.Stop()
		return "", nil, err
	}
	s := m.S3()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ids")}); err != nil {
		m.Stop()
		return "", nil, fmt.Errorf("create the bucket: %w", err)
	}
	return fmt.Sprintf("s3://ids/seqkeeper?endpoint=%s&region=%s", s.Endpoint, s.Region), m.Stop, nil
}

// serve builds seqkeeper into dir and runs `seqkeeper serve` with env until
// ctx is done, after writing DIR/env (operator's) for the operator commands.
func serve(ctx context.Context, o options, dir string, env, operator []string, out, log io.Writer) error {
	bin := filepath.Join(dir, "bin", "seqkeeper")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/seqkeeper/seqkeeper/cmd/seqkeeper")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build seqkeeper: %w", err)
	}
	if err := writeEnv(filepath.Join(dir, "env"), append(operator, "PATH="+filepath.Dir(bin)+":$PATH")); err != nil {
		return err
	}
	if o.tls {
		// The layout before the replica starts, as docs/security.md asks.
		apply := exec.CommandContext(ctx, bin, "acl", "apply", "--admin", "x509:CN="+testenv.TLSSuperUserCN,
			"--replica", "x509:CN=seqkeeper-replica", "--worker", "x509:CN=orders-service")
		apply.Env = append(os.Environ(), operator...)
		apply.Stdout, apply.Stderr = out, log
		if err := apply.Run(); err != nil {
			return fmt.Errorf("seqkeeper acl apply: %w", err)
		}
	}
	fmt.Fprintf(out, "localstack: seqkeeper serve on http://%s; in another terminal: source %s\n", o.http, filepath.Join(dir, "env"))
	cmd := exec.Command(bin, "serve", "--id", "local")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, log
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
		<-done
		return ctx.Err()
	}
}

// writeEnv writes vars as a file for the shell's source.
func writeEnv(path string, vars []string) error {
	var b strings.Builder
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		if k == "PATH" {
			fmt.Fprintf(&b, "export PATH=%q\n", val)
			continue
		}
		fmt.Fprintf(&b, "export %s='%s'\n", k, val)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
