// Package testenv gives tests real servers: a ZooKeeper 3.8 (a single server
// or a 3-node ensemble on loopback) and an S3-compatible MinIO. Nothing here
// is a mock; the servers are the Debian ZooKeeper jar and the MinIO binary
// that scripts/images.sh builds, started as child processes.
//
// Environment:
//
//	SEQKEEPER_TEST_ZK             use this ZooKeeper (host:port,host:port) instead of starting one
//	SEQKEEPER_TEST_S3             use this S3 endpoint URL instead of starting MinIO
//	SEQKEEPER_TEST_S3_ACCESS_KEY  credentials for SEQKEEPER_TEST_S3 (default minioadmin)
//	SEQKEEPER_TEST_S3_SECRET_KEY
//	SEQKEEPER_TEST_S3_KMS_KEY     a KMS key SEQKEEPER_TEST_S3 holds, for SSE-KMS (unset: KMSObjectStore starts a MinIO with one)
//	SEQKEEPER_ZK_CLASSPATH        ZooKeeper classpath (default: the Debian package's jars)
//	SEQKEEPER_MINIO_BIN           MinIO binary (default: the scripts' cache, then $PATH)
//	SEQKEEPER_TEST_BIN            the seqkeeper binary the clusters run (default: built from this checkout)
//
// Shared servers are started once per test binary, on first use; each test
// gets its own ZooKeeper root path and its own bucket, so tests may run in
// parallel against one server. Packages that use the shared servers call
// Main from TestMain so the servers stop when the tests end. Under -short,
// Main lets a package run ShortParallel parallel tests at once.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// registry tracks every process this package started, so Main can stop
// them, and what Main removes after (built binaries).
var registry struct {
	mu     sync.Mutex
	procs  []*process
	atExit []func()
}

func register(p *process) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.procs = append(registry.procs, p)
}

// atExit runs f in Main after the tests and the servers stopped.
func atExit(f func()) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.atExit = append(registry.atExit, f)
}

// Main runs the tests, then stops every server this package started and
// removes what it built (SeqkeeperBinary). Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the tests as Main does and returns the exit code, for a
// TestMain that checks more after the tests.
func Run(m *testing.M) int {
	flag.Parse()
	shortParallelism()
	code := m.Run()
	registry.mu.Lock()
	procs, after := registry.procs, registry.atExit
	registry.procs, registry.atExit = nil, nil
	registry.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, f := range after {
		f()
	}
	return code
}

// Slow skips t under -short, the everyday loop (README, "Test"): a
// test of scale, pace or many processes whose behaviour other tests of
// its package cover in part, and that the full run (scripts/test.sh, CI)
// always runs.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (bash scripts/test.sh, or go test without -short)")
	}
}

// ParallelUnderShort makes t parallel under -short only: a test with
// servers of its own (an ensemble it restarts, a primary whose store it
// holds, a model run) that spends most of its time waiting on them. The
// full run, under -race, keeps such tests one at a time.
func ParallelUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Parallel()
	}
}

// ShortParallel is how many parallel tests a package runs at once under
// -short (go test's default is GOMAXPROCS, 2 on a small CI machine). The
// tests of this module spend most of their time waiting: for a session
// to expire, a primary to take over, a ZooKeeper or MinIO to answer, a
// paced load to run its course. Under -short, the everyday loop, they
// overlap more; the full run (scripts/test.sh, with -race) keeps go
// test's default. An explicit -parallel always wins. More than 4 gained
// little on two cores and let a loaded machine stall the shared
// ZooKeeper past the election tests' 2 s contact limit.
const ShortParallel = 4

// shortParallelism raises -test.parallel to ShortParallel under -short
// unless the command line set it. It runs before m.Run reads the flag.
func shortParallelism() {
	p := flag.Lookup("test.parallel")
	if !testing.Short() || p == nil {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f == p })
	if n, err := strconv.Atoi(p.Value.String()); !set && err == nil && n < ShortParallel {
		_ = p.Value.Set(strconv.Itoa(ShortParallel))
	}
}

// Server ports come from below Linux's ephemeral range (32768-60999), so
// the outgoing connections of other processes cannot take them between
// freePort and the server's bind, and a port is never handed out twice:
// not by one test binary (used), and not by two at once, since go test
// runs packages in parallel (each port is reserved with a lock on a file
// in portLocks, held until the process exits; seen in CI: two packages'
// ZooKeeper servers were given the same port).
const portLow, portHigh = 20000, 32000

var ports struct {
	mu    sync.Mutex
	used  map[int]bool
	locks []*os.File // kept open: closing one would release its port
}

// portLocks is where test processes reserve ports.
var portLocks = filepath.Join(os.TempDir(), "seqkeeper-test-ports")

// reservePort takes port p for this process unless another test process
// holds it.
func reservePort(p int) bool {
	if err := os.MkdirAll(portLocks, 0o777); err != nil {
		return true // cannot reserve across processes: fall back to the bind check alone
	}
	f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	ports.locks = append(ports.locks, f)
	return true
}

// FreePort returns a TCP port, free on every address a moment ago, below
// the ephemeral range: for a server, or a container's published port, to
// bind next.
func FreePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	for i := 0; i < 1000; i++ {
		p := portLow + mrand.IntN(portHigh-portLow)
		if ports.used[p] {
			continue
		}
		ports.used[p] = true // tried: locked by another process, or taken below
		if !reservePort(p) {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", portLow, portHigh)
}

// uniqueName turns a test name into a short, path- and bucket-safe name with
// a random suffix: lowercase letters, digits and '-'.
func uniqueName(t testing.TB, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	suffix := randomHex(4)
	name := strings.Trim(b.String(), "-")
	if len(name) > max-len(suffix)-1 {
		name = strings.Trim(name[:max-len(suffix)-1], "-")
	}
	if name == "" {
		return "t" + suffix
	}
	return name + "-" + suffix
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(buf)
}

// cacheDir is where scripts/images.sh keeps what it builds (the MinIO
// binary among them). It must agree with the script.
func cacheDir() string {
	if d := os.Getenv("SEQKEEPER_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "seqkeeper")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "seqkeeper-cache")
	}
	return filepath.Join(home, ".cache", "seqkeeper")
}

// setupHint is appended to every "server not available" failure.
const setupHint = "run 'bash scripts/setup.sh' once (installs the zookeeper package, builds MinIO and the images), or point SEQKEEPER_TEST_ZK / SEQKEEPER_TEST_S3 at running servers"
