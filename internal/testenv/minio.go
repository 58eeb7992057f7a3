package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 is an S3-compatible server and a bucket that belongs to one test.
type S3 struct {
	Endpoint  string // http://127.0.0.1:port
	Region    string
	AccessKey string
	SecretKey string
	Bucket    string
}

// Client returns an aws-sdk-go-v2 S3 client for the server, set up the way
// S3-compatible servers need (path-style addressing, checksums only when an
// operation requires them).
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:                     s.Region,
		BaseEndpoint:               aws.String(s.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// NewBucket creates another empty bucket on the same server for t.
func (s *S3) NewBucket(t testing.TB) *S3 {
	t.Helper()
	c := *s
	c.Bucket = uniqueName(t, 63)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(c.Bucket)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", c.Bucket, c.Endpoint, err)
	}
	return &c
}

var sharedS3 struct {
	once sync.Once
	srv  *MinIO
	ext  *S3
	err  error
}

// ObjectStore returns the shared S3 server (SEQKEEPER_TEST_S3, or a MinIO
// started for this test binary) with a new, empty bucket for t.
func ObjectStore(t testing.TB) *S3 {
	t.Helper()
	sharedS3.once.Do(func() {
		if ep := os.Getenv("SEQKEEPER_TEST_S3"); ep != "" {
			sharedS3.ext = &S3{
				Endpoint:  ep,
				Region:    "us-east-1",
				AccessKey: envOr("SEQKEEPER_TEST_S3_ACCESS_KEY", "minioadmin"),
				SecretKey: envOr("SEQKEEPER_TEST_S3_SECRET_KEY", "minioadmin"),
			}
			return
		}
		dir, err := os.MkdirTemp("", "seqkeeper-minio-")
		if err != nil {
			sharedS3.err = err
			return
		}
		sharedS3.srv, sharedS3.err = NewMinIO(dir)
		if sharedS3.err == nil {
			sharedS3.err = sharedS3.srv.Start()
		}
	})
	if sharedS3.err != nil {
		t.Fatalf("shared S3 server: %v", sharedS3.err)
	}
	if sharedS3.ext != nil {
		return sharedS3.ext.NewBucket(t)
	}
	return sharedS3.srv.S3().NewBucket(t)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// MinIO is a MinIO server process on a loopback port, which a test may stop
// and start again (the store-outage case). Its data survives a restart.
type MinIO struct {
	dir  string
	port int
	proc *process
}

// StartMinIO starts a MinIO for this test alone and stops it when the test
// ends. Tests that do not stop the server use ObjectStore.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	m, err := NewMinIO(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return m
}

// NewMinIO prepares a MinIO server with its data under dir.
func NewMinIO(dir string) (*MinIO, error) {
	bin, err := minioBinary()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	console, err := FreePort()
	if err != nil {
		return nil, err
	}
	m := &MinIO{dir: dir, port: port}
	m.proc = &process{
		name: fmt.Sprintf("minio (127.0.0.1:%d)", port),
		argv: []string{bin, "server", "--quiet", "--address", "127.0.0.1:" + strconv.Itoa(port),
			"--console-address", "127.0.0.1:" + strconv.Itoa(console), filepath.Join(dir, "data")},
		env:     []string{"MINIO_ROOT_USER=minioadmin", "MINIO_ROOT_PASSWORD=minioadmin", "MINIO_BROWSER=off", "MINIO_UPDATE=off"},
		dir:     dir,
		logPath: filepath.Join(dir, "minio.log"),
	}
	register(m.proc)
	return m, nil
}

func minioBinary() (string, error) {
	if b := os.Getenv("SEQKEEPER_MINIO_BIN"); b != "" {
		return b, nil
	}
	cached := filepath.Join(cacheDir(), "bin", "minio")
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if b, err := exec.LookPath("minio"); err == nil {
		return b, nil
	}
	return "", fmt.Errorf("MinIO binary not found (looked at %s and $PATH): %s", cached, setupHint)
}

// Start starts the server and waits until it is ready.
func (m *MinIO) Start() error {
	if err := m.proc.start(); err != nil {
		return err
	}
	url := m.S3().Endpoint + "/minio/health/ready"
	return m.proc.waitFor(60*time.Second, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// Stop stops the server gracefully.
func (m *MinIO) Stop() { _ = m.proc.stop(syscall.SIGTERM) }

// S3 describes the server, without a bucket.
func (m *MinIO) S3() *S3 {
	return &S3{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(m.port),
		Region:    "us-east-1",
		AccessKey: "minioadmin",
		SecretKey: "minioadmin",
	}
}
