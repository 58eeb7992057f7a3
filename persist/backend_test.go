package persist

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func TestS3Backend(t *testing.T) {
	t.Parallel()
	testBackend(t, fixtureNamed(t, "s3").fresh)
}

// The conformance suite on a versioned bucket: a delete leaves a delete
// marker, an overwrite keeps the older version, and neither may show.
func TestS3VersionedBackend(t *testing.T) {
	t.Parallel()
	testBackend(t, fixtureNamed(t, "s3-versioned").fresh)
}

// The conformance suite with SSE-KMS on every PUT: the conditional writes
// hold with encrypted objects (whose ETags are not their MD5s).
func TestS3SSEKMSBackend(t *testing.T) {
	t.Parallel()
	testBackend(t, fixtureNamed(t, "s3-sse-kms").fresh)
}

func TestFileBackend(t *testing.T) {
	t.Parallel()
	testBackend(t, fixtureNamed(t, "file").fresh)
}

// testBackend is the conformance suite every Backend must pass: the
// conditional-write semantics the Store's monotonicity rests on. newStorage
// returns a fresh, empty storage location and opens clients on it (more
// than one client, so concurrent writers are separate clients, as separate
// processes would be).
func testBackend(t *testing.T, newStorage func(t testing.TB) func() Backend) {
	t.Run("CreateOnly", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		etag, err := b.Put(ctx, "obj", []byte("first"), "")
		if err != nil || etag == "" {
			t.Fatalf("create: etag %q, %v", etag, err)
		}
		if _, err := b.Put(ctx, "obj", []byte("second"), ""); !errors.Is(err, ErrConflict) {
			t.Fatalf("second create: %v, want ErrConflict", err)
		}
		expectObject(t, b, "obj", "first", etag)
	})
	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		if _, err := b.Put(ctx, "log/obj", []byte("first"), ""); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, "log/obj"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, _, err := b.Get(ctx, "log/obj"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get after delete: %v, want ErrNotFound", err)
		}
		if err := b.Delete(ctx, "log/obj"); err != nil {
			t.Fatalf("deleting a missing object: %v, want nil", err)
		}
		// The key can be created again, create-only.
		etag, err := b.Put(ctx, "log/obj", []byte("again"), "")
		if err != nil {
			t.Fatalf("create after delete: %v", err)
		}
		expectObject(t, b, "log/obj", "again", etag)
		if err := b.Delete(ctx, "../escape"); err == nil {
			t.Fatal("delete of an invalid key: no error")
		}
	})
	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		if keys, err := b.List(ctx, "log/"); err != nil || len(keys) != 0 {
			t.Fatalf("list of an empty prefix: %q, %v", keys, err)
		}
		for _, k := range []string{"log/0000000000000002", "log/0000000000000001", "logs/other", "buckets/0001", "log/deep/er", "meta"} {
			if _, err := b.Put(ctx, k, []byte(k), ""); err != nil {
				t.Fatal(err)
			}
		}
		keys, err := b.List(ctx, "log/")
		if want := []string{"log/0000000000000001", "log/0000000000000002", "log/deep/er"}; err != nil || !slices.Equal(keys, want) {
			t.Fatalf("list log/: %q, %v; want %q", keys, err, want)
		}
		if err := b.Delete(ctx, "log/0000000000000001"); err != nil {
			t.Fatal(err)
		}
		// Consistent: a deletion that returned is not listed.
		keys, err = b.List(ctx, "log/")
		if want := []string{"log/0000000000000002", "log/deep/er"}; err != nil || !slices.Equal(keys, want) {
			t.Fatalf("list after a delete: %q, %v; want %q", keys, err, want)
		}
		for _, bad := range []string{"log", "", "../x/", "/log/"} {
			if _, err := b.List(ctx, bad); err == nil {
				t.Errorf("list %q: no error", bad)
			}
		}
	})
	t.Run("IfMatch", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		e1, err := b.Put(ctx, "obj", []byte("v1"), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, "obj", []byte("v2"), `"not-the-etag"`); !errors.Is(err, ErrConflict) {
			t.Fatalf("wrong If-Match: %v, want ErrConflict", err)
		}
		expectObject(t, b, "obj", "v1", e1)
		e2, err := b.Put(ctx, "obj", []byte("v2"), e1)
		if err != nil {
			t.Fatalf("right If-Match: %v", err)
		}
		if e2 == e1 {
			t.Fatalf("new content, same ETag %q", e2)
		}
		expectObject(t, b, "obj", "v2", e2)
		if _, err := b.Put(ctx, "obj", []byte("v3"), e1); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale If-Match: %v, want ErrConflict", err)
		}
		expectObject(t, b, "obj", "v2", e2)
	})
	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		if _, _, err := b.Get(ctx, "nothing/here"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get missing: %v, want ErrNotFound", err)
		}
		// If-Match on a missing object is a failed precondition, not a
		// create.
		if _, err := b.Put(ctx, "nothing/here", []byte("x"), `"0123"`); !errors.Is(err, ErrConflict) {
			t.Fatalf("If-Match on a missing object: %v, want ErrConflict", err)
		}
		if _, _, err := b.Get(ctx, "nothing/here"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after refused put: %v, want ErrNotFound", err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		etag, err := b.Put(ctx, "empty", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		expectObject(t, b, "empty", "", etag)
	})
	t.Run("Slashes", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		keys := []string{"a/b/c", "a/b/d", "a/e", "f", "buckets/00ff"}
		etags := map[string]string{}
		for _, k := range keys {
			e, err := b.Put(ctx, k, []byte("content of "+k), "")
			if err != nil {
				t.Fatalf("put %s: %v", k, err)
			}
			etags[k] = e
		}
		for _, k := range keys {
			expectObject(t, b, k, "content of "+k, etags[k])
		}
		if _, _, err := b.Get(ctx, "a/b"); err == nil {
			t.Fatal("get a/b (a prefix, not an object) succeeded")
		}
	})
	t.Run("BadKeys", func(t *testing.T) {
		t.Parallel()
		b, ctx := newStorage(t)(), testCtx(t)
		for _, k := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", ".lock", "a/.tmp-1", "a\x00b"} {
			if _, err := b.Put(ctx, k, []byte("x"), ""); err == nil || errors.Is(err, ErrConflict) {
				t.Errorf("put %q: %v, want a key error", k, err)
			}
			if _, _, err := b.Get(ctx, k); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("get %q: %v, want a key error", k, err)
			}
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		b := newStorage(t)()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.Put(ctx, "obj", []byte("x"), ""); !errors.Is(err, context.Canceled) {
			t.Fatalf("put with a cancelled context: %v", err)
		}
		if _, _, err := b.Get(ctx, "obj"); !errors.Is(err, context.Canceled) {
			t.Fatalf("get with a cancelled context: %v", err)
		}
	})
	t.Run("ConcurrentWriters", func(t *testing.T) {
		t.Parallel()
		open, ctx := newStorage(t), testCtx(t)
		const writers, increments = 10, 10
		var wg sync.WaitGroup
		var conflicts sync.Map
		for w := range writers {
			b := open() // each writer its own client
			wg.Go(func() {
				for range increments {
					n, err := increment(ctx, b, "counter")
					if err != nil {
						t.Error(err)
						return
					}
					if n > 0 {
						conflicts.Store(w, true)
					}
				}
			})
		}
		wg.Wait()
		data, _, err := open().Get(ctx, "counter")
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != strconv.Itoa(writers*increments) {
			t.Fatalf("counter = %s after %d increments: updates lost", data, writers*increments)
		}
		n := 0
		conflicts.Range(func(_, _ any) bool { n++; return true })
		t.Logf("%d of %d writers saw conflicts", n, writers)
	})
	t.Run("String", func(t *testing.T) {
		t.Parallel()
		b := newStorage(t)()
		if s := b.String(); s == "" || strings.Contains(s, "minioadmin") {
			t.Fatalf("String() = %q", s)
		}
	})
}

// increment adds one to the decimal counter in key by read-modify-write,
// retrying conflicts, and returns how many conflicts it met.
func increment(ctx context.Context, b Backend, key string) (conflicts int, err error) {
	for ; ; conflicts++ {
		data, etag, err := b.Get(ctx, key)
		v := 0
		switch {
		case errors.Is(err, ErrNotFound):
			etag = ""
		case err != nil:
			return conflicts, err
		default:
			if v, err = strconv.Atoi(string(data)); err != nil {
				return conflicts, err
			}
		}
		_, err = b.Put(ctx, key, []byte(strconv.Itoa(v+1)), etag)
		if !errors.Is(err, ErrConflict) {
			return conflicts, err
		}
	}
}

// TestFileBackendProcesses: the file backend's lock excludes writers in
// separate processes, not only goroutines: copies of this test binary
// increment one counter and none of their updates is lost.
func TestFileBackendProcesses(t *testing.T) {
	const procs, increments = 4, 25
	if dir := os.Getenv("PERSIST_TEST_COUNTER_DIR"); dir != "" {
		b, err := NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		for range increments {
			if _, err := increment(testCtx(t), b, "shared/counter"); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileBackendProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PERSIST_TEST_COUNTER_DIR="+dir)
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("writer process: %v\n%s", err, out)
			}
		})
	}
	wg.Wait()
	b, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.Get(testCtx(t), "shared/counter")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != strconv.Itoa(procs*increments) {
		t.Fatalf("counter = %s after %d increments in %d processes: updates lost", data, procs*increments, procs)
	}
}

func expectObject(t *testing.T, b Backend, key, want, wantETag string) {
	t.Helper()
	data, etag, err := b.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if string(data) != want || etag != wantETag {
		t.Fatalf("get %s = %q (ETag %s), want %q (ETag %s)", key, data, etag, want, wantETag)
	}
}

// With CreateBucket, an existing bucket is found by HeadBucket and kept as
// it is; without it, nothing is created and a missing bucket fails the
// first read with an error naming it, never reading as an empty store.
func TestS3CreateBucketOrNot(t *testing.T) {
	t.Parallel()
	env := testenv.ObjectStore(t)
	ctx := testCtx(t)
	open := func(bucket string, create bool) (*S3Backend, error) {
		return NewS3(ctx, S3Config{Bucket: bucket, Endpoint: env.Endpoint, Region: env.Region,
			AccessKey: env.AccessKey, SecretKey: env.SecretKey, CreateBucket: create})
	}
	b, err := open(env.Bucket, true) // exists already
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "kept", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if b, err = open(env.Bucket, true); err != nil {
		t.Fatalf("create on an existing bucket: %v", err)
	}
	expectObjectExists(t, b, "kept")

	missing := env.Bucket + "-missing"
	b, err = open(missing, false)
	if err != nil {
		t.Fatalf("open without create: %v (it does no I/O)", err)
	}
	if _, _, err := b.Get(ctx, "epoch"); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("get from a missing bucket without create: %v; want an error naming %s", err, missing)
	}
	if b, err = open(missing, true); err != nil {
		t.Fatalf("create a missing bucket: %v", err)
	}
	if _, _, err := b.Get(ctx, "epoch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get from the created bucket: %v; want ErrNotFound", err)
	}
}

// Errors that name the fix: no credentials anywhere in the AWS chain, and a
// store whose TLS certificate is not trusted.
func TestS3ErrorsNameTheFix(t *testing.T) {
	env := testenv.ObjectStore(t)
	ctx := testCtx(t)
	empty := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_CONFIG_FILE": empty, "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_EC2_METADATA_DISABLED": "true", // no instance metadata service to wait for
	} {
		t.Setenv(k, v)
	}
	_, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Endpoint: env.Endpoint, Region: env.Region, CreateBucket: true})
	if err == nil || !strings.Contains(err.Error(), "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("no credentials: %v", err)
	}

	// Credentials the server does not take: the message names the
	// variable to check, not the SDK's bare SignatureDoesNotMatch.
	for _, c := range []struct{ access, secret, want string }{
		{env.AccessKey, env.SecretKey + "x", "refused the request's signature: the secret key does not match the access key; check AWS_SECRET_ACCESS_KEY"},
		{"nobody-" + env.AccessKey, env.SecretKey, "does not know the access key: check AWS_ACCESS_KEY_ID"},
	} {
		b, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Endpoint: env.Endpoint, Region: env.Region, AccessKey: c.access, SecretKey: c.secret})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Get(ctx, "epoch"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), env.Endpoint) || strings.Contains(err.Error(), c.secret) {
			t.Errorf("wrong credentials: %v\nwant it to say %q and name %s, and not show the secret", err, c.want, env.Endpoint)
		}
	}

	// No endpoint: the store is AWS itself, which this machine cannot
	// reach (nothing outside is). The message says how to name MinIO.
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	aws, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Region: "us-east-1", AccessKey: env.AccessKey, SecretKey: env.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, _, err := aws.Get(short, "epoch"); err == nil || !strings.Contains(err.Error(), "add ?endpoint=http://HOST:9000 to the store URL") {
		t.Errorf("no endpoint, AWS unreachable: %v; want advice to add ?endpoint=", err)
	}

	// A TLS server whose certificate no system CA signed.
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	_, err = NewS3(ctx, S3Config{Bucket: env.Bucket, Endpoint: srv.URL, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, CreateBucket: true})
	if err == nil || !strings.Contains(err.Error(), "the store's TLS certificate is not trusted") {
		t.Fatalf("untrusted certificate: %v", err)
	}
}

func expectObjectExists(t *testing.T, b Backend, key string) {
	t.Helper()
	if _, _, err := b.Get(testCtx(t), key); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// Health reports what the store's own requests said, without a request of
// its own: unknown before any, healthy after an answer (a missing key is
// one), unhealthy after a failure until the next answer.
func TestStoreHealthFromItsRequests(t *testing.T) {
	t.Parallel()
	env := testenv.ObjectStore(t)
	ctx := testCtx(t)
	b, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Prefix: "health", Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(b, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Healthy() || !h.LastOK.IsZero() || h.LastError != nil {
		t.Fatalf("before any request: %+v", h)
	}
	before := s.Requests()
	if h := s.Health(); h.Healthy() || s.Requests() != before {
		t.Fatal("Health made a request")
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); !h.Healthy() {
		t.Fatalf("after a check: %+v", h)
	}

	// The same store's requests fail once the backend is unreachable.
	dead, err := NewS3(ctx, S3Config{Bucket: env.Bucket, Endpoint: "http://127.0.0.1:1", Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewStore(dead, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Check(ctx); err == nil {
		t.Fatal("check of an unreachable store passed")
	}
	if h := ds.Health(); h.Healthy() || h.LastError == nil || h.LastErrorAt.IsZero() {
		t.Fatalf("after a failed check: %+v", h)
	}
}
