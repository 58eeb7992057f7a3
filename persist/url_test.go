package persist

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want S3Config
	}{
		{"s3://bucket", S3Config{Bucket: "bucket"}},
		{"s3://bucket/", S3Config{Bucket: "bucket"}},
		{"s3://bucket/a/b/?endpoint=http://minio:9000&region=eu-west-1",
			S3Config{Bucket: "bucket", Prefix: "a/b", Endpoint: "http://minio:9000", Region: "eu-west-1"}},
		{"s3://bucket/p?endpoint=https%3A%2F%2Fs3.example.com%3A9000%2Fbase",
			S3Config{Bucket: "bucket", Prefix: "p", Endpoint: "https://s3.example.com:9000/base"}},
	} {
		got, err := ParseS3URL(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("ParseS3URL(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"", "s3://", "s3:///prefix", "s3:bucket", "http://bucket", "s3://b#frag",
		"s3://b?foo=1", "s3://b?endpoint=ftp://x", "s3://b?endpoint=", "s3://b?endpoint=http://u:p@h",
		"s3://b?region=", "s3://b?region=a&region=b", "s3://b/../x", "s3://b/a//c", "s3://b/.hidden",
		"s3://AKIAEXAMPLE:s3cr3t@bucket/p", "s3://AKIAEXAMPLE:s3cr3t@bu%zz",
	} {
		_, err := ParseS3URL(bad)
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseS3URL(%q) = %v, want ErrBadURL", bad, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseS3URL(%q): the error shows the secret: %v", bad, err)
		}
		if !strings.Contains(err.Error(), "s3://bucket/prefix?endpoint=") {
			t.Errorf("ParseS3URL(%q): the error shows no example: %v", bad, err)
		}
	}
}

func TestParseFileURL(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"file:///var/lib/seqkeeper":   "/var/lib/seqkeeper",
		"file://localhost/tmp/store/": "/tmp/store",
	} {
		if got, err := ParseFileURL(url); err != nil || got != want {
			t.Errorf("ParseFileURL(%q) = %q, %v; want %q", url, got, err, want)
		}
	}
	for _, bad := range []string{"", "file://", "file:relative", "file://relative/dir", "file:///x?y=1", "file:///x#y", "s3://b", "file://u:p@/x", "file:///", "file:///.."} {
		if _, err := ParseFileURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseFileURL(%q) = %v, want ErrBadURL", bad, err)
		}
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, bad := range []string{"", "bucket/prefix", "ftp://host/x", "S4://b", "file:///x?y"} {
		if _, err := Open(ctx, bad, OpenOptions{}); !errors.Is(err, ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", bad, err)
		}
	}

	dir := filepath.Join(t.TempDir(), "new", "store")
	if _, err := Open(ctx, "file://"+dir, OpenOptions{}); err == nil || errors.Is(err, ErrBadURL) {
		t.Errorf("Open of a missing directory without Create: %v, want a not-found error", err)
	}
	fb, err := Open(ctx, "file://"+dir, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Create did not make the directory: %v", err)
	}
	if fb.String() != "file://"+dir {
		t.Errorf("String() = %q", fb.String())
	}

	env := testenv.ObjectStore(t)
	url := "s3://" + env.Bucket + "-new/some/prefix?endpoint=" + env.Endpoint + "&region=" + env.Region
	opts := OpenOptions{AccessKey: env.AccessKey, SecretKey: env.SecretKey, Create: true}
	sb, err := Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + env.Bucket + "-new/some/prefix (" + env.Endpoint + ")"; sb.String() != want {
		t.Errorf("String() = %q, want %q", sb.String(), want)
	}
	for _, b := range []Backend{fb, sb} {
		s := newStore(t, b, StoreOptions{})
		mustPut(t, s, 1, rec("opened", 5, 1))
		if r := mustGet(t, s, "opened"); r.Ceiling != 5 {
			t.Errorf("%s: %+v", b, r)
		}
	}
	// Creating an existing bucket is fine; a missing bucket without
	// Create is an error, never an empty store.
	if _, err := Open(ctx, url, opts); err != nil {
		t.Errorf("Open with Create of an existing bucket: %v", err)
	}
	opts.Create = false
	missing, err := Open(ctx, "s3://"+env.Bucket+"-absent?endpoint="+env.Endpoint, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newStore(t, missing, StoreOptions{}).Load(ctx); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("load from a missing bucket: %v, want an error other than ErrNotFound", err)
	} else {
		t.Log(err)
	}
}

// FuzzParseStoreURL: the URL parsers never panic, only fail with ErrBadURL,
// and what they accept is usable.
func FuzzParseStoreURL(f *testing.F) {
	for _, s := range []string{"s3://b/p?endpoint=http://h:1&region=r", "file:///x", "s3://u:p@b", "file://localhost/y"} {
		fuzztest.Add(f, s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if cfg, err := ParseS3URL(raw); err == nil {
			if cfg.Bucket == "" || (cfg.Prefix != "" && validateKey(cfg.Prefix) != nil) {
				t.Fatalf("ParseS3URL(%q) accepted %+v", raw, cfg)
			}
		} else if !errors.Is(err, ErrBadURL) {
			t.Fatalf("ParseS3URL(%q): %v", raw, err)
		}
		if dir, err := ParseFileURL(raw); err == nil {
			if !filepath.IsAbs(dir) {
				t.Fatalf("ParseFileURL(%q) = %q, not absolute", raw, dir)
			}
		} else if !errors.Is(err, ErrBadURL) {
			t.Fatalf("ParseFileURL(%q): %v", raw, err)
		}
	})
}
