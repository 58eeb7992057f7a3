package persist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Backend is the persistence seam: a conditional object store with a
// consistent listing. The Store needs nothing else, so any object store
// that can refuse a write whose precondition no longer holds, and list
// what it holds, can carry seqkeeper's state.
//
// Implementations are safe for concurrent use by several goroutines and by
// several processes (or hosts) sharing the same storage. Their errors name
// the operation and the key; the caller names the backend (with String).
type Backend interface {
	// Get returns the object and its ETag. It returns an error wrapping
	// ErrNotFound if the object does not exist.
	Get(ctx context.Context, key string) (data []byte, etag string, err error)
	// Put writes the object only if the precondition holds: ifMatch == ""
	// means create-only (the object must not exist), otherwise the object's
	// current ETag must equal ifMatch. A failed precondition returns an
	// error wrapping ErrConflict and changes nothing. Put returns the new
	// ETag.
	//
	// An error other than ErrConflict leaves the outcome unknown: the write
	// may have landed. Callers re-read before trusting anything cached.
	Put(ctx context.Context, key string, data []byte, ifMatch string) (etag string, err error)
	// Delete removes the object; a missing object is not an error. It is
	// unconditional: the store deletes only log segments whose records the
	// buckets already hold (see Store.Compact).
	Delete(ctx context.Context, key string) error
	// List returns the key of every object under prefix (which ends with
	// '/'), sorted, without the backend's own prefix. It is consistent: an
	// object whose Put returned before List began is listed, one whose
	// Delete returned before is not (S3 has listed strongly consistently
	// since 2020). The store finds its log with it, so that no single
	// object has to say where the log ends.
	List(ctx context.Context, prefix string) ([]string, error)
	// String names the storage for logs and status pages, without secrets,
	// for example "s3://bucket/prefix (http://minio:9000)".
	String() string
}

// Sentinel errors. Errors returned by this package wrap them with context;
// test with errors.Is.
var (
	// ErrNotFound: the object or the sequence does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a conditional write lost a race (the object changed, or
	// appeared, since it was read). Re-read and try again.
	ErrConflict = errors.New("conditional write conflict")
	// ErrCorrupt: an object exists but cannot be read as what it should be.
	// It is never treated as empty and never overwritten; an operator must
	// look at it (the error names the key).
	ErrCorrupt = errors.New("corrupt object")
	// ErrNewerFormat: an object was written by a newer seqkeeper in a
	// format this build cannot read. Upgrade before going on; writing over
	// it would lose what the newer version recorded.
	ErrNewerFormat = errors.New("written by a newer seqkeeper format: upgrade this seqkeeper")
	// ErrFenced: a newer leader epoch has written to the store, so this
	// writer is no longer the primary and must stop.
	ErrFenced = errors.New("fenced by a newer leader epoch")
	// ErrBucketMismatch: StoreOptions.Buckets differs from the bucket count
	// the store was created with. The count cannot change without
	// rewriting the store.
	ErrBucketMismatch = errors.New("bucket count differs from the store's")
	// ErrBadURL: a store URL (or S3 configuration) is malformed or names
	// an unsupported scheme; a usage error (exit code 2), not a runtime
	// failure.
	ErrBadURL = errors.New("bad store URL")
	// ErrOtherRoot: an object of the store was written for another
	// sequences root than the one this Store serves (StoreOptions.Root):
	// two roots share one store, which would mix their records. A
	// configuration error; the message names both roots.
	ErrOtherRoot = errors.New("the store belongs to another sequences root")
)

// storeURLForms is shown in every URL error, so the fix is in the message.
const storeURLForms = "want s3://bucket/prefix?endpoint=http://minio:9000&region=us-east-1 or file:///var/lib/seqkeeper"

// OpenOptions are the settings of Open that do not belong in a URL. The zero
// value is usable.
type OpenOptions struct {
	// Create creates the S3 bucket or the directory if it does not exist.
	// Off by default: a mistyped URL should fail, not start an empty store.
	Create bool
	// AccessKey and SecretKey are static S3 credentials. Empty means the
	// standard AWS chain (environment, shared config, instance role). They
	// are not accepted in the URL, which ends up in process lists and logs.
	AccessKey string
	SecretKey string
	// CreateWait and Logger: see S3Config. With Create, a store endpoint
	// that does not answer yet is waited for up to CreateWait.
	CreateWait time.Duration
	Logger     *zerolog.Logger
}

// Open returns the backend a store URL names: s3://bucket/prefix?endpoint=
// URL&region=R (see ParseS3URL) or file:///path (see ParseFileURL). Any other
// form is an error wrapping ErrBadURL.
func Open(ctx context.Context, rawURL string, opts OpenOptions) (Backend, error) {
	s3, dir, err := parseURL(rawURL)
	switch {
	case err != nil:
		return nil, err
	case s3 != nil:
		s3.AccessKey, s3.SecretKey, s3.CreateBucket = opts.AccessKey, opts.SecretKey, opts.Create
		s3.CreateWait, s3.Logger = opts.CreateWait, opts.Logger
		return NewS3(ctx, *s3)
	case opts.Create:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("file store %s: create directory: %w", dir, err)
		}
	}
	return NewFile(dir)
}

// CheckURL reports what is wrong with a store URL, as Open would, without
// opening it: an error wrapping ErrBadURL, or nil.
func CheckURL(rawURL string) error {
	_, _, err := parseURL(rawURL)
	return err
}

// parseURL parses a store URL: an S3 store's configuration, or a file
// store's directory.
func parseURL(rawURL string) (*S3Config, string, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, "", fmt.Errorf("%w: no scheme (%s)", ErrBadURL, storeURLForms)
	}
	switch strings.ToLower(scheme) {
	case "s3":
		cfg, err := ParseS3URL(rawURL)
		if err != nil {
			return nil, "", err
		}
		return &cfg, "", nil
	case "file":
		dir, err := ParseFileURL(rawURL)
		return nil, dir, err
	}
	return nil, "", fmt.Errorf("%w: unsupported scheme %q (%s)", ErrBadURL, scheme, storeURLForms)
}

// validatePrefix holds List's prefix to the form the store uses: a key
// followed by '/'.
func validatePrefix(prefix string) error {
	key, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return fmt.Errorf("list prefix %q must end with '/'", prefix)
	}
	return validateKey(key)
}

// validateKey holds both backends to the same key rules, so a key that works
// on one works on the other: slash-separated segments, none empty, "." or
// "..", none starting with '.' (the file backend's lock and temporary files
// start with '.'), no NUL.
func validateKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("key %q contains NUL", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("key %q: every '/'-separated segment must be non-empty and not start with '.'", key)
		}
	}
	return nil
}
