package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// probeLoop polls /readyz every 50 ms until stop is closed and counts the
// answers that were not 200, keeping the first.
type probeLoop struct {
	notReady atomic.Int64
	polls    atomic.Int64
	mu       sync.Mutex
	first    string
}

func (p *probeLoop) run(r *replicaProc, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		p.polls.Add(1)
		resp, err := client.Get("http://" + r.addr + "/readyz")
		code := 0
		if err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		if code != http.StatusOK {
			if p.notReady.Add(1) == 1 {
				p.mu.Lock()
				p.first = time.Now().Format(time.TimeOnly+".000") + ": " + http.StatusText(code)
				if err != nil {
					p.first += " " + err.Error()
				}
				p.mu.Unlock()
			}
		}
	}
}

// A replica stays ready while ZooKeeper elects a new leader (its clients
// lose their connection for a few seconds, their sessions survive), and
// turns unready only when it has had no session for the session timeout:
// the quorum lost for longer. It is ready again once ZooKeeper is back.
func TestReadyThroughZooKeeperLeaderElection(t *testing.T) {
	testenv.Slow(t)
	ens := testenv.StartEnsemble(t, 3)
	c := newCLI(t)
	c.env["SEQKEEPER_ZK"] = strings.Join(ens.Servers(), ",")
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	const session = 6 * time.Second
	r := c.serveWith("a", "--zk-session-timeout", session.String())
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })

	leader := -1
	for i := range ens.Len() {
		if m, err := ens.Mode(context.Background(), i); err == nil && m == "leader" {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no quorum leader")
	}

	var p probeLoop
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go p.run(r, stop, &wg)
	disconnectsBefore := countDisconnects(r)
	ens.Kill(leader)
	// Every follower drops its clients until a new leader is elected; the
	// replica reconnects in the same session.
	eventually(t, "a new quorum leader", func() bool {
		for i := range ens.Len() {
			if m, err := ens.Mode(context.Background(), i); i != leader && err == nil && m == "leader" {
				return true
			}
		}
		return false
	})
	eventually(t, "the replica back in its session", func() bool {
		var st struct {
			State string `json:"zookeeper_state"`
		}
		return r.get(t, "/v1/status", &st) == http.StatusOK && st.State == "has_session"
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if n := p.notReady.Load(); n > 0 {
		t.Fatalf("/readyz was not 200 in %d of %d polls through the election (first at %s)", n, p.polls.Load(), p.first)
	}
	if countDisconnects(r) == disconnectsBefore {
		t.Fatal("the replica never lost its connection: the test did not test the election's blip")
	}
	t.Logf("ready in all %d polls through a ZooKeeper leader election", p.polls.Load())

	// No quorum for longer than the session timeout: unready.
	if err := ens.Start(leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready with three servers", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	lost := time.Now() // before: the connection drops while StopAll runs
	ens.StopAll()
	deadline := lost.Add(3 * session)
	for r.get(t, "/readyz", nil) == http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("still ready %s without ZooKeeper", time.Since(lost).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(lost); d < session {
		t.Fatalf("unready after %s without ZooKeeper; want ready for the session timeout (%s)", d, session)
	}
	if err := ens.StartAll(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready again once ZooKeeper is back", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
}

// countDisconnects counts the replica's logged connection losses.
func countDisconnects(r *replicaProc) int {
	return strings.Count(r.stderr.String(), "zookeeper connection lost")
}

// With a shutdown delay, SIGTERM makes /readyz answer 503 while IDs and
// /livez are still served, and the process stops after the delay.
func TestShutdownDelayDrainsFirst(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	r := c.serveWith("a", "--shutdown-delay", "6s") // long enough for the checks below on a loaded machine
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "drain")
	eventually(t, "IDs", func() bool { _, code := r.ids(t, "drain", 1); return code == http.StatusOK })

	r.cancel() // what SIGTERM does
	eventually(t, "/readyz 503", func() bool { return r.get(t, "/readyz", nil) == http.StatusServiceUnavailable })
	if code := r.get(t, "/livez", nil); code != http.StatusOK {
		t.Fatalf("/livez during the delay: %d", code)
	}
	if _, code := r.ids(t, "drain", 1); code != http.StatusOK {
		t.Fatalf("an ID request during the delay: %d", code)
	}
	select {
	case code := <-r.exit:
		t.Fatalf("exited (%d) while /readyz had just turned 503: no delay", code)
	default:
	}
	select {
	case code := <-r.exit:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		r.exit <- code // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop after the delay")
	}
	if !strings.Contains(r.stderr.String(), "/readyz now answers 503") {
		t.Fatal("the delay was not logged")
	}
}

// The HTTP API over TLS with client certificates: a client with a
// certificate of the configured CA is served, one without a certificate
// or with one of another CA is refused, plain HTTP gets no API. Bad files
// are configuration errors (exit code 2) naming the file.
func TestServeTLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testenv.NewCA(t, "server CA"), testenv.NewCA(t, "client CA"), testenv.NewCA(t, "other CA")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM, keyPEM := serverCA.Issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	certFile, keyFile := write("server.crt", certPEM), write("server.key", keyPEM)
	clientCAFile := write("client-ca.crt", clientCA.PEM)

	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	r := c.serveWith("a", "--http-tls-cert-file", certFile, "--http-tls-key-file", keyFile, "--http-tls-client-ca-file", clientCAFile)

	client := func(ca *testenv.CA) *http.Client {
		tc := &tls.Config{RootCAs: serverCA.Pool()}
		if ca != nil {
			cp, kp := ca.Issue(t, x509.ExtKeyUsageClientAuth, "worker")
			cert, err := tls.X509KeyPair(cp, kp)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: apitest.NewTransport(t, &http.Transport{TLSClientConfig: tc})}
	}
	get := func(hc *http.Client, url string) (int, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	good := client(clientCA)
	eventually(t, "ready over TLS", func() bool { code, _ := get(good, "https://"+r.addr+"/readyz"); return code == http.StatusOK })
	if code, err := get(client(nil), "https://"+r.addr+"/readyz"); err == nil {
		t.Fatalf("no client certificate: %d, want the handshake refused", code)
	}
	if code, err := get(client(otherCA), "https://"+r.addr+"/readyz"); err == nil {
		t.Fatalf("a certificate of another CA: %d, want the handshake refused", code)
	}
	if code, _ := get(&http.Client{Timeout: 5 * time.Second}, "http://"+r.addr+"/readyz"); code == http.StatusOK {
		t.Fatal("plain HTTP was served")
	}

	// Bad files: exit code 2, naming the file.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-tls-cert-file", filepath.Join(dir, "missing.crt"), "--http-tls-key-file", keyFile}, "missing.crt"},
		{[]string{"--http-tls-cert-file", certFile, "--http-tls-key-file", keyFile, "--http-tls-client-ca-file", keyFile}, "server.key holds no PEM certificate"},
		{[]string{"--http-tls-cert-file", certFile}, "set both http_tls_cert_file and http_tls_key_file"},
	} {
		_, errOut, code := c.run("", append([]string{"serve", "--http", freeAddr(t)}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// wantSnakeCase fails the test unless every key of the JSON document is
// snake_case and no value is a Go-style identifier (an enum leaking its
// constant's name, like "StateHasSession").
func wantSnakeCase(t *testing.T, what string, doc []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, doc)
	}
	key := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	goName := regexp.MustCompile(`^[A-Z][a-z]+[A-Z][A-Za-z]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !key.MatchString(k) {
					t.Errorf("%s: key %s.%s is not snake_case", what, path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			if goName.MatchString(v) {
				t.Errorf("%s: %s = %q looks like a Go constant's name, not a word", what, path, v)
			}
		}
	}
	walk("", v)
}

// GET /v1/status of a primary: snake_case keys, enums as words.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	r := c.serve("a")
	eventually(t, "replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("create", "st")
	eventually(t, "IDs", func() bool { _, code := r.ids(t, "st", 1); return code == http.StatusOK })
	var st struct {
		Leading bool   `json:"leading"`
		State   string `json:"zookeeper_state"`
		Store   struct {
			Healthy bool `json:"healthy"`
		} `json:"store"`
		Reserve struct {
			Sequences []map[string]any `json:"sequences"`
		} `json:"reserve"`
	}
	eventually(t, "a primary with its sequence and a healthy store", func() bool {
		return r.get(t, "/v1/status", &st) == http.StatusOK && st.Leading && st.Store.Healthy && len(st.Reserve.Sequences) == 1
	})
	if st.State != "has_session" {
		t.Errorf("zookeeper_state %q, want has_session", st.State)
	}
	resp, err := http.Get("http://" + r.addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	wantSnakeCase(t, "/v1/status", body)
	if _, ok := st.Reserve.Sequences[0]["legacy"]; !ok {
		t.Errorf("reserve.sequences[0] omits legacy: %v", st.Reserve.Sequences[0])
	}

	// The summary covers every sequence; the list holds what was asked.
	c.ok("create", "other")
	var chosen struct {
		Reserve struct {
			Summary struct {
				Sequences         int     `json:"sequences"`
				MinRunwaySeconds  float64 `json:"min_runway_seconds"`
				MinRunwaySequence string  `json:"min_runway_sequence"`
			} `json:"summary"`
			Sequences []struct {
				Name string `json:"name"`
			} `json:"sequences"`
		} `json:"reserve"`
	}
	eventually(t, "two sequences in the summary", func() bool {
		return r.get(t, "/v1/status?sequences=none", &chosen) == http.StatusOK && chosen.Reserve.Summary.Sequences == 2
	})
	if len(chosen.Reserve.Sequences) != 0 || chosen.Reserve.Summary.MinRunwaySequence == "" {
		t.Errorf("?sequences=none: %+v; want no sequences listed and the shortest runway named", chosen.Reserve)
	}
	if code := r.get(t, "/v1/status?sequences=unhealthy&name=other", &chosen); code != http.StatusOK ||
		len(chosen.Reserve.Sequences) != 1 || chosen.Reserve.Sequences[0].Name != "other" {
		t.Errorf("?sequences=unhealthy&name=other: %d %+v; want other alone", code, chosen.Reserve)
	}
}

// storeRequests sums seqkeeper_store_requests_total on r's /metrics: the
// requests its store made to S3.
func storeRequests(t *testing.T, r *replicaProc) int64 {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "seqkeeper_store_requests_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			var n float64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			sum += int64(n)
			found = true
		}
	}
	if !found {
		t.Fatalf("no seqkeeper_store_requests_total on /metrics:\n%s", body)
	}
	return sum
}

// Probes and the status page of a standby read the store's health from
// its last request: hundreds of them cost no S3 request, and the status
// still says the store is healthy.
func TestProbesMakeNoStoreRequests(t *testing.T) {
	// Not parallel: the AWS SDK reads its credentials from the process's
	// environment.
	bucket := testenv.ObjectStore(t)
	t.Setenv("AWS_ACCESS_KEY_ID", bucket.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bucket.SecretKey)
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = fmt.Sprintf("s3://%s/probes?endpoint=%s&region=%s", bucket.Bucket, bucket.Endpoint, bucket.Region)
	a := c.serve("a")
	var st struct {
		Leading bool `json:"leading"`
		Store   struct {
			Healthy     bool       `json:"healthy"`
			LastRequest *time.Time `json:"last_request"`
		} `json:"store"`
	}
	eventually(t, "a primary", func() bool { return a.get(t, "/v1/status", &st) == http.StatusOK && st.Leading })
	b := c.serve("b")
	eventually(t, "a standby that checked its store", func() bool {
		return b.get(t, "/readyz", nil) == http.StatusOK && b.get(t, "/v1/status", &st) == http.StatusOK &&
			!st.Leading && st.Store.Healthy && st.Store.LastRequest != nil
	})
	// Wait for the start-up requests (opening the store, the first
	// check) to end: the count still for half a second.
	var before int64
	var checked time.Time
	eventually(t, "the standby's start-up store requests done", func() bool {
		n := storeRequests(t, b)
		if b.get(t, "/v1/status", &st) != http.StatusOK || st.Store.LastRequest == nil {
			return false
		}
		before, checked = n, *st.Store.LastRequest
		time.Sleep(500 * time.Millisecond)
		// A request is counted when sent and marks the health when
		// answered: one still out at the first look changes the
		// latter only (seen under load).
		return storeRequests(t, b) == n && b.get(t, "/v1/status", &st) == http.StatusOK &&
			st.Store.LastRequest != nil && st.Store.LastRequest.Equal(checked)
	})
	if before < 1 {
		t.Fatalf("the standby made %d store requests; want its start-up check counted", before)
	}
	for range 100 {
		for _, path := range []string{"/livez", "/healthz", "/readyz", "/v1/status"} {
			if code := b.get(t, path, nil); code != http.StatusOK {
				t.Fatalf("%s: %d", path, code)
			}
		}
	}
	if after := storeRequests(t, b); after != before {
		t.Fatalf("400 probes and status reads made %d store requests on a standby; want none", after-before)
	}
	if b.get(t, "/v1/status", &st) != http.StatusOK || !st.Store.Healthy || !st.Store.LastRequest.Equal(checked) {
		t.Fatalf("status after the probes: healthy %v, last request %v; want the start-up check's (%v)", st.Store.Healthy, st.Store.LastRequest, checked)
	}
}

// Serve logs where it listens, and a hint when only the host itself can
// reach it (the default 127.0.0.1:7070, which no kubelet reaches).
func TestServeLogsWhereItListens(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir() + "/store"
	const hint = "listens on loopback only"
	loop := c.serve("loop")
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	started := c.serveWith("all", "--http", "0.0.0.0:"+port) // the last --http wins
	all := &replicaProc{id: started.id, addr: "127.0.0.1:" + port, stderr: started.stderr}
	for _, r := range []*replicaProc{loop, all} {
		eventually(t, r.id+" ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
		eventually(t, r.id+" logged serving", func() bool { return strings.Contains(r.stderr.String(), `"message":"serving"`) })
	}
	if log := loop.stderr.String(); !strings.Contains(log, `"http":"http://`+loop.addr+`"`) || !strings.Contains(log, hint) || !strings.Contains(log, "--http 0.0.0.0:7070") {
		t.Errorf("on %s: want the address, %q and the --http 0.0.0.0:7070 fix in the log:\n%s", loop.addr, hint, log)
	}
	if log := all.stderr.String(); !strings.Contains(log, `"http":"http://0.0.0.0:`+port+`"`) || strings.Contains(log, hint) {
		t.Errorf("on 0.0.0.0:%s: want the address and no loopback hint in the log:\n%s", port, log)
	}
}
