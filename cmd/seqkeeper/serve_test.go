package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// replicaProc is `seqkeeper serve` running in-process.
type replicaProc struct {
	id     string
	addr   string
	cancel context.CancelFunc
	exit   chan int
	stderr *testenv.Buffer
}

func freeAddr(t testing.TB) string {
	t.Helper()
	port, err := testenv.FreePort() // not one another test or server took
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func (c *cli) serve(id string) *replicaProc {
	c.t.Helper()
	return c.serveWith(id)
}

// serveWith is serve with more command-line arguments after the usual.
func (c *cli) serveWith(id string, extra ...string) *replicaProc {
	c.t.Helper()
	r := &replicaProc{id: id, addr: freeAddr(c.t), exit: make(chan int, 1), stderr: &testenv.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	g := &globals{
		stdin: strings.NewReader(""), stdout: io.Discard, stderr: r.stderr,
		lookupEnv:    func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
		storeCeiling: storeCeiling,
	}
	go func() {
		r.exit <- run(ctx, g, append([]string{"--root", c.root, "serve", "--http", r.addr, "--id", id,
			"--runway", "2s", "--min-reserve", "50", "--sweep-interval", "200ms", "--log-level", "debug"}, extra...))
	}()
	c.t.Cleanup(func() {
		cancel()
		select {
		case <-r.exit:
		case <-time.After(30 * time.Second):
			c.t.Errorf("replica %s did not stop", id)
		}
		if c.t.Failed() {
			l := r.stderr.String()
			if len(l) > 16<<10 {
				l = "..." + l[len(l)-16<<10:]
			}
			c.t.Logf("replica %s's log (its end):\n%s", id, l)
		}
	})
	return r
}

func (r *replicaProc) get(t *testing.T, path string, into any) int {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if into != nil {
		_ = json.NewDecoder(resp.Body).Decode(into)
	}
	return resp.StatusCode
}

func (r *replicaProc) ids(t *testing.T, name string, count int) ([][2]int64, int) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://%s/v1/sequences/%s/ids?count=%d", r.addr, name, count), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Ranges [][2]int64 `json:"ranges"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Ranges, resp.StatusCode
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two replicas: one leads and reserves, both serve IDs over HTTP, and a
// SIGTERM-style stop hands leadership over and pushes buffered IDs back.
func TestServeTwoReplicasHandOverAndPushBack(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	c.storeCeiling = storeCeiling
	a, b := c.serve("a"), c.serve("b")
	for _, r := range []*replicaProc{a, b} {
		eventually(t, "replica "+r.id+" ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	}
	leaderOf := func(r *replicaProc) string {
		var st struct {
			Leading bool `json:"leading"`
			Primary *struct {
				ID string `json:"id"`
			} `json:"primary"`
		}
		if r.get(t, "/v1/status", &st) != http.StatusOK || st.Primary == nil {
			return ""
		}
		return st.Primary.ID
	}
	eventually(t, "a primary", func() bool { return leaderOf(a) != "" && leaderOf(a) == leaderOf(b) })
	first := leaderOf(a)

	c.ok("create", "orders")
	seen := map[int64]bool{}
	take := func(r *replicaProc, n int) {
		t.Helper()
		var got [][2]int64
		eventually(t, "ids from "+r.id, func() bool {
			var code int
			got, code = r.ids(t, "orders", n)
			return code == http.StatusOK
		})
		for _, rg := range got {
			for id := rg[0]; id <= rg[1]; id++ {
				if seen[id] {
					t.Fatalf("id %d served twice", id)
				}
				seen[id] = true
			}
		}
	}
	for i := 0; i < 20; i++ {
		take(a, 7)
		take(b, 3)
	}
	if out := c.ok("describe", "orders"); !strings.Contains(out, "stored ceiling") {
		t.Fatalf("describe: %s", out)
	}
	// The leader counts what it sent to the store: at least the PUTs of
	// the raises that served these IDs.
	lead := a
	if first == "b" {
		lead = b
	}
	resp, err := http.Get("http://" + lead.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var puts float64
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, `seqkeeper_store_requests_total{op="put"} `); ok {
			puts, _ = strconv.ParseFloat(v, 64)
		}
	}
	if puts < 1 || !strings.Contains(string(metrics), `seqkeeper_store_requests_total{op="get"}`) {
		t.Fatalf("the leader's /metrics lack its store requests (put = %v)", puts)
	}

	// Stop the leader: it resigns, its buffered IDs go back, and the
	// other replica leads at once.
	leader, other := a, b
	if first == "b" {
		leader, other = b, a
	}
	began := time.Now()
	leader.cancel()
	select {
	case code := <-leader.exit:
		if code != 0 {
			t.Fatalf("serve exited %d after SIGTERM; want 0\n%s", code, leader.stderr)
		}
		leader.exit <- code
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop")
	}
	eventually(t, "handover", func() bool { return leaderOf(other) == other.id })
	t.Logf("handover after a graceful stop: %s", time.Since(began))
	if out := c.ok("leader"); !strings.Contains(out, other.id) {
		t.Fatalf("seqkeeper leader = %q; want %s", out, other.id)
	}
	// The stopped replica says how many IDs it pushed back. (They may
	// already have left the recycled list: the other replica's allocator
	// refills in the background, recycled IDs first.)
	var pushed int64 = -1
	for _, line := range strings.Split(leader.stderr.String(), "\n") {
		var ev struct {
			Pushed *int64 `json:"pushed_back_ids"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Pushed != nil {
			pushed = *ev.Pushed
		}
	}
	if pushed <= 0 {
		t.Fatalf("after a graceful stop: the stopped replica pushed back %d IDs; want its buffer pushed back\n%s", pushed, leader.stderr)
	}
	st, _, err := c.admin.Describe(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Recycled {
		for id := r.Start; id <= r.End; id++ {
			if seen[id] {
				t.Fatalf("id %d was served and pushed back", id)
			}
		}
	}
	take(other, 50) // recycled IDs first, then fresh ones: still unique
}

func TestServeNeedsAStore(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, errOut, code := c.run("", "serve")
	if code != 2 || !strings.Contains(errOut, "--store") {
		t.Fatalf("serve without a store: exit %d, %q; want 2 naming --store", code, errOut)
	}
}

func TestVerifyAndRestore(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	c.env["SEQKEEPER_MIN_RESERVE"] = "100"
	c.storeCeiling = storeCeiling
	if _, err := openStore(context.Background(), &config.Config{Store: c.env["SEQKEEPER_STORE"]}, true); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "v")
	c.initialise("v", 500) // a ceiling in ZooKeeper the store never saw
	out, _, code := c.run("", "verify")
	if code != 1 || !strings.Contains(out, "unsafe   v: no record in the store") {
		t.Fatalf("verify with an uncovered ceiling: exit %d\n%s", code, out)
	}
	if out, _, code := c.run("", "restore", "--dry-run"); code != 0 || !strings.Contains(out, "raise the stored ceiling to 500") {
		t.Fatalf("restore --dry-run: exit %d\n%s", code, out)
	}
	if _, _, code := c.run("", "verify"); code != 1 {
		t.Fatal("--dry-run changed something")
	}
	c.ok("restore")
	if out, _, code := c.run("", "verify"); code != 0 {
		t.Fatalf("verify after restore: exit %d\n%s", code, out)
	}

	// ZooKeeper loses the znode: restore re-creates it above the store.
	if err := testenv.DeleteAll(c.conn, c.root+"/v"); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := c.run("", "verify"); code != 3 || !strings.Contains(out, "pending  v: in the store but not in ZooKeeper") || !strings.Contains(errOut, "not re-created yet") {
		t.Fatalf("verify after the loss: exit %d (want 3, the loss not yet repaired)\n%s%s", code, out, errOut)
	}
	if out := c.ok("restore"); !strings.Contains(out, "re-create at 501") {
		t.Fatalf("restore:\n%s", out)
	}
	if out := c.ok("take", "v", "-n", "3"); strings.TrimSpace(out) != "501:503" {
		t.Fatalf("take after restore = %q; want 501:503", out)
	}
	if out, _, code := c.run("", "verify"); code != 0 {
		t.Fatalf("verify at the end: exit %d\n%s", code, out)
	}

	// At the top of the ID space: a sequence whose ceiling is MaxInt64,
	// lost by ZooKeeper, comes back exhausted (ceiling + 1 used to wrap).
	c.ok("create", "top", "--start", strconv.FormatInt(math.MaxInt64-100, 10))
	c.initialise("top", math.MaxInt64)
	c.ok("restore") // the store learns the ceiling
	if err := testenv.DeleteAll(c.conn, c.root+"/top"); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("restore"); !strings.Contains(out, "re-create at 9223372036854775807") {
		t.Fatalf("restore at the top:\n%s", out)
	}
	if _, errOut, code := c.run("", "take", "top"); code == 0 || !strings.Contains(errOut, "exhausted") {
		t.Fatalf("take after restoring at the top: exit %d %q; want exhausted", code, errOut)
	}
}

// status asks the primary, found through the election, or the replica
// given: its role, session, store and sequences; -o json is the
// replica's answer; a replica that does not answer fails it.
func TestStatusShowsAReplica(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	r := c.serve("r1")
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "orders")
	eventually(t, "r1 to lead and serve orders", func() bool { _, code := r.ids(t, "orders", 1); return code == http.StatusOK })
	out := c.ok("status")
	for _, want := range []string{"replica:    r1 (primary) at " + r.addr, "zookeeper:  has_session", "store:      file://", " healthy", "sequences:  1 sequences, 0 unhealthy, shortest runway"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var st struct {
		Leading bool `json:"leading"`
		Replica struct{ ID string }
	}
	if err := json.Unmarshal([]byte(c.ok("status", "--replica", r.addr, "-o", "json")), &st); err != nil || !st.Leading || st.Replica.ID != "r1" {
		t.Errorf("status -o json: %+v, %v", st, err)
	}
	if _, errOut, code := c.run("", "status", "--replica", freeAddr(t)); code != 1 || !strings.Contains(errOut, "does not answer") {
		t.Errorf("status of a replica that is not there: exit %d, %q", code, errOut)
	}
}

// step-down hands the primary's leadership to the next replica in line;
// the old primary keeps serving as a standby, which refuses a step-down
// of its own (409 not_primary). Without the admin token it is a usage
// error.
func TestStepDownHandsOver(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	c.env["SEQKEEPER_HTTP_ADMIN_TOKEN"] = "admin-s3cret"
	r1 := c.serve("r1")
	eventually(t, "r1 leads", func() bool {
		out, _, code := c.run("", "leader")
		return code == 0 && strings.Contains(out, "leader:     r1")
	})
	r2 := c.serve("r2")
	eventually(t, "r2 ready", func() bool { return r2.get(t, "/readyz", nil) == http.StatusOK })
	if out := c.ok("step-down"); !strings.Contains(out, "r1 stepped down; r2 leads") {
		t.Fatalf("step-down: %q", out)
	}
	eventually(t, "r2 to say it leads", func() bool {
		var st struct{ Leading bool }
		return r2.get(t, "/v1/status", &st) == http.StatusOK && st.Leading
	})
	c.ok("create", "after")
	eventually(t, "r1, now a standby, to serve", func() bool { _, code := r1.ids(t, "after", 1); return code == http.StatusOK })
	req, _ := http.NewRequest(http.MethodPost, "http://"+r1.addr+"/v1/step-down", nil)
	req.Header.Set("Authorization", "Bearer admin-s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "not_primary") {
		t.Errorf("step-down of the standby r1: %d %s; want 409 not_primary", resp.StatusCode, body)
	}
	delete(c.env, "SEQKEEPER_HTTP_ADMIN_TOKEN")
	if _, errOut, code := c.run("", "step-down"); code != 2 || !strings.Contains(errOut, "needs the admin token") {
		t.Errorf("step-down without the admin token: exit %d, %q", code, errOut)
	}
}
