package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timing of the test servers. A short tick lets tests use session timeouts
// down to 2*TickTime, so expiry tests run in seconds.
const (
	TickTime = 200 * time.Millisecond
	// syncLimit is how many ticks a leader waits for a quorum's acks
	// before it gives up leading (and a follower for its leader).
	syncLimit         = 25
	zkStartTimeout    = 60 * time.Second
	zkMaxSessionMilli = 60000
)

// Ensemble is a ZooKeeper ensemble of local server processes on loopback
// ports. Server indexes are 0-based; ZooKeeper's myid is index+1.
type Ensemble struct {
	dir     string
	servers []*zkServer
	// standalone: one server in standalone mode (NewStandalone), not
	// quorum mode.
	standalone bool
	// tls, if set, makes the servers serve TLS only (NewTLSEnsemble).
	tls *zkTLS
}

type zkServer struct {
	id                        int
	clientPort, peer, elector int
	dataDir                   string
	proc                      *process
	// quorumVia is, by server id, the proxy this server dials for that
	// server's quorum port (StartEnsembleBehind).
	quorumVia map[int]*Proxy
}

// StartEnsemble starts an ensemble of n servers (quorum mode, even for 1) for this
// test alone and stops it when the test ends. Use it where a test stops,
// wipes or rolls back servers; other tests share ZooKeeper(t).
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	return startLaidOut(t, NewEnsemble, n)
}

// startLaidOut lays out an ensemble of n servers in a directory of t's
// with layOut, starts it, and stops it when t ends.
func startLaidOut(t testing.TB, layOut func(dir string, n int) (*Ensemble, error), n int) *Ensemble {
	t.Helper()
	e, err := layOut(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.StopAll)
	t.Cleanup(func() { e.logTails(t) })
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	return e
}

// logTails logs the end of each server's log when t failed: what the
// servers said (a slow fsync, a refused session) while a test found no
// session or no answer.
func (e *Ensemble) logTails(t testing.TB) {
	if !t.Failed() {
		return
	}
	for i, s := range e.servers {
		if tail := tailN(s.proc.logPath, 4000); tail != nil {
			t.Logf("ZooKeeper server %d (%s): %v", s.id, e.Addr(i), tail)
		}
	}
}

// NewEnsemble lays out an ensemble of n servers under dir without starting
// it. The caller must call StopAll.
func NewEnsemble(dir string, n int) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("ensemble size %d: need at least 1 server", n)
	}
	classpath, err := zkClasspath()
	if err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found on PATH: %w; %s", err, setupHint)
	}
	e := &Ensemble{dir: dir}
	for i := 0; i < n; i++ {
		s := &zkServer{id: i + 1, dataDir: filepath.Join(dir, fmt.Sprintf("zk%d", i+1), "data")}
		for _, p := range []*int{&s.clientPort, &s.peer, &s.elector} {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
		e.servers = append(e.servers, s)
	}
	for _, s := range e.servers {
		cfgPath := filepath.Join(dir, fmt.Sprintf("zk%d", s.id), "zoo.cfg")
		if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(cfgPath, []byte(e.config(s)), 0o644); err != nil {
			return nil, err
		}
		s.proc = &process{
			name: fmt.Sprintf("zookeeper server %d (127.0.0.1:%d)", s.id, s.clientPort),
			argv: slices.Concat([]string{java, "-Xmx" + zkHeap()}, zkJIT(),
				[]string{"-Dzookeeper.admin.enableServer=false", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
					"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath}),
			dir:     filepath.Dir(cfgPath),
			logPath: filepath.Join(filepath.Dir(cfgPath), "server.log"),
		}
		register(s.proc)
	}
	return e, nil
}

func (e *Ensemble) config(s *zkServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=50\nsyncLimit=%d\n", TickTime.Milliseconds(), syncLimit)
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", zkMaxSessionMilli)
	if e.tls != nil {
		fmt.Fprintf(&b, "dataDir=%s\n", s.dataDir)
		b.WriteString(e.tls.config(s.clientPort))
	} else {
		fmt.Fprintf(&b, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n", s.dataDir, s.clientPort)
	}
	b.WriteString("admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
	// Transaction logs padded in 1 MB blocks, not 64 MB: a copy of the
	// data (SaveData, RestoreData) is then the data, not 64 MB of zeros
	// per log written out in full.
	b.WriteString("preAllocSize=1024\n")
	if e.standalone {
		// No server.N= lines: ZooKeeper's classic standalone mode, as a
		// zoo.cfg with only dataDir and clientPort gets it.
		return b.String()
	}
	// Quorum mode even for one server: a standalone server never holds a
	// leader election, so its zxid epoch never changes, and seqkeeper's
	// rollback detection rests on epochs (see sequence.State.ZKEpoch).
	b.WriteString("standaloneEnabled=false\nreconfigEnabled=false\n")
	for _, o := range e.servers {
		quorum := fmt.Sprintf("127.0.0.1:%d", o.peer)
		if via, ok := s.quorumVia[o.id]; ok {
			quorum = via.Addr()
		}
		fmt.Fprintf(&b, "server.%d=%s:%d\n", o.id, quorum, o.elector)
	}
	return b.String()
}

// StartStandalone starts one ZooKeeper server in standalone mode (no
// server.N= lines, so no leader election ever, and a zxid epoch that never
// changes) for this test alone, and stops it when the test ends. Use it to
// test what seqkeeper does on such a server; everything else runs on
// quorum mode (StartEnsemble, ZooKeeper). Mode(ctx, 0) reports
// "standalone".
func StartStandalone(t testing.TB) *Ensemble {
	t.Helper()
	e, err := NewStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.StopAll)
	if err := e.StartAll(); err != nil {
		t.Fatal(err)
	}
	return e
}

// NewStandalone lays out one standalone ZooKeeper server under dir
// without starting it; otherwise it is NewEnsemble(dir, 1). The caller
// must call StopAll.
func NewStandalone(dir string) (*Ensemble, error) {
	e, err := NewEnsemble(dir, 1)
	if err != nil {
		return nil, err
	}
	e.standalone = true
	s := e.servers[0]
	cfgPath := filepath.Join(dir, fmt.Sprintf("zk%d", s.id), "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(e.config(s)), 0o644); err != nil {
		return nil, err
	}
	return e, nil
}

// zkClasspath finds the ZooKeeper jars of the Debian package.
func zkClasspath() (string, error) {
	if cp := os.Getenv("SEQKEEPER_ZK_CLASSPATH"); cp != "" {
		return cp, nil
	}
	const jar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("ZooKeeper not installed (%s missing): %s", jar, setupHint)
	}
	cp := jar
	// Without a binding slf4j discards the server log; slf4j-simple writes it
	// to stderr, which we keep in server.log.
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar"
	}
	// The package's jar lists the Netty jars it needs for a plain port
	// only: the secure port (NettyServerCnxnFactory's TLS pipeline) also
	// needs netty-codec and netty-resolver, which Debian ships beside it.
	for _, jar := range []string{"/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar"} {
		if _, err := os.Stat(jar); err == nil {
			cp += ":" + jar
		}
	}
	return cp, nil
}

// Len is the number of servers.
func (e *Ensemble) Len() int { return len(e.servers) }

// Servers returns every server's client address, for zkclient.Dial.
func (e *Ensemble) Servers() []string {
	out := make([]string, len(e.servers))
	for i := range e.servers {
		out[i] = e.Addr(i)
	}
	return out
}

// Addr returns server i's client address.
func (e *Ensemble) Addr(i int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.servers[i].clientPort))
}

// DataDir returns server i's data directory (snapshots, logs, myid).
func (e *Ensemble) DataDir(i int) string { return e.servers[i].dataDir }

// Start starts server i (a no-op if it runs) and, when the servers running
// form a quorum, waits until it serves clients.
func (e *Ensemble) Start(i int) error {
	s := e.servers[i]
	if err := os.WriteFile(filepath.Join(s.dataDir, "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o644); err != nil {
		return err
	}
	if err := s.proc.start(); err != nil {
		return err
	}
	if e.running()*2 <= len(e.servers) {
		return nil // no quorum yet: it cannot serve
	}
	return e.WaitServing(i, zkStartTimeout)
}

// StartAll starts every server and waits until all of them serve.
func (e *Ensemble) StartAll() error {
	for _, s := range e.servers {
		if err := os.WriteFile(filepath.Join(s.dataDir, "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o644); err != nil {
			return err
		}
		if err := s.proc.start(); err != nil {
			return err
		}
	}
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range e.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.WaitServing(i, zkStartTimeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *Ensemble) running() int {
	n := 0
	for _, s := range e.servers {
		if s.proc.running() {
			n++
		}
	}
	return n
}

// Stop stops server i gracefully (SIGTERM) and waits for it to exit.
func (e *Ensemble) Stop(i int) { _ = e.servers[i].proc.stop(syscall.SIGTERM) }

// Kill kills server i (SIGKILL): a crash, no clean shutdown.
func (e *Ensemble) Kill(i int) { _ = e.servers[i].proc.stop(syscall.SIGKILL) }

// StopAll stops every server.
func (e *Ensemble) StopAll() {
	for i := range e.servers {
		e.Kill(i)
	}
}

// Wipe deletes server i's data (snapshots and transaction logs): the server
// comes back empty. It must be stopped.
func (e *Ensemble) Wipe(i int) error {
	s := e.servers[i]
	if s.proc.running() {
		return fmt.Errorf("wipe zookeeper server %d: still running; stop it first", s.id)
	}
	if err := os.RemoveAll(s.dataDir); err != nil {
		return err
	}
	return os.MkdirAll(s.dataDir, 0o755)
}

// WipeAll stops every server and deletes all data: the data-loss disaster.
// Start the servers again with StartAll.
func (e *Ensemble) WipeAll() error {
	e.StopAll()
	for i := range e.servers {
		if err := e.Wipe(i); err != nil {
			return err
		}
	}
	return nil
}

// SaveData copies server i's data directory to dst (the server should be
// stopped, or the copy may be torn). With RestoreData it rolls an ensemble
// back to an older state.
func (e *Ensemble) SaveData(i int, dst string) error {
	return copyTree(e.servers[i].dataDir, dst)
}

// Snapshot stops server i, copies its data to a new directory of t, starts
// the server again and waits until it serves; the copy is for Rollback.
// The restart is itself a leader election (a new ZooKeeper epoch).
func (e *Ensemble) Snapshot(t testing.TB, i int) string {
	t.Helper()
	e.Stop(i)
	dir := t.TempDir()
	if err := e.SaveData(i, dir); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(i); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Rollback stops server i, replaces its data with a copy made by Snapshot
// and starts it again: ZooKeeper restored from an older copy.
func (e *Ensemble) Rollback(t testing.TB, i int, copy string) {
	t.Helper()
	e.Stop(i)
	if err := e.RestoreData(i, copy); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(i); err != nil {
		t.Fatal(err)
	}
}

// RestoreData replaces server i's data with a copy made by SaveData. The
// server must be stopped.
func (e *Ensemble) RestoreData(i int, src string) error {
	if err := e.Wipe(i); err != nil {
		return err
	}
	return copyTree(src, e.servers[i].dataDir)
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// WaitServing waits until server i answers client requests.
func (e *Ensemble) WaitServing(i int, timeout time.Duration) error {
	addr := e.Addr(i)
	return e.servers[i].proc.waitFor(timeout, func(ctx context.Context) error {
		mode, err := e.fourLetterWord(ctx, addr, "srvr")
		if err != nil {
			return err
		}
		if !strings.Contains(mode, "Mode: ") {
			return fmt.Errorf("not serving: %q", strings.TrimSpace(mode))
		}
		return nil
	})
}

// Mode returns server i's role: "leader", "follower", "standalone", or an
// error when it does not serve.
func (e *Ensemble) Mode(ctx context.Context, i int) (string, error) {
	out, err := e.fourLetterWord(ctx, e.Addr(i), "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return m, nil
		}
	}
	return "", fmt.Errorf("server %s not serving: %q", e.Addr(i), strings.TrimSpace(out))
}

// Leader returns the index of the server that leads the ensemble, or an
// error when none of them says it does.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	for i := range e.servers {
		if m, err := e.Mode(ctx, i); err == nil && m == "leader" {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no server of the ensemble %v leads", e.Servers())
}

// zkJIT is the test servers' JIT and GC flags: tuned to start fast (C1
// only, serial GC), or with SEQKEEPER_TEST_ZK_JIT=full the JVM's defaults,
// as a production server runs (slower to warm up; for the benchmarks that
// compare request costs on the server, docs/performance.md "Raises and the
// pace of ZooKeeper").
func zkJIT() []string {
	if os.Getenv("SEQKEEPER_TEST_ZK_JIT") == "full" {
		return nil
	}
	return []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
}

// zkHeap is the test servers' maximum Java heap: SEQKEEPER_TEST_ZK_HEAP
// (a -Xmx size such as 2g), 256m by default. 100,000 sequences (the large
// benchmarks) need about 1g: a server out of heap exits.
func zkHeap() string {
	if h := os.Getenv("SEQKEEPER_TEST_ZK_HEAP"); h != "" {
		return h
	}
	return "256m"
}
