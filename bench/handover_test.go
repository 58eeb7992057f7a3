package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

var (
	handoverRounds  = flag.Int("bench.handovers", 3, "BenchmarkCrashHandover: rounds, each four handovers (seqkeeper and Curator, a leader killed and a leader frozen)")
	handoverSession = flag.Duration("bench.session", 10*time.Second, "BenchmarkCrashHandover: the ZooKeeper session timeout of both")
	handoverS3      = flag.Bool("bench.s3", true, "BenchmarkCrashHandover: the replicas' store is MinIO (false: a file store)")
)

// BenchmarkCrashHandover times handover after handover of one running set
// of three `seqkeeper serve` replicas (crash_probe at serve's default),
// beside one of three Curator LeaderLatch candidates (bench/curator/latch.sh),
// on the same ZooKeeper with the same session timeout, alternated. Each
// round kills the leader of each set (SIGKILL: its port refuses, and
// seqkeeper's next in line sees it, election/crash.go), then freezes the
// next leader of each (SIGSTOP, a host that vanishes: its port accepts
// through the kernel's backlog and nothing answers, so seqkeeper's next in
// line goes by the leader's heartbeat, election/beat.go). After each
// handover the killed or frozen replica is killed and started again, so it
// queues up behind the others, as after a crash and a restart: only the
// first kill finds the set as it started.
//
// For seqkeeper it reports three moments after the fault: when the
// leader's candidate node went (seen from a session of its own), when the
// next leader's election says it leads (GET /v1/status "leading"), and
// when its primary runs (its reserve view "leading": the store taken,
// ZooKeeper checked), and it logs the next leader's log lines from the
// fault until then, with their offsets: the handover's timeline. The
// worst ratio is the slowest seqkeeper handover over Curator's median.
//
//	go test -run '^$' -bench 'CrashHandover' ./bench/ -bench.handovers=3
func BenchmarkCrashHandover(b *testing.B) {
	if _, err := exec.LookPath("java"); err != nil {
		b.Fatalf("the Curator baseline needs java: %v", err)
	}
	z := testenv.ZooKeeper(b)
	client, err := zkclient.Dial(context.Background(), z.Servers, zkclient.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(client.Close)
	seq, cur := startSeqkeeperSet(b, z), startCuratorSet(b, z)
	var gone, elected, killed, frozen, curGone, curKilled, curFrozen []float64
	for round := range *handoverRounds {
		k := seq.handover(b, client, false)
		cx, c := cur.handover(b, client, false)
		f := seq.handover(b, client, true)
		_, cf := cur.handover(b, client, true)
		gone, elected, killed = append(gone, k.gone.Seconds()), append(elected, k.elected.Seconds()), append(killed, k.running.Seconds())
		curGone, curKilled = append(curGone, cx.Seconds()), append(curKilled, c.Seconds())
		frozen, curFrozen = append(frozen, f.running.Seconds()), append(curFrozen, cf.Seconds())
		// On stderr as well: go test cuts a benchmark's log short.
		line := fmt.Sprintf("round %d: killed: seqkeeper: leader's node deleted %.3f s, elected %.3f s, primary running %.3f s; Curator: node deleted %.3f s, leader %.3f s; ratio %.3f. "+
			"frozen: seqkeeper: node deleted %.3f s, primary running %.3f s; Curator: leader %.3f s; ratio %.3f",
			round+1, k.gone.Seconds(), k.elected.Seconds(), k.running.Seconds(), cx.Seconds(), c.Seconds(), k.running.Seconds()/c.Seconds(),
			f.gone.Seconds(), f.running.Seconds(), cf.Seconds(), f.running.Seconds()/cf.Seconds())
		fmt.Fprintln(os.Stderr, line)
		b.Logf("%s\nkilled:\n%s\nfrozen:\n%s", line, k.timeline, f.timeline)
	}
	b.ReportMetric(median(killed), "seqkeeper-s")
	b.ReportMetric(slices.Max(killed), "seqkeeper-max-s")
	b.ReportMetric(median(elected), "seqkeeper-elected-s")
	b.ReportMetric(median(gone), "seqkeeper-node-gone-s")
	b.ReportMetric(median(curKilled), "curator-s")
	b.ReportMetric(median(curGone), "curator-expired-s")
	b.ReportMetric(median(killed)/median(curKilled), "seqkeeper/curator")
	b.ReportMetric(slices.Max(killed)/median(curKilled), "worst-seqkeeper/curator")
	b.ReportMetric(median(frozen), "frozen-seqkeeper-s")
	b.ReportMetric(median(curFrozen), "frozen-curator-s")
	b.ReportMetric(median(frozen)/median(curFrozen), "frozen-seqkeeper/curator")
	b.ReportMetric(slices.Max(frozen)/median(curFrozen), "worst-frozen-seqkeeper/curator")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// seqkeeperSet is a running set of seqkeeper replicas and the one that
// leads.
type seqkeeperSet struct {
	c      *testenv.Cluster
	leader int
}

// seqkeeperHandover is one handover's moments after the fault, and the
// next leader's log lines of that interval.
type seqkeeperHandover struct {
	gone, elected, running time.Duration
	timeline               string
}

func startSeqkeeperSet(b *testing.B, z *testenv.ZK) *seqkeeperSet {
	b.Helper()
	env := map[string]string{
		"SEQKEEPER_ZK_SESSION_TIMEOUT": handoverSession.String(),
		"SEQKEEPER_RUNWAY":             "60s",
		"SEQKEEPER_SWEEP_INTERVAL":     "10s",
	}
	opts := testenv.ClusterOptions{Replicas: 3, Env: env}
	if *handoverS3 {
		s3 := testenv.ObjectStore(b)
		opts.Store = fmt.Sprintf("s3://%s/handover?endpoint=%s&region=%s", s3.Bucket, url.QueryEscape(s3.Endpoint), s3.Region)
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = s3.AccessKey, s3.SecretKey
		env["SEQKEEPER_CREATE_BUCKET"] = "true"
	}
	s := &seqkeeperSet{c: testenv.StartCluster(b, &testenv.ZK{Servers: z.Servers, Root: z.Path("handover")}, opts)}
	waitUntil(b, time.Minute, "a primary", func() bool {
		s.leader = s.c.Leader(context.Background())
		return s.leader >= 0 && primaryRunning(s.c, s.leader)
	})
	return s
}

// handover kills the primary (with freeze, sends it SIGSTOP), waits until
// another replica's primary runs, and starts the old one again (killing
// it first if frozen).
func (s *seqkeeperSet) handover(b *testing.B, zc *zkclient.Client, freeze bool) (h seqkeeperHandover) {
	b.Helper()
	c, old := s.c, s.leader
	waitQueued(b, zc, c.ElectionPath, c.Len())
	// Nothing asks the leader anything for a while before the fault: its
	// status answer asks ZooKeeper, which touches its session, and the
	// server expires a session a session timeout after its last touch.
	time.Sleep(4 * time.Second)
	logStart := make([]int64, c.Len())
	for i := range logStart {
		logStart[i] = fileSize(c.LogPath(i))
	}
	gone := watchLeaderNode(b, zc, c.ElectionPath)
	at := time.Now()
	if freeze {
		c.Freeze(old)
	} else {
		c.Kill(old)
	}
	ctx := context.Background()
	next := -1
	for next < 0 || h.running == 0 {
		select {
		case <-gone:
			h.gone, gone = time.Since(at), nil
		default:
		}
		if time.Since(at) > 3*(*handoverSession) {
			b.Fatalf("no handover %s after the fault", time.Since(at))
		}
		for i := 0; i < c.Len() && next < 0; i++ {
			if i == old {
				continue
			}
			if st, err := c.Status(ctx, i); err == nil && st.Leading {
				next, h.elected = i, time.Since(at)
			}
		}
		if next >= 0 && primaryRunning(c, next) {
			h.running = time.Since(at)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if gone != nil {
		<-gone
		h.gone = time.Since(at)
	}
	h.timeline = logSince(b, c.LogPath(next), logStart[next], at, h.running+time.Second)
	c.Kill(old)
	if err := c.Start(old); err != nil {
		b.Fatal(err)
	}
	if err := c.WaitReady(old, time.Minute); err != nil {
		b.Fatal(err)
	}
	s.leader = next
	return h
}

// waitQueued waits until dir holds n candidate nodes.
func waitQueued(b *testing.B, zc *zkclient.Client, dir string, n int) {
	b.Helper()
	waitUntil(b, time.Minute, fmt.Sprintf("%d candidates under %s", n, dir), func() bool {
		kids, _, err := zc.Session().Children(context.Background(), dir)
		return err == nil && len(slices.DeleteFunc(kids, func(k string) bool { return !strings.HasPrefix(k, "_c_") })) == n
	})
}

// watchLeaderNode returns a channel closed when the lowest candidate node
// under dir (the leader's, in seqkeeper's election and in LeaderLatch alike)
// is deleted: when the server expired the killed leader's session, or
// (seqkeeper with crash_probe) when the survivor deleted it.
func watchLeaderNode(b *testing.B, zc *zkclient.Client, dir string) <-chan struct{} {
	b.Helper()
	ctx := context.Background()
	kids, _, err := zc.Session().Children(ctx, dir)
	if err != nil || len(kids) == 0 {
		b.Fatalf("candidates under %s: %v %v", dir, kids, err)
	}
	seqOf := func(name string) string { return name[strings.LastIndex(name, "-")+1:] }
	lowest := ""
	for _, k := range kids {
		if !strings.HasPrefix(k, "_c_") {
			continue // seqkeeper's leader-beat
		}
		if lowest == "" || seqOf(k) < seqOf(lowest) {
			lowest = k
		}
	}
	ok, _, ch, err := zc.Session().ExistsW(ctx, dir+"/"+lowest)
	if err != nil || !ok {
		b.Fatalf("watch %s/%s: %v %v", dir, lowest, ok, err)
	}
	gone := make(chan struct{})
	go func() { <-ch; close(gone) }()
	return gone
}

// primaryRunning reports whether replica i's primary runs.
func primaryRunning(c *testenv.Cluster, i int) bool {
	var st struct {
		Reserve struct {
			Leading bool `json:"leading"`
		} `json:"reserve"`
	}
	resp, err := httpGet(c.URL(i) + "/v1/status")
	if err != nil {
		return false
	}
	return json.Unmarshal(resp, &st) == nil && st.Reserve.Leading
}

var statusClient = &http.Client{Timeout: 2 * time.Second}

func httpGet(url string) ([]byte, error) {
	resp, err := statusClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns the JSON log lines of path written after offset,
// stamped between from and from+window, as "+offset message" lines.
func logSince(b *testing.B, path string, offset int64, from time.Time, window time.Duration) string {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err.Error()
	}
	var out strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		ts, _ := line["time"].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from.Add(-time.Second)) || at.After(from.Add(window)) {
			continue
		}
		fmt.Fprintf(&out, "    %+8.3f s  %v\n", at.Sub(from).Seconds(), line["message"])
	}
	return out.String()
}

// curatorSet is a running set of three LeaderLatch candidates on one path.
type curatorSet struct {
	z       *testenv.ZK
	path    string
	procs   map[string]*exec.Cmd // by id
	events  chan latchEvent      // every line of every candidate
	leader  string
	started int
}

// latchEvent is a line a candidate printed ("started", "leader", ...), and
// when it was read.
type latchEvent struct {
	id, word string
	at       time.Time
}

func startCuratorSet(b *testing.B, z *testenv.ZK) *curatorSet {
	b.Helper()
	s := &curatorSet{z: z, path: z.Path("latch"), procs: map[string]*exec.Cmd{}, events: make(chan latchEvent, 256)}
	s.leader = s.start(b)
	s.await(b, "leader", time.Minute, func(id string) bool { return id == s.leader })
	for range 2 {
		id := s.start(b)
		s.await(b, "started", time.Minute, func(got string) bool { return got == id })
	}
	return s
}

// start starts a new candidate and returns its id.
func (s *curatorSet) start(b *testing.B) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "curator", "latch.sh")
	s.started++
	id := fmt.Sprintf("c%d", s.started)
	session := strconv.FormatInt(handoverSession.Milliseconds(), 10)
	cmd := exec.Command("bash", script, strings.Join(s.z.Servers, ","), s.path, session, id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			word, _, _ := strings.Cut(sc.Text(), " ")
			s.events <- latchEvent{id, word, time.Now()}
		}
		_ = cmd.Wait()
	}()
	b.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	s.procs[id] = cmd
	return id
}

// await returns the first line word printed by a candidate that match
// accepts, and which candidate printed it.
func (s *curatorSet) await(b *testing.B, word string, limit time.Duration, match func(id string) bool) latchEvent {
	b.Helper()
	deadline := time.After(limit)
	for {
		select {
		case ev := <-s.events:
			if ev.word == word && match(ev.id) {
				return ev
			}
		case <-deadline:
			b.Fatalf("LeaderLatch: no %q in %s", word, limit)
		}
	}
}

// handover kills the leader (SIGKILL; with freeze, SIGSTOP), returns how
// long after that its node went and another candidate led, and starts a
// new candidate in its place (killing a frozen one first).
func (s *curatorSet) handover(b *testing.B, zc *zkclient.Client, freeze bool) (expired, led time.Duration) {
	b.Helper()
	waitQueued(b, zc, s.path, 3)
	old := s.leader
	gone := watchLeaderNode(b, zc, s.path)
	sig := syscall.SIGKILL
	if freeze {
		sig = syscall.SIGSTOP
	}
	at := time.Now()
	_ = syscall.Kill(-s.procs[old].Process.Pid, sig)
	deleted := make(chan time.Duration, 1)
	go func() { <-gone; deleted <- time.Since(at) }()
	next := s.await(b, "leader", 3*(*handoverSession), func(id string) bool { return id != old })
	expired = <-deleted
	_ = syscall.Kill(-s.procs[old].Process.Pid, syscall.SIGKILL)
	id := s.start(b)
	s.await(b, "started", time.Minute, func(got string) bool { return got == id })
	s.leader = next.id
	return expired, next.at.Sub(at)
}
