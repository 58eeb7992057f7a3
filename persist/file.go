package persist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// lockName is the lock file in the store directory. Keys cannot name it
// (no key segment starts with '.').
const lockName = ".lock"

// FileBackend is a Backend in one local directory, for a single host or
// development. It keeps S3's conditional semantics: the ETag is the hex
// SHA-256 of the content, and a Put compares and writes under an exclusive
// flock(2) on a lock file in the directory, so writers in several processes
// on the host exclude each other. Each write goes to a temporary file that
// is fsynced and renamed over the object, and the directory is fsynced: a
// crash leaves the old object or the new one, never a mix.
//
// A key with '/' is a path of subdirectories. Unlike S3, a key cannot be
// both an object and a prefix of another ("a" and "a/b"); the store's keys
// never are. flock does not work across hosts on most network filesystems:
// use S3 for more than one host.
type FileBackend struct {
	dir string
	// sem serialises this process's writers (flock does not exclude two
	// goroutines sharing a descriptor), and waiting for it honours ctx.
	sem chan struct{}
}

// NewFile returns a backend in dir, which must exist (a mistyped path
// should fail, not start an empty store; Open with OpenOptions.Create makes
// it).
func NewFile(dir string) (*FileBackend, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file store %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("file store %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("file store %s: not a directory", abs)
	}
	f := &FileBackend{dir: abs, sem: make(chan struct{}, 1)}
	// Fail now, not at the first write, if the lock cannot be taken.
	lf, err := f.openLock()
	if err != nil {
		return nil, err
	}
	lf.Close()
	return f, nil
}

// String returns the store URL of the directory.
func (f *FileBackend) String() string { return "file://" + f.dir }

func (f *FileBackend) path(key string) (string, error) {
	if err := validateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(f.dir, filepath.FromSlash(key)), nil
}

func etagOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Get implements Backend. It takes no lock: writes replace whole files by
// rename, so a read sees one version or the other.
func (f *FileBackend) Get(ctx context.Context, key string) ([]byte, string, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, "", fmt.Errorf("get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	data, err := readObject(p)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	return data, etagOf(data), nil
}

// readObject reads an object file. A directory where an object should be is
// an error, not a missing object: never take tampering for an empty store.
func readObject(p string) ([]byte, error) {
	fh, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > maxObject {
		return nil, corruptf("larger than %d bytes", maxObject)
	}
	data := make([]byte, fi.Size())
	if _, err := fh.ReadAt(data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

// Put implements Backend: under the lock it compares the current content's
// SHA-256 with ifMatch and replaces the file atomically. Once the write has
// begun it completes even if ctx ends, since stopping halfway would leave
// the outcome as unknown as finishing.
func (f *FileBackend) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	p, err := f.path(key)
	if err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	etag, err := f.put(ctx, p, data, ifMatch)
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	return etag, nil
}

func (f *FileBackend) put(ctx context.Context, p string, data []byte, ifMatch string) (string, error) {
	if err := acquire(ctx, f.sem); err != nil {
		return "", err
	}
	defer release(f.sem)
	unlock, err := f.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()

	cur, err := readObject(p)
	switch {
	case errors.Is(err, ErrNotFound):
		if ifMatch != "" {
			return "", fmt.Errorf("%w: If-Match %s: the object does not exist", ErrConflict, ifMatch)
		}
	case err != nil:
		return "", err
	case ifMatch == "":
		return "", fmt.Errorf("%w: create-only write: the object exists", ErrConflict)
	case etagOf(cur) != ifMatch:
		return "", fmt.Errorf("%w: If-Match %s: the object has changed", ErrConflict, ifMatch)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := f.writeAtomic(p, data); err != nil {
		return "", err
	}
	return etagOf(data), nil
}

// Delete implements Backend: under the lock it removes the file and
// fsyncs the directory, so a deletion survives a crash like a write.
func (f *FileBackend) Delete(ctx context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := acquire(ctx, f.sem); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	defer release(f.sem)
	unlock, err := f.lock(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	defer unlock()
	switch err := os.Remove(p); {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// List implements Backend: the regular files under the prefix's directory,
// at any depth, except the backend's own ('.'-prefixed lock and temporary
// files). It takes no lock: writes and deletions are renames and unlinks,
// which a directory read sees whole or not at all.
func (f *FileBackend) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	root := filepath.Join(f.dir, filepath.FromSlash(prefix))
	var keys []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // gone meanwhile, or no such prefix yet
		case err != nil:
			return err
		case p != root && strings.HasPrefix(d.Name(), "."):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		rel, err := filepath.Rel(f.dir, p)
		if err != nil {
			return err
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// writeAtomic replaces p with data: temporary file, fsync, rename, fsync of
// the directory (and of the parents of any directory it had to create).
func (f *FileBackend) writeAtomic(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := f.mkdirs(dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	done = true
	return syncDir(dir)
}

// mkdirs creates dir and its missing parents below the store directory,
// fsyncing each parent whose entries changed.
func (f *FileBackend) mkdirs(dir string) error {
	rel, err := filepath.Rel(f.dir, dir)
	if err != nil || rel == "." {
		return err
	}
	cur := f.dir
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		next := filepath.Join(cur, seg)
		err := os.Mkdir(next, 0o755)
		switch {
		case err == nil:
			if err := syncDir(cur); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			if fi, err := os.Stat(next); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s exists and is not a directory (is a key also a prefix of another?)", next)
			}
		default:
			return err
		}
		cur = next
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

func (f *FileBackend) openLock() (*os.File, error) {
	lf, err := os.OpenFile(filepath.Join(f.dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file store %s: open lock file: %w", f.dir, err)
	}
	return lf, nil
}

// lock takes the directory's exclusive flock, polling so that waiting for a
// writer in another process honours ctx.
func (f *FileBackend) lock(ctx context.Context) (unlock func(), err error) {
	lf, err := f.openLock()
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
				lf.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			lf.Close()
			return nil, fmt.Errorf("flock %s: %w", lf.Name(), err)
		}
		select {
		case <-ctx.Done():
			lf.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", lf.Name(), context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// ParseFileURL returns the directory of a file:///path store URL (an
// absolute path; file://localhost/path is accepted too). Errors wrap
// ErrBadURL and show the expected form.
func ParseFileURL(rawURL string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s (%s)", ErrBadURL, fmt.Sprintf(format, args...), storeURLForms)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("unparseable file URL: %v", err)
	}
	switch {
	case u.Scheme != "file":
		return bad("not a file:// URL")
	case u.Opaque != "":
		return bad("file: URL without an absolute path (write file:///abs/path)")
	case u.User != nil || (u.Host != "" && u.Host != "localhost"):
		return bad("file URL with host %q: only local paths work (write file:///abs/path; file://dir/x means host dir)", u.Host)
	case u.RawQuery != "" || u.Fragment != "":
		return bad("file URLs take no ?parameters or #fragment")
	case u.Path == "" || !strings.HasPrefix(u.Path, "/"):
		return bad("file URL without a path")
	case filepath.Clean(u.Path) == "/":
		return bad("file URL of the root directory: give the store a directory of its own")
	}
	return filepath.Clean(u.Path), nil
}
