package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A primary killed with SIGKILL on a host that stays up is replaced long
// before the server could expire its session: the replica next in line
// sees its port refuse (crash_probe) and deletes its candidate node. The
// session timeout here is a minute, so that a handover by expiry cannot
// pass the test: the survivor must lead within half of it, and say why
// (its metric and its log).
func TestServeTakesOverFromACrashedPrimaryBeforeItsSessionExpires(t *testing.T) {
	t.Parallel()
	const session = time.Minute
	handover(t, session, session/2, (*testenv.Cluster).Kill, "deleted the candidate node of a crashed predecessor")
}

// handover starts two replicas with this session timeout, applies fault
// to the primary a second later (so that the other has seen its port
// accept), and checks that the other leads within limit and that its
// metric and its log (logSays) say it deleted the old primary's node. It
// returns the cluster, the old primary and how long the handover took.
func handover(t *testing.T, session, limit time.Duration, fault func(*testenv.Cluster, int), logSays string) (*testenv.Cluster, int, time.Duration) {
	t.Helper()
	c := testenv.StartCluster(t, testenv.ZooKeeper(t), testenv.ClusterOptions{Replicas: 2, Env: map[string]string{
		"SEQKEEPER_ZK_SESSION_TIMEOUT": session.String(),
	}})
	ctx := context.Background()
	first := -1
	for deadline := time.Now().Add(session); first < 0; time.Sleep(50 * time.Millisecond) {
		if first = c.Leader(ctx); first < 0 && time.Now().After(deadline) {
			t.Fatalf("no replica leads within %s at the start", session)
		}
	}
	survivor := 1 - first
	time.Sleep(time.Second)
	at := time.Now()
	fault(c, first)
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		if st, err := c.Status(ctx, survivor); err == nil && st.Leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r%d does not lead %s after the fault on r%d (session timeout %s)", survivor, limit, first, session)
		}
	}
	took := time.Since(at)
	resp, err := http.Get(c.URL(survivor) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^seqkeeper_leadership_changes_total\{event="crashed_leader_deleted"\} 1$`).Match(body) {
		t.Errorf("r%d leads %s after the fault on r%d, but its /metrics does not count one leader deleted (it waited for the session?):\n%s",
			survivor, took, first, grepLines(string(body), "seqkeeper_leadership_changes_total"))
	}
	log, err := os.ReadFile(c.LogPath(survivor))
	if err != nil || !strings.Contains(string(log), logSays) {
		t.Errorf("r%d's log does not say %q (%v)", survivor, logSays, err)
	}
	t.Logf("r%d led %s after the fault on r%d (session timeout %s)", survivor, took.Round(time.Millisecond), first, session)
	return c, first, took
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A primary whose host vanishes (here its process frozen with SIGSTOP: its
// port still accepts, so crash_probe learns nothing) stops beating; the
// replica next in line sees the beat stand still past the primary's own
// limit and deletes its node, long before the server could expire its
// session. Thawed, the old primary finds its node gone and does not lead.
func TestServeTakesOverFromAFrozenPrimaryBeforeItsSessionExpires(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	// lossAfter 10 s: the beat must stand still 12.5 s; the server keeps
	// the frozen session for 20 s after its last beat.
	const session = 20 * time.Second
	c, first, _ := handover(t, session, 2*session, (*testenv.Cluster).Freeze, "deleted the candidate node of a predecessor whose heartbeat stopped")
	c.Thaw(first)
	time.Sleep(2 * time.Second)
	for i := range 2 {
		st, err := c.Status(context.Background(), i)
		if err != nil {
			t.Fatalf("r%d status after the thaw: %v", i, err)
		}
		if st.Leading != (i != first) {
			t.Errorf("after the thaw r%d leading = %v; want only r%d", i, st.Leading, 1-first)
		}
	}
}
