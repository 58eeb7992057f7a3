package testenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 is an S3-compatible server and a bucket that belongs to one test.
type S3 struct {
	Endpoint  string // http://127.0.0.1:port
	Region    string
	AccessKey string
	SecretKey string
	Bucket    string
	// KMSKeyID names a KMS key the server holds, with which SSE-KMS
	// requests succeed; "" when the server has none (see KMSObjectStore).
	KMSKeyID string
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

// EnableVersioning turns on versioning on the bucket (PutBucketVersioning):
// from then on an overwrite or a delete keeps the object's older versions.
func (s *S3) EnableVersioning(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(s.Bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		t.Fatalf("enable versioning on bucket %s at %s: %v", s.Bucket, s.Endpoint, err)
	}
}

// Keys lists the current objects under prefix in the bucket, sorted, as
// the server's own client sees them.
func (s *S3) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s in %s: %v", prefix, s.Bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	slices.Sort(keys)
	return keys
}

// Undelete undoes deletes under prefix in a versioned bucket as an
// operator would: it deletes every delete marker that is the current
// version of its key, so the version before it is current again. It
// returns the keys brought back.
func (s *S3) Undelete(t testing.TB, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	p := s3.NewListObjectVersionsPaginator(s.Client(), &s3.ListObjectVersionsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list the versions under %s in %s: %v", prefix, s.Bucket, err)
		}
		for _, m := range page.DeleteMarkers {
			if !aws.ToBool(m.IsLatest) {
				continue
			}
			if _, err := s.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: m.Key, VersionId: m.VersionId}); err != nil {
				t.Fatalf("delete the delete marker of %s: %v", aws.ToString(m.Key), err)
			}
			keys = append(keys, aws.ToString(m.Key))
		}
	}
	return keys
}

// RestorePrevious undoes the last write of key in a versioned bucket as
// an operator would: it copies the version before the current one over
// it (CopyObject from that versionId, with the server's KMS key when it
// has one), which makes a new current version with the older content.
func (s *S3) RestorePrevious(t testing.TB, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.Client().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(10)})
	if err != nil {
		t.Fatalf("list the versions of %s in %s: %v", key, s.Bucket, err)
	}
	// Versions come newest first.
	var versions []types.ObjectVersion
	for _, v := range out.Versions {
		if aws.ToString(v.Key) == key {
			versions = append(versions, v)
		}
	}
	if len(versions) < 2 || !aws.ToBool(versions[0].IsLatest) {
		t.Fatalf("%s in %s: %d versions, want a current one and an older one", key, s.Bucket, len(versions))
	}
	src := s.Bucket + "/" + key + "?versionId=" + aws.ToString(versions[1].VersionId)
	in := &s3.CopyObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), CopySource: aws.String(src)}
	if s.KMSKeyID != "" {
		// A copy is encrypted as its request says, not as its source was.
		in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAwsKms, aws.String(s.KMSKeyID)
	}
	if _, err := s.Client().CopyObject(ctx, in); err != nil {
		t.Fatalf("copy %s over %s: %v", src, key, err)
	}
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

// sharedServer is an S3 server shared by the tests of one binary, found
// or started on first use.
type sharedServer struct {
	once sync.Once
	srv  *MinIO
	ext  *S3
	err  error
}

var sharedS3, sharedKMS sharedServer

// ObjectStore returns the shared S3 server (SEQKEEPER_TEST_S3, or a MinIO
// started for this test binary) with a new, empty bucket for t.
func ObjectStore(t testing.TB) *S3 {
	t.Helper()
	return sharedS3.bucket(t, "", MinIOOptions{})
}

// TestKMSKeyID is the name of the KMS key of the MinIO KMSObjectStore
// starts.
const TestKMSKeyID = "seqkeeper-test-key"

// KMSObjectStore returns a shared S3 server that holds a KMS key (S3.KMSKeyID)
// with a new, empty bucket for t: SEQKEEPER_TEST_S3 when
// SEQKEEPER_TEST_S3_KMS_KEY names a key it holds, otherwise a MinIO
// started for this test binary with the static key TestKMSKeyID.
func KMSObjectStore(t testing.TB) *S3 {
	t.Helper()
	return sharedKMS.bucket(t, "SEQKEEPER_TEST_S3_KMS_KEY", MinIOOptions{KMSKeyID: TestKMSKeyID})
}

// bucket starts the server on first use (or takes the external one, when
// SEQKEEPER_TEST_S3 is set and so is keyEnv unless it is "") and creates
// a bucket on it for t.
func (sh *sharedServer) bucket(t testing.TB, keyEnv string, opts MinIOOptions) *S3 {
	t.Helper()
	sh.once.Do(func() {
		ep := os.Getenv("SEQKEEPER_TEST_S3")
		if ep != "" && (keyEnv == "" || os.Getenv(keyEnv) != "") {
			sh.ext = &S3{
				Endpoint:  ep,
				Region:    "us-east-1",
				AccessKey: envOr("SEQKEEPER_TEST_S3_ACCESS_KEY", "minioadmin"),
				SecretKey: envOr("SEQKEEPER_TEST_S3_SECRET_KEY", "minioadmin"),
			}
			if keyEnv != "" {
				sh.ext.KMSKeyID = os.Getenv(keyEnv)
			}
			return
		}
		dir, err := os.MkdirTemp("", "seqkeeper-minio-")
		if err != nil {
			sh.err = err
			return
		}
		sh.srv, sh.err = NewMinIOWith(dir, opts)
		if sh.err == nil {
			sh.err = sh.srv.Start()
		}
	})
	if sh.err != nil {
		t.Fatalf("shared S3 server: %v", sh.err)
	}
	if sh.ext != nil {
		return sh.ext.NewBucket(t)
	}
	return sh.srv.S3().NewBucket(t)
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
	dir    string
	port   int
	kmsKey string
	proc   *process
}

// MinIOOptions are a MinIO server's settings beyond the defaults. The zero
// value is a plain server.
type MinIOOptions struct {
	// KMSKeyID, when set, gives the server a static KMS key of that name
	// (MINIO_KMS_SECRET_KEY, 32 random bytes), so that SSE-KMS requests
	// naming it succeed and those naming another key fail.
	KMSKeyID string
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
func NewMinIO(dir string) (*MinIO, error) { return NewMinIOWith(dir, MinIOOptions{}) }

// NewMinIOWith prepares a MinIO server with its data under dir and the
// settings of opts.
func NewMinIOWith(dir string, opts MinIOOptions) (*MinIO, error) {
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
	m := &MinIO{dir: dir, port: port, kmsKey: opts.KMSKeyID}
	env := []string{"MINIO_ROOT_USER=minioadmin", "MINIO_ROOT_PASSWORD=minioadmin", "MINIO_BROWSER=off", "MINIO_UPDATE=off"}
	if opts.KMSKeyID != "" {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		env = append(env, "MINIO_KMS_SECRET_KEY="+opts.KMSKeyID+":"+base64.StdEncoding.EncodeToString(key))
	}
	m.proc = &process{
		name: fmt.Sprintf("minio (127.0.0.1:%d)", port),
		argv: []string{bin, "server", "--quiet", "--address", "127.0.0.1:" + strconv.Itoa(port),
			"--console-address", "127.0.0.1:" + strconv.Itoa(console), filepath.Join(dir, "data")},
		env:     env,
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
		KMSKeyID:  m.kmsKey,
	}
}
