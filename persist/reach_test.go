package persist

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// With CreateBucket, NewS3 waits up to CreateWait for an endpoint that does
// not answer yet (serve beside a MinIO that is starting), and only for
// one: an endpoint that answers, even with an error, fails at once.
func TestCreateBucketWaitsForAnEndpointThatDoesNotAnswerYet(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ctx := testCtx(t)
	m, err := testenv.NewMinIO(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	env := m.S3()
	cfg := S3Config{Bucket: "waited", Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, CreateBucket: true}

	// Nothing listens yet, and no wait: the first failure is the answer.
	if _, err := NewS3(ctx, cfg); err == nil || !unreachable(err) || strings.Contains(err.Error(), "did not answer for") {
		t.Fatalf("no server, no wait: %v; want the connection's error at once", err)
	}

	// The server starts once NewS3 says it waits (the SDK's own retries
	// cover a second or two before that).
	logged := &waitLog{said: make(chan struct{})}
	log := zerolog.New(logged)
	cfg.CreateWait, cfg.Logger = 40*time.Second, &log
	started := make(chan error, 1)
	go func() {
		select {
		case <-logged.said:
			started <- m.Start()
		case <-ctx.Done():
			started <- ctx.Err()
		}
	}()
	b, err := NewS3(ctx, cfg)
	if err != nil {
		t.Fatalf("NewS3 while the server starts: %v (it logged %q)", err, logged.String())
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	// The bucket was made: a missing key, not a missing bucket.
	if _, _, err := b.Get(ctx, "epoch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get from the created bucket: %v; want ErrNotFound", err)
	}

	// A server that answers with an error is not waited for.
	logged = &waitLog{said: make(chan struct{})}
	log = zerolog.New(logged)
	wrong := cfg
	wrong.Bucket, wrong.SecretKey, wrong.Logger = "refused", env.SecretKey+"x", &log
	if _, err := NewS3(ctx, wrong); err == nil || unreachable(err) || !strings.Contains(err.Error(), "secret key does not match") {
		t.Fatalf("wrong secret key: %v; want the server's refusal", err)
	}
	// Nor is one whose TLS certificate is not trusted.
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	untrusted := wrong
	untrusted.Endpoint = srv.URL
	if _, err := NewS3(ctx, untrusted); err == nil || unreachable(err) || !strings.Contains(err.Error(), "TLS certificate is not trusted") {
		t.Fatalf("untrusted certificate: %v; want the TLS error", err)
	}
	if logged.String() != "" {
		t.Fatalf("NewS3 waited for a server that answered: %s", logged.String())
	}

	// A name that never resolves: the wait ends, and the error says so.
	gone := cfg
	gone.Endpoint, gone.CreateWait = "http://seqkeeper-test.invalid:9000", time.Second
	if _, err := NewS3(ctx, gone); err == nil || !strings.Contains(err.Error(), "the endpoint did not answer for 1s") || !strings.Contains(err.Error(), "seqkeeper-test.invalid") {
		t.Fatalf("a name that does not resolve: %v; want the lookup's error after the wait", err)
	}
}

// waitLog is a log that closes said when NewS3 says it waits.
type waitLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	said chan struct{}
}

func (w *waitLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("the S3 endpoint does not answer yet; waiting for it")) && w.buf.Len() == 0 {
		close(w.said)
	}
	return w.buf.Write(p)
}

func (w *waitLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
