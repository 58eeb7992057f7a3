package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// What an extra root costs a replica in ZooKeeper: no session (every
// root of the process shares one), and watches on its own nodes only.
// Counted with ZooKeeper's wchc for one process leading four roots of one
// sequence each: one watched candidate node per root. wchc lists the
// one-shot watches only; the primary's persistent watches (package
// watcher: one per sequence) are not in its listing.
func TestSeveralRootsShareOneSessionAndWatchOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	const roots = 4
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	m := &multiRoot{t: t, taken: map[string]*atomic.Int64{}}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "zk: [%s]\nzk_session_timeout: %s\nrunway: 2s\nmin_reserve: 50\nsweep_interval: 200ms\nhttp_admin_token_file: %s\nroots:\n",
		strings.Join(z.Servers, ", "), sessionTimeout, filepath.Join(dir, "admin"))
	if err := os.WriteFile(filepath.Join(dir, "admin"), []byte("adm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range roots {
		name := fmt.Sprintf("r%d", i)
		m.names = append(m.names, name)
		m.roots = append(m.roots, z.Path(name))
		fmt.Fprintf(&cfg, "  - {name: %s, root: %s, store: \"file://%s\"}\n", name, z.Path(name), filepath.Join(dir, name))
	}
	electionDirs := make([]string, roots)
	for i := range electionDirs {
		electionDirs[i], _ = config.DerivedPaths(m.roots[i])
	}
	m.config = filepath.Join(dir, "roots.yaml")
	if err := os.WriteFile(m.config, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := m.start("solo")
	m.awaitSpread("one replica leads every root", []*multiProc{p}, roots)
	for _, name := range m.names {
		if code, body := p.call("POST", "/v1/roots/"+name+"/sequences", `{"name":"ids"}`, "adm"); code != http.StatusCreated {
			t.Fatalf("create in %s: %d %s", name, code, body)
		}
		eventuallyTake(t, p, name)
	}
	_, body := p.call("GET", "/v1/status?sequences=none", "", "")
	var st struct {
		Session string `json:"zookeeper_session"`
		Roots   []struct {
			Name    string `json:"name"`
			Session string `json:"zookeeper_session"`
		} `json:"roots"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Roots) != roots {
		t.Fatalf("status %s: %v", body, err)
	}
	for _, r := range st.Roots {
		if r.Session != st.Session {
			t.Fatalf("root %s runs on session %s, the process on %s: want one session for all", r.Name, r.Session, st.Session)
		}
	}

	// Every root's watches, by the paths the process's session watches:
	// its candidate node (the election's guard and the handover observer
	// watch the same node), and at times its sequences (a take waiting at
	// the ceiling); nothing of another root, nothing of the process.
	var election, sequences map[string]int
	var outside, paths []string
	defer func() {
		if t.Failed() {
			t.Logf("last look: candidate nodes %v, sequences %v, outside the roots %v, all %v", election, sequences, outside, paths)
		}
	}()
	eventually(t, "one watched candidate node per root and nothing outside the roots", func() bool {
		paths = sessionWatches(t, z.Servers, st.Session)
		election, sequences, outside = map[string]int{}, map[string]int{}, nil
		for _, path := range paths {
			owner := ""
			for i, name := range m.names {
				switch {
				case within(path, m.roots[i]):
					sequences[name]++
					owner = name
				case strings.HasPrefix(path, electionDirs[i]+"/"):
					election[name]++
					owner = name
				}
			}
			if owner == "" {
				outside = append(outside, path)
			}
		}
		for _, name := range m.names {
			if election[name] != 1 || sequences[name] > 1 {
				return false
			}
		}
		return len(outside) == 0
	})
	t.Logf("one session (%s) for %d roots; one-shot watches (wchc) per root as its primary, one sequence each: its candidate node %v, its sequences %v", st.Session, roots, election, sequences)
}

func within(p, q string) bool { return p == q || strings.HasPrefix(p, q+"/") }

// eventuallyTake takes one ID of root name's sequence ids, retrying while
// its primary initialises it.
func eventuallyTake(t *testing.T, p *multiProc, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := p.call("POST", "/v1/roots/"+name+"/sequences/ids/ids?count=1", "", "")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("take from %s: %d %s", name, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionWatches is the paths session watches, by wchc of every server
// (the session is connected to one of them).
func sessionWatches(t *testing.T, servers []string, session string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var all strings.Builder
	for _, server := range servers {
		out, err := zkclient.FourLetterWord(ctx, server, "wchc")
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(out + "\n")
	}
	var paths []string
	in := false
	for _, line := range strings.Split(all.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "0x"):
			in = strings.TrimSpace(line) == session
		case in && strings.TrimSpace(line) != "":
			paths = append(paths, strings.TrimSpace(line))
		}
	}
	return paths
}
