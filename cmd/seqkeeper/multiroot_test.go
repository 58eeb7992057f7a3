package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// One serve process hosts several roots from one config file, and the
// replicas spread the roots' leadership: six roots, each with its own
// election, primary and store, served by one, then two, then three real
// 'seqkeeper serve' processes. With R roots and N replicas no replica may
// lead more than ceil(R/N) once it settles: 6, 3, then 2. A SIGKILLed
// replica's roots are taken over by the others (and spread again: 3 each).
// Workers take IDs from every root all along, through the library and
// through the rooted HTTP routes of every replica; no ID may be handed out
// twice within a sequence. The HTTP API addresses roots by path, refuses
// an unrooted root route (root_required) and an unknown root
// (unknown_root), and labels each root's metrics.
func TestServeSeveralRootsSpreadsLeadership(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	const roots = 6
	most := func(replicas int) int { return (roots + replicas - 1) / replicas }
	z := testenv.ZooKeeper(t)
	conn := testenv.Connect(t, z.Servers, 10*time.Second)
	dir := t.TempDir()
	adminToken := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(adminToken, []byte("the-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &multiRoot{t: t, ledgers: map[string]*testenv.Ledger{}, taken: map[string]*atomic.Int64{}}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "zk: [%s]\nzk_session_timeout: %s\nceiling_wait: %s\nrunway: 2s\nmin_reserve: 50\nsweep_interval: 200ms\nlog_format: json\nhttp_admin_token_file: %s\nroots:\n",
		strings.Join(z.Servers, ", "), sessionTimeout, workerCeilingWait, adminToken)
	for i := range roots {
		name := fmt.Sprintf("r%d", i)
		m.names = append(m.names, name)
		m.roots = append(m.roots, z.Path(name)+"/sequences")
		m.ledgers[name] = testenv.NewLedger()
		m.taken[name] = &atomic.Int64{}
		fmt.Fprintf(&cfg, "  - name: %s\n    root: %s\n    store: file://%s\n", name, m.roots[i], filepath.Join(dir, "store-"+name))
	}
	m.config = filepath.Join(dir, "roots.yaml")
	if err := os.WriteFile(m.config, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	a := m.start("a")
	m.awaitSpread("one replica leads every root", []*multiProc{a}, roots)

	// The HTTP API by root.
	for _, name := range m.names {
		if code, body := a.call("POST", "/v1/roots/"+name+"/sequences", `{"name":"ids"}`, "the-admin-token"); code != http.StatusCreated {
			t.Fatalf("create ids in %s: %d %s", name, code, body)
		}
	}
	if code, body := a.call("GET", "/v1/sequences", "", ""); code != http.StatusNotFound || !strings.Contains(body, `"root_required"`) || !strings.Contains(body, strings.Join(m.names, ", ")) {
		t.Errorf("GET /v1/sequences on a replica of several roots: %d %s; want 404 root_required naming the roots", code, body)
	}
	if code, body := a.call("POST", "/v1/sequences/ids/ids", "", ""); code != http.StatusNotFound || !strings.Contains(body, `"root_required"`) {
		t.Errorf("an unrooted take: %d %s; want 404 root_required", code, body)
	}
	if code, body := a.call("GET", "/v1/roots/nosuch/sequences", "", ""); code != http.StatusNotFound || !strings.Contains(body, `"unknown_root"`) || !strings.Contains(body, m.names[roots-1]) {
		t.Errorf("a root this replica does not serve: %d %s; want 404 unknown_root naming the roots", code, body)
	}
	if code, body := a.call("GET", "/v1/roots/r1/sequences/ids", "", ""); code != http.StatusOK || !strings.Contains(body, `"ids"`) {
		t.Errorf("describe in r1: %d %s", code, body)
	}
	if code, body := a.call("GET", "/metrics", "", ""); code != http.StatusOK || !strings.Contains(body, `seqkeeper_leader{root="`+m.names[roots/2]+`"} 1`) ||
		!strings.Contains(body, `seqkeeper_allocators{root="r0"}`) || !strings.Contains(body, `route="GET /v1/sequences/{name}"`) {
		t.Errorf("GET /metrics: %d; want each root's series labelled root=\"name\"", code)
	}

	ctx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	var wg sync.WaitGroup
	failures := make(chan error, 64)
	for i, name := range m.names {
		client, err := sequence.NewClient(conn, sequence.Options{Root: m.roots[i], CeilingWait: workerCeilingWait})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { m.libraryWorker(ctx, name, client, failures) })
		wg.Go(func() { m.httpWorker(ctx, name, failures) })
	}
	m.awaitProgress(failures, "the first IDs")

	b := m.start("b")
	m.awaitSpread(fmt.Sprintf("two replicas: at most %d roots each", most(2)), []*multiProc{a, b}, most(2))
	c := m.start("c")
	m.awaitSpread(fmt.Sprintf("three replicas: at most %d roots each", most(3)), []*multiProc{a, b, c}, most(3))
	m.awaitProgress(failures, "IDs with three replicas")
	if !strings.Contains(a.logs.String(), "spread: this replica leads") {
		t.Errorf("replica a logged no spread handover")
	}

	// Kill the replica leading the most roots: the others take them over
	// (after its session expires) and spread them again.
	victim := m.mostLeading([]*multiProc{a, b, c})
	victim.stop(syscall.SIGKILL)
	var rest []*multiProc
	for _, p := range []*multiProc{a, b, c} {
		if p != victim {
			rest = append(rest, p)
		}
	}
	m.awaitSpread(fmt.Sprintf("%s killed: its roots taken over, at most %d each", victim.id, most(2)), rest, most(2))
	m.awaitProgress(failures, "IDs after "+victim.id+" was killed")

	stopWorkers()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	for _, name := range m.names {
		m.ledgers[name].Check(t)
		t.Logf("%s: %d IDs handed out", name, m.ledgers[name].Issued())
	}
	for _, p := range rest {
		p.stop(syscall.SIGTERM)
		if code := p.wait(); code != 0 {
			t.Errorf("%s: serve exited %d after SIGTERM; want 0", p.id, code)
		}
	}
}

// multiRoot is the test's roots and the processes serving them.
type multiRoot struct {
	t       *testing.T
	config  string
	names   []string
	roots   []string
	procsMu sync.Mutex
	procs   []*multiProc
	ledgers map[string]*testenv.Ledger
	taken   map[string]*atomic.Int64
}

// multiProc is one 'seqkeeper serve' process of every root.
type multiProc struct {
	replicaUnderTest
	addr string
}

func (m *multiRoot) start(id string) *multiProc {
	t := m.t
	p := &multiProc{addr: freeAddr(t)}
	p.id, p.logs, p.done = id, &testenv.Buffer{}, make(chan struct{})
	p.cmd = exec.Command(seqkeeperBinary(t), "--config", m.config, "serve", "--http", p.addr, "--id", id)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		var ee *exec.ExitError
		if errors.As(p.cmd.Wait(), &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if p.wait() < 0 {
			p.stop(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			l := p.logs.String()
			if len(l) > 32<<10 {
				l = "..." + l[len(l)-32<<10:]
			}
			t.Logf("logs of %s (their end):\n%s", id, l)
		}
	})
	// The workers use it once it serves.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := p.call("GET", "/livez", "", ""); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve HTTP after a minute", id)
		}
	}
	m.procsMu.Lock()
	m.procs = append(m.procs, p)
	m.procsMu.Unlock()
	return p
}

// call makes one request and returns the status and the body ("" and 0
// when it failed).
func (p *multiProc) call(method, path, body, token string) (int, string) {
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: workerCeilingWait + 5*time.Second, Transport: loadTransport}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// leads returns the names of the roots p says it leads, and whether its
// status could be read.
func (p *multiProc) leads() ([]string, bool) {
	code, body := p.call("GET", "/v1/status?sequences=none", "", "")
	if code != http.StatusOK {
		return nil, false
	}
	var st struct {
		Roots []struct {
			Name    string `json:"name"`
			Leading bool   `json:"leading"`
		} `json:"roots"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return nil, false
	}
	var out []string
	for _, r := range st.Roots {
		if r.Leading {
			out = append(out, r.Name)
		}
	}
	return out, true
}

// awaitSpread waits until every root is led by exactly one of procs and
// none leads more than most, and stays so for a few looks (no handover
// in flight).
func (m *multiRoot) awaitSpread(what string, procs []*multiProc, most int) {
	m.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	stable := 0
	var last string
	for stable < 5 {
		if time.Now().After(deadline) {
			m.t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
		ledBy := map[string][]string{}
		var view []string
		ok := true
		for _, p := range procs {
			names, read := p.leads()
			if !read || len(names) > most {
				ok = false
			}
			for _, n := range names {
				ledBy[n] = append(ledBy[n], p.id)
			}
			view = append(view, fmt.Sprintf("%s leads %v", p.id, names))
		}
		for _, n := range m.names {
			if len(ledBy[n]) != 1 {
				ok = false
			}
		}
		last = strings.Join(view, "; ")
		if ok {
			stable++
		} else {
			stable = 0
		}
	}
	m.t.Logf("%s: %s", what, last)
}

// mostLeading returns the process that leads the most roots.
func (m *multiRoot) mostLeading(procs []*multiProc) *multiProc {
	best, n := procs[0], -1
	for _, p := range procs {
		if names, _ := p.leads(); len(names) > n {
			best, n = p, len(names)
		}
	}
	return best
}

// awaitProgress waits until every root has handed out IDs since the call.
func (m *multiRoot) awaitProgress(failures chan error, what string) {
	m.t.Helper()
	base := map[string]int64{}
	for _, n := range m.names {
		base[n] = m.taken[n].Load()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-failures:
			m.t.Fatalf("waiting for %s: %v", what, err)
		default:
		}
		done := true
		for _, n := range m.names {
			if m.taken[n].Load() <= base[n] {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *multiRoot) record(name string, w int, ids sequence.Ranges) {
	m.ledgers[name].Took(w, ids)
	for _, rg := range ids {
		m.taken[name].Add(rg.Len())
	}
}

// libraryWorker takes IDs of root name through the Go library (worker 0).
func (m *multiRoot) libraryWorker(ctx context.Context, name string, c *sequence.Client, failures chan<- error) {
	for ctx.Err() == nil {
		ids, err := c.Take(ctx, "ids", 5)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures <- fmt.Errorf("%s: library worker: %w", name, err)
			return
		}
		m.record(name, 0, ids)
		sleep(ctx, workerPause)
	}
}

// httpWorker takes IDs of root name through the rooted route of every
// running process in turn (worker 1).
func (m *multiRoot) httpWorker(ctx context.Context, name string, failures chan<- error) {
	for i := 0; ctx.Err() == nil; i++ {
		m.procsMu.Lock()
		p := m.procs[i%len(m.procs)]
		m.procsMu.Unlock()
		if p.down.Load() {
			continue
		}
		code, body := p.call("POST", "/v1/roots/"+name+"/sequences/ids/ids?count=3", "", "")
		switch {
		case ctx.Err() != nil:
			return
		case code != http.StatusOK && p.down.Load():
			continue // stopped while the request was out; its IDs are lost
		case code != http.StatusOK:
			failures <- fmt.Errorf("%s: http worker via %s: %d %s", name, p.id, code, body)
			return
		}
		var got struct {
			Ranges [][2]int64 `json:"ranges"`
		}
		if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&got); err != nil || len(got.Ranges) == 0 {
			failures <- fmt.Errorf("%s: http worker via %s: %q: %v", name, p.id, body, err)
			return
		}
		var ids sequence.Ranges
		for _, rg := range got.Ranges {
			ids = append(ids, sequence.Range{Start: rg[0], End: rg[1]})
		}
		m.record(name, 1, ids)
		sleep(ctx, workerPause)
	}
}

// A config file of several roots: the operator commands refuse it without
// --root-name (they work on one root), serve refuses a store given beside it, and a root
// whose store belongs to another root stops serve at its start, exit 2
// each time, naming what is wrong.
func TestSeveralRootsRefusals(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	ctx := context.Background()
	// r1's store already holds another root's records.
	other, err := persist.Open(ctx, "file://"+filepath.Join(dir, "taken"), persist.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := persist.NewStore(other, persist.StoreOptions{Root: z.Path("someone-else")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, 0, persist.Record{Name: "x", Ceiling: 5}); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "roots.yaml")
	text := fmt.Sprintf("zk: [%s]\nzk_connect_timeout: 5s\nroots:\n  - {name: r0, root: %s, store: \"file://%s\"}\n  - {name: r1, root: %s, store: \"file://%s\"}\n",
		strings.Join(z.Servers, ", "), z.Path("r0"), filepath.Join(dir, "r0"), z.Path("r1"), filepath.Join(dir, "taken"))
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"operator command", []string{"--config", config, "leader"}, "the config file lists several roots (r0, r1); this command works on one: pick one with --root-name (one of: r0, r1)"},
		{"store beside roots", []string{"--config", config, "--store", "file:///elsewhere", "serve", "--http", "127.0.0.1:0"}, "roots: set together with store (file:///elsewhere)"},
		{"another root's store", []string{"--config", config, "serve", "--http", "127.0.0.1:0", "--id", "x"}, "root r1 (" + z.Path("r1") + "): store: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, seqkeeperBinary(t), tc.args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("seqkeeper %s: %v; want exit 2 saying %q; output:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
			}
		})
	}
}
