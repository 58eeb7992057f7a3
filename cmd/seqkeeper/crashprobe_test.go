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
	c := testenv.StartCluster(t, testenv.ZooKeeper(t), testenv.ClusterOptions{Replicas: 2, Env: map[string]string{
		"SEQKEEPER_ZK_SESSION_TIMEOUT": session.String(),
	}})
	ctx := context.Background()
	leader := func(within time.Duration, what string) int {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if i := c.Leader(ctx); i >= 0 {
				return i
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica leads within %s %s", within, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := leader(session, "at the start")
	survivor := 1 - first
	// The survivor must have seen the leader's port accept first.
	time.Sleep(time.Second)
	c.Kill(first)
	if got := leader(session/2, "after the primary was killed (half its session timeout)"); got != survivor {
		t.Fatalf("r%d leads after r%d was killed", got, first)
	}
	resp, err := http.Get(c.URL(survivor) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^seqkeeper_leadership_changes_total\{event="crashed_leader_deleted"\} 1$`).Match(body) {
		t.Errorf("r%d's /metrics does not count one crashed leader deleted:\n%s", survivor, grepLines(string(body), "seqkeeper_leadership_changes_total"))
	}
	log, err := os.ReadFile(c.LogPath(survivor))
	if err != nil || !strings.Contains(string(log), "deleted the candidate node of a crashed predecessor") {
		t.Errorf("r%d's log does not say it deleted the crashed primary's node (%v)", survivor, err)
	}
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
	t.Parallel()
	// lossAfter 10 s: the beat must stand still 12.5 s; the server keeps
	// the frozen session for 20 s after its last beat.
	const session = 20 * time.Second
	c := testenv.StartCluster(t, testenv.ZooKeeper(t), testenv.ClusterOptions{Replicas: 2, Env: map[string]string{
		"SEQKEEPER_ZK_SESSION_TIMEOUT": session.String(),
	}})
	ctx := context.Background()
	leader := func(within time.Duration, what string) int {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if i := c.Leader(ctx); i >= 0 {
				return i
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica leads within %s %s", within, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := leader(session, "at the start")
	survivor := 1 - first
	time.Sleep(time.Second)
	frozen := time.Now()
	c.Freeze(first)
	deadline := time.Now().Add(2 * session)
	for {
		st, err := c.Status(ctx, survivor)
		if err == nil && st.Leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r%d does not lead %s after r%d froze", survivor, 2*session, first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(frozen)
	resp, err := http.Get(c.URL(survivor) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^seqkeeper_leadership_changes_total\{event="crashed_leader_deleted"\} 1$`).Match(body) {
		t.Errorf("r%d leads %s after r%d froze, but its /metrics does not count one leader deleted (it waited for the session?):\n%s",
			survivor, took, first, grepLines(string(body), "seqkeeper_leadership_changes_total"))
	}
	log, err := os.ReadFile(c.LogPath(survivor))
	if err != nil || !strings.Contains(string(log), "deleted the candidate node of a predecessor whose heartbeat stopped") {
		t.Errorf("r%d's log does not say it deleted the silent primary's node (%v)", survivor, err)
	}
	t.Logf("r%d led %s after r%d froze (session timeout %s)", survivor, took.Round(time.Millisecond), first, session)

	c.Thaw(first)
	time.Sleep(2 * time.Second)
	for i := range 2 {
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatalf("r%d status after the thaw: %v", i, err)
		}
		if st.Leading != (i == survivor) {
			t.Errorf("after the thaw r%d leading = %v; want only r%d", i, st.Leading, survivor)
		}
	}
}
