package persist

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is one kind of real storage. fresh gives a test its own empty
// storage location and a function that opens another client on it, so a
// test can have two writers (two processes, in production) on one store.
type fixture struct {
	name  string
	fresh func(t testing.TB) (open func() Backend)
	// variant marks a kind of S3 bucket whose differences the backend
	// conformance suite checks (TestS3VersionedBackend,
	// TestS3SSEKMSBackend): with -short, forEachBackend leaves it out.
	variant bool
}

var fixtures = []fixture{
	{"s3", s3Fixture(testenv.ObjectStore, false), false},
	// The same with versioning on the bucket: a delete leaves a delete
	// marker and an overwrite an older version, which the store's
	// conditional writes, listings and reads must not see.
	{"s3-versioned", s3Fixture(testenv.ObjectStore, true), true},
	// Every PUT asks for SSE-KMS with the server's key.
	{"s3-sse-kms", s3Fixture(testenv.KMSObjectStore, false), true},
	{"file", func(t testing.TB) func() Backend {
		dir := t.TempDir()
		return func() Backend {
			b, err := NewFile(dir)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}, false},
}

// s3Fixture is a fixture on a bucket of server (ObjectStore or
// KMSObjectStore, whose key every PUT then names), versioned or not.
func s3Fixture(server func(testing.TB) *testenv.S3, versioned bool) func(t testing.TB) func() Backend {
	return func(t testing.TB) func() Backend {
		env := server(t)
		if versioned {
			env.EnableVersioning(t)
		}
		return func() Backend { return newS3(t, env, "seqkeeper/test") }
	}
}

// fixtureNamed returns the fixture called name.
func fixtureNamed(t testing.TB, name string) fixture {
	t.Helper()
	for _, fx := range fixtures {
		if fx.name == name {
			return fx
		}
	}
	t.Fatalf("no fixture %q", name)
	return fixture{}
}

// forEachBackend runs fn once per fixture, in parallel subtests (with
// -short, on the file and the plain S3 fixture only).
func forEachBackend(t *testing.T, fn func(t *testing.T, open func() Backend)) {
	t.Helper()
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			if fx.variant && testing.Short() {
				t.Skip("-short: the store's tests run on a file and a plain S3 bucket; the backend conformance suite (TestS3VersionedBackend, TestS3SSEKMSBackend) covers this bucket, the full run every store test on it")
			}
			t.Parallel()
			fn(t, fx.fresh(t))
		})
	}
}

func newS3(t testing.TB, env *testenv.S3, prefix string) *S3Backend {
	t.Helper()
	b, err := NewS3(testCtx(t), S3Config{
		Bucket: env.Bucket, Prefix: prefix, Endpoint: env.Endpoint, Region: env.Region,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey, SSEKMSKeyID: env.KMSKeyID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testCtx bounds a test's store calls, so a hang fails instead of stalling
// the suite.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newStore(t testing.TB, b Backend, opts StoreOptions) *Store {
	t.Helper()
	s, err := NewStore(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counting is a Backend that counts the requests reaching the real one.
type counting struct {
	Backend
	gets, puts atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, key)
}

func (c *counting) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	c.puts.Add(1)
	return c.Backend.Put(ctx, key, data, ifMatch)
}

// isolated returns a client like b on its own empty part of the same
// storage (a new prefix in the bucket, a new directory).
func isolated(t testing.TB, b Backend) Backend {
	t.Helper()
	switch b := b.(type) {
	case *S3Backend:
		c := *b
		c.prefix += fmt.Sprintf("isolated-%d/", isolatedSeq.Add(1))
		return &c
	case *FileBackend:
		f, err := NewFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("isolated: unknown backend %T", b)
	return nil
}

var isolatedSeq atomic.Int64
