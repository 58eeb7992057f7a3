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
	handoverRounds  = flag.Int("bench.handovers", 3, "BenchmarkCrashHandover: rounds, each two seqkeeper handovers (crash_probe on, off) and a Curator one")
	handoverSession = flag.Duration("bench.session", 10*time.Second, "BenchmarkCrashHandover: the ZooKeeper session timeout of both")
	handoverS3      = flag.Bool("bench.s3", true, "BenchmarkCrashHandover: the replicas' store is MinIO (false: a file store)")
)

// handoverProbes are the crash_probe settings each round runs seqkeeper
// with: serve's default, and off (the survivor waits for the server to
// expire the killed leader's session, as before crash_probe).
var handoverProbes = []string{"250ms", "0"}

// BenchmarkCrashHandover is issue 29's handover row: the primary of two
// `seqkeeper serve` replicas is killed (SIGKILL), and the time until the
// other one leads is measured, beside the same crash of one of two Curator
// LeaderLatch candidates (bench/curator/latch.sh), on the same ZooKeeper
// with the same session timeout, alternated round by round. seqkeeper runs
// twice a round: at serve's default crash_probe (the survivor sees the
// killed leader's port refuse and deletes its node) and with crash_probe
// off (it waits for the server to expire the session, as Curator does).
//
// Then each round freezes a leader of each (SIGSTOP), as a host that
// vanishes looks to the others: its port accepts through the kernel's
// backlog and nothing answers, so crash_probe learns nothing, and
// seqkeeper's survivor goes by the leader's heartbeat (election/beat.go).
//
// For seqkeeper it reports two moments after the kill: when the survivor's
// election says it leads (GET /v1/status "leading") and when its primary
// runs (its reserve view "leading": the store taken, ZooKeeper checked),
// and it logs the survivor's log lines from the kill until then, with
// their offsets: the handover's timeline.
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
	var seq, elected, seqExp, off, cur, curExp, frozen, curFrozen []float64
	for round := range *handoverRounds {
		x, e, p, timeline := seqkeeperHandover(b, z, client, handoverProbes[0], false)
		seqExp, elected, seq = append(seqExp, x.Seconds()), append(elected, e.Seconds()), append(seq, p.Seconds())
		_, _, po, _ := seqkeeperHandover(b, z, client, handoverProbes[1], false)
		off = append(off, po.Seconds())
		cx, c := curatorHandover(b, z, client, round, false)
		curExp, cur = append(curExp, cx.Seconds()), append(cur, c.Seconds())
		fx, _, f, ftimeline := seqkeeperHandover(b, z, client, handoverProbes[0], true)
		frozen = append(frozen, f.Seconds())
		_, cf := curatorHandover(b, z, client, round, true)
		curFrozen = append(curFrozen, cf.Seconds())
		// On stderr as well: go test cuts a benchmark's log short.
		line := fmt.Sprintf("round %d: killed: seqkeeper (crash_probe %s): leader's node deleted %.3f s, elected %.3f s, primary running %.3f s; seqkeeper (crash_probe %s): primary running %.3f s; Curator LeaderLatch: node deleted %.3f s, leader %.3f s; ratios %.3f and %.3f. "+
			"frozen: seqkeeper: node deleted %.3f s, primary running %.3f s; Curator: leader %.3f s; ratio %.3f",
			round+1, handoverProbes[0], x.Seconds(), e.Seconds(), p.Seconds(), handoverProbes[1], po.Seconds(), cx.Seconds(), c.Seconds(), p.Seconds()/c.Seconds(), po.Seconds()/c.Seconds(),
			fx.Seconds(), f.Seconds(), cf.Seconds(), f.Seconds()/cf.Seconds())
		fmt.Fprintln(os.Stderr, line)
		b.Logf("%s\nkilled:\n%s\nfrozen:\n%s", line, timeline, ftimeline)
	}
	b.ReportMetric(median(seq), "seqkeeper-s")
	b.ReportMetric(median(elected), "seqkeeper-elected-s")
	b.ReportMetric(median(seqExp), "seqkeeper-node-gone-s")
	b.ReportMetric(median(off), "seqkeeper-probe-off-s")
	b.ReportMetric(median(cur), "curator-s")
	b.ReportMetric(median(curExp), "curator-expired-s")
	b.ReportMetric(median(seq)/median(cur), "seqkeeper/curator")
	b.ReportMetric(median(off)/median(cur), "probe-off/curator")
	b.ReportMetric(median(frozen), "frozen-seqkeeper-s")
	b.ReportMetric(median(curFrozen), "frozen-curator-s")
	b.ReportMetric(median(frozen)/median(curFrozen), "frozen-seqkeeper/curator")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// seqkeeperHandover starts two replicas, kills the primary (or, with
// freeze, sends it SIGSTOP), and returns
// how long after the kill the survivor's election, then its primary, said
// it leads, with the survivor's log lines of that interval.
func seqkeeperHandover(b *testing.B, z *testenv.ZK, zc *zkclient.Client, crashProbe string, freeze bool) (expired, elected, running time.Duration, timeline string) {
	b.Helper()
	sub := &testenv.ZK{Servers: z.Servers, Root: z.Path(fmt.Sprintf("handover-%d", time.Now().UnixNano()))}
	env := map[string]string{
		"SEQKEEPER_CRASH_PROBE":        crashProbe,
		"SEQKEEPER_ZK_SESSION_TIMEOUT": handoverSession.String(),
		"SEQKEEPER_RUNWAY":             "60s",
		"SEQKEEPER_SWEEP_INTERVAL":     "10s",
	}
	opts := testenv.ClusterOptions{Replicas: 2, Env: env}
	if *handoverS3 {
		s3 := testenv.ObjectStore(b)
		opts.Store = fmt.Sprintf("s3://%s/handover?endpoint=%s&region=%s", s3.Bucket, url.QueryEscape(s3.Endpoint), s3.Region)
		env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = s3.AccessKey, s3.SecretKey
		env["SEQKEEPER_CREATE_BUCKET"] = "true"
	}
	c := testenv.StartCluster(b, sub, opts)
	ctx := context.Background()
	leader := -1
	waitUntil(b, time.Minute, "a primary", func() bool {
		leader = c.Leader(ctx)
		return leader >= 0 && primaryRunning(c, leader)
	})
	survivor := 1 - leader
	logStart := fileSize(c.LogPath(survivor))
	// Nothing asks the leader anything for a while before the kill: its
	// status answer asks ZooKeeper, which touches its session, and the
	// server expires a session a session timeout after its last touch.
	time.Sleep(4 * time.Second)
	gone := watchLeaderNode(b, zc, c.ElectionPath)
	killed := time.Now()
	if freeze {
		c.Freeze(leader)
	} else {
		c.Kill(leader)
	}
	for elected == 0 || running == 0 {
		select {
		case <-gone:
			expired, gone = time.Since(killed), nil
		default:
		}
		if time.Since(killed) > 3*(*handoverSession) {
			b.Fatalf("no handover %s after the kill", time.Since(killed))
		}
		if st, err := c.Status(ctx, survivor); err == nil && st.Leading && elected == 0 {
			elected = time.Since(killed)
		}
		if running == 0 && primaryRunning(c, survivor) {
			running = time.Since(killed)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if gone != nil {
		<-gone
		expired = time.Since(killed)
	}
	return expired, elected, running, logSince(b, c.LogPath(survivor), logStart, killed, running+time.Second)
}

// watchLeaderNode returns a channel closed when the lowest candidate node
// under dir (the leader's, in seqkeeper's election and in LeaderLatch alike)
// is deleted: when the server expired the killed leader's session, or
// (seqkeeper with crash_probe) when the survivor deleted it.
func watchLeaderNode(b *testing.B, zc *zkclient.Client, dir string) <-chan struct{} {
	b.Helper()
	ctx := context.Background()
	kids, _, err := zc.Children(ctx, dir)
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
	ok, _, ch, err := zc.ExistsW(ctx, dir+"/"+lowest)
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

// curatorHandover starts two LeaderLatch candidates, kills the leader
// (SIGKILL; with freeze, SIGSTOP), and returns how long after the kill the
// other one led.
func curatorHandover(b *testing.B, z *testenv.ZK, zc *zkclient.Client, round int, freeze bool) (expired, led time.Duration) {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "curator", "latch.sh")
	path := z.Path(fmt.Sprintf("latch-%d-%d", round, time.Now().UnixNano()))
	session := strconv.FormatInt(handoverSession.Milliseconds(), 10)
	type candidate struct {
		cmd   *exec.Cmd
		lines chan string
	}
	start := func(id string) candidate {
		cmd := exec.Command("bash", script, strings.Join(z.Servers, ","), path, session, id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		b.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return candidate{cmd, lines}
	}
	await := func(c candidate, word string, limit time.Duration) time.Time {
		deadline := time.After(limit)
		for {
			select {
			case line, ok := <-c.lines:
				if !ok {
					b.Fatalf("LeaderLatch candidate exited before %q", word)
				}
				if strings.HasPrefix(line, word+" ") {
					return time.Now()
				}
			case <-deadline:
				b.Fatalf("LeaderLatch candidate: no %q in %s", word, limit)
			}
		}
	}
	first := start("a")
	await(first, "leader", time.Minute)
	second := start("b")
	await(second, "started", time.Minute)
	time.Sleep(time.Second) // its candidate node is in place
	gone := watchLeaderNode(b, zc, path)
	killed := time.Now()
	sig := syscall.SIGKILL
	if freeze {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(-first.cmd.Process.Pid, sig)
	deleted := make(chan time.Duration, 1)
	go func() { <-gone; deleted <- time.Since(killed) }()
	led = await(second, "leader", 3*(*handoverSession)).Sub(killed)
	return <-deleted, led
}
