package httpapi_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's sequences root on the shared real ZooKeeper.
type env struct {
	t       testing.TB
	servers []string
	root    string
	admin   *seqzk.Client // stands in for the operator and the primary
}

func newEnv(t testing.TB) *env {
	t.Helper()
	z := testenv.ZooKeeper(t)
	e := &env{t: t, servers: z.Servers, root: z.SequencesRoot(t)}
	zc := e.session()
	admin, err := seqzk.NewClient(zc, seqzk.Options{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	e.admin = admin
	return e
}

// session opens a ZooKeeper session of its own, closed when the test ends.
func (e *env) session() *zkclient.Client {
	e.t.Helper()
	c, err := zkclient.Dial(context.Background(), e.servers, zkclient.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) client(zc *zkclient.Client, opts sequence.Options) *sequence.Client {
	e.t.Helper()
	opts.Root = e.root
	c, err := sequence.NewClient(zc, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// create registers name and raises its ceiling, standing in for the primary.
func (e *env) create(name string, r seqzk.Registration, ceiling int64) {
	e.t.Helper()
	if err := e.admin.Register(context.Background(), name, r); err != nil {
		e.t.Fatal(err)
	}
	// Revalidate is how the primary initialises a registration.
	if _, err := e.admin.Keeper().Revalidate(context.Background(), name, 0, ceiling); err != nil {
		e.t.Fatal(err)
	}
}

// replica is one Server behind an httptest.Server, on its own session.
type replica struct {
	e   *env
	srv *httpapi.Server
	ts  *httptest.Server
	reg *prometheus.Registry
	// seqs is the replica's sequence client.
	seqs *sequence.Client
	// client validates every round trip against the OpenAPI document.
	client *http.Client
}

func (e *env) replica(opts httpapi.Options, seqOpts sequence.Options) *replica {
	e.t.Helper()
	zc := e.session()
	opts.Sequences = e.client(zc, seqOpts)
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	srv, err := httpapi.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	e.t.Cleanup(func() {
		ts.Close()
		_ = srv.Close(context.Background())
	})
	return &replica{e: e, srv: srv, ts: ts, reg: opts.Registry, seqs: opts.Sequences, client: apitest.Client(e.t, ts.Client())}
}

// call makes a request and returns the status, headers and body.
func (r *replica) call(method, path, token string, body string) (int, http.Header, []byte) {
	r.e.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return r.callWith(method, path, h, body)
}

// callWith makes a request with the given headers and returns the status,
// headers and body.
func (r *replica) callWith(method, path string, h http.Header, body string) (int, http.Header, []byte) {
	r.e.t.Helper()
	req, err := http.NewRequest(method, r.ts.URL+path, strings.NewReader(body))
	if err != nil {
		r.e.t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// ids takes count IDs and fails the test unless the answer is 200.
func (r *replica) ids(name string, count int) sequence.Ranges {
	r.e.t.Helper()
	code, _, body := r.call("POST", fmt.Sprintf("/v1/sequences/%s/ids?count=%d", name, count), "", "")
	if code != http.StatusOK {
		r.e.t.Fatalf("ids %s count=%d: %d %s", name, count, code, body)
	}
	var got httpapi.IDsResponse
	if err := json.Unmarshal(body, &got); err != nil {
		r.e.t.Fatalf("ids answer %s: %v", body, err)
	}
	if got.Sequence != name {
		r.e.t.Fatalf("answer names sequence %q, want %q", got.Sequence, name)
	}
	return sequence.Ranges(got.Ranges)
}

// wantError checks an error answer's status and code.
func wantError(t testing.TB, what string, code int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var eb httpapi.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("%s: error body %q is not JSON: %v", what, body, err)
	}
	if code != wantStatus || eb.Error.Code != wantCode || eb.Error.Message == "" {
		t.Fatalf("%s: %d %s, want %d with code %q and a message", what, code, body, wantStatus, wantCode)
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("orders", seqzk.Registration{}, 1_000_000)
	r := e.replica(httpapi.Options{}, sequence.Options{})

	if got := r.ids("orders", 1); got.String() != "1" {
		t.Fatalf("first ID: %v, want 1", got)
	}
	got := r.ids("orders", 100)
	if got.Count() != 100 || len(got) != 1 || got[0].Start != 2 {
		t.Fatalf("count=100: %v, want one range of 100 from 2", got)
	}
	// No count: one ID.
	code, _, body := r.call("POST", "/v1/sequences/orders/ids", "", "")
	if code != 200 || !strings.Contains(string(body), `"ranges":[[102,102]]`) {
		t.Fatalf("no count: %d %s", code, body)
	}
	if got := r.ids("orders", httpapi.DefaultMaxCount); got.Count() != httpapi.DefaultMaxCount {
		t.Fatalf("count=max: %d IDs", got.Count())
	}
}

func TestIDsErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("orders", seqzk.Registration{}, 1000)
	r := e.replica(httpapi.Options{}, sequence.Options{})
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v1/sequences/orders/ids?count=0", 400, httpapi.CodeBadRequest},
		{"POST", "/v1/sequences/orders/ids?count=-3", 400, httpapi.CodeBadRequest},
		{"POST", "/v1/sequences/orders/ids?count=ten", 400, httpapi.CodeBadRequest},
		{"POST", "/v1/sequences/orders/ids?count=10001", 400, httpapi.CodeBadRequest},
		{"POST", "/v1/sequences/-bad/ids", 400, httpapi.CodeInvalidName},
		{"POST", "/v1/sequences/a%2Fb/ids", 400, httpapi.CodeInvalidName},
		{"POST", "/v1/sequences/nosuch/ids", 404, httpapi.CodeUnknownSequence},
		{"GET", "/v1/sequences/nosuch", 404, httpapi.CodeUnknownSequence},
		{"GET", "/v1/sequences/b@d", 400, httpapi.CodeInvalidName},
		{"POST", "/v1/sequences/nosuch/recycle", 400, httpapi.CodeBadRequest}, // empty body
		{"GET", "/v1/sequences/orders/ids", 405, httpapi.CodeMethodNotAllowed},
		{"PUT", "/v1/sequences/orders", 405, httpapi.CodeMethodNotAllowed},
		{"DELETE", "/v1/sequences/orders", 403, httpapi.CodeForbidden}, // no admin token: admin routes are off
		{"GET", "/v2/nothing", 404, httpapi.CodeNotFound},
	}
	for _, tt := range tests {
		code, hdr, body := r.call(tt.method, tt.path, "", "")
		wantError(t, tt.method+" "+tt.path, code, body, tt.status, tt.code)
		// No internals: where the state lives, which servers hold it.
		for _, secret := range append([]string{e.root, "znode", "zk: ", "zookeeper/", "goroutine"}, e.servers...) {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s %s: the answer shows %q: %s", tt.method, tt.path, secret, body)
			}
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: Content-Type %q, want JSON", tt.method, tt.path, ct)
		}
		if tt.status == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tt.method, tt.path)
		}
	}
}

func TestIDsAtCeilingAndExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("capped", seqzk.Registration{}, 10)
	e.create("small", seqzk.Registration{End: 5}, 5)
	r := e.replica(httpapi.Options{}, sequence.Options{CeilingWait: 200 * time.Millisecond})

	// Fewer IDs than asked for: the ten below the ceiling, not an error.
	if got := r.ids("capped", 15); got.String() != "1:10" {
		t.Fatalf("count=15 below a ceiling of 10: %v, want 1:10", got)
	}
	code, hdr, body := r.call("POST", "/v1/sequences/capped/ids", "", "")
	wantError(t, "at the ceiling", code, body, 503, httpapi.CodeCeilingReached)
	if hdr.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	// The primary raises the ceiling: IDs flow again, from 11.
	if _, err := e.admin.Keeper().Raise(context.Background(), "capped", 20); err != nil {
		t.Fatal(err)
	}
	if got := r.ids("capped", 1); got.String() != "11" {
		t.Fatalf("after the raise: %v, want 11", got)
	}

	if got := r.ids("small", 5); got.String() != "1:5" {
		t.Fatalf("small: %v", got)
	}
	code, _, body = r.call("POST", "/v1/sequences/small/ids", "", "")
	wantError(t, "space used up", code, body, 409, httpapi.CodeExhausted)
}

func TestRecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("r", seqzk.Registration{}, 1000)
	rep := e.replica(httpapi.Options{}, sequence.Options{})
	if got := rep.ids("r", 10); got.String() != "1:10" {
		t.Fatalf("ids: %v", got)
	}
	code, _, body := rep.call("POST", "/v1/sequences/r/recycle", "", `{"sequence":"r","ranges":[[3,5],[7]]}`)
	if code != 200 || !strings.Contains(string(body), `"recycled":4`) {
		t.Fatalf("recycle: %d %s", code, body)
	}
	d, err := httpapi.DescribeSequence(context.Background(), e.admin, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got := sequence.Ranges(d.Recycled).String(); got != "3:5 7" {
		t.Fatalf("recycled in ZooKeeper: %q, want 3:5 7", got)
	}

	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"again", `{"ranges":[[3,5]]}`, 409, httpapi.CodeNotHandedOut},
		{"never issued", `{"ranges":[[999999,1000000]]}`, 409, httpapi.CodeNotHandedOut},
		{"zero", `{"ranges":[[0,2]]}`, 400, httpapi.CodeBadPush},
		{"reversed", `{"ranges":[[9,8]]}`, 400, httpapi.CodeBadPush},
		{"overlapping", `{"ranges":[[8,9],[9,9]]}`, 400, httpapi.CodeBadPush},
		{"empty", `{"ranges":[]}`, 400, httpapi.CodeBadRequest},
		{"three numbers", `{"ranges":[[1,2,3]]}`, 400, httpapi.CodeBadRequest},
		{"not numbers", `{"ranges":[["a","b"]]}`, 400, httpapi.CodeBadRequest},
		{"too big", `{"ranges":[[1,99999999999999999999]]}`, 400, httpapi.CodeBadRequest},
		{"unknown field", `{"ranges":[[8,8]],"ids":[1]}`, 400, httpapi.CodeBadRequest},
		{"other sequence", `{"sequence":"q","ranges":[[8,8]]}`, 400, httpapi.CodeBadRequest},
		{"two objects", `{"ranges":[[8,8]]}{}`, 400, httpapi.CodeBadRequest},
		{"not json", `8:9`, 400, httpapi.CodeBadRequest},
	}
	for _, tt := range tests {
		code, _, body := rep.call("POST", "/v1/sequences/r/recycle", "", tt.body)
		wantError(t, tt.name, code, body, tt.status, tt.code)
	}
	code, _, body = rep.call("POST", "/v1/sequences/none/recycle", "", `{"ranges":[[1,1]]}`)
	wantError(t, "unknown sequence", code, body, 404, httpapi.CodeUnknownSequence)
	// A 404 tells the caller what to do, not where the state lives.
	if want := `sequence \"none\" does not exist: check its name`; !strings.Contains(string(body), want) || strings.Contains(string(body), "/all-sequences") || strings.Contains(string(body), "znode") {
		t.Errorf("unknown sequence: %s; want %s and no znode path", body, want)
	}

	// The recycled IDs come back before fresh ones (the allocator's next
	// batch starts with them).
	if err := rep.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := e.replica(httpapi.Options{}, sequence.Options{})
	if got := again.ids("r", 4); got.String() != "3:5 7" {
		t.Fatalf("after recycle: %v, want the recycled 3:5 7", got)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("t", seqzk.Registration{}, 1000)
	r := e.replica(httpapi.Options{Token: "s3cret-token"}, sequence.Options{})
	for _, path := range []string{"/v1/sequences/t/ids", "/v1/sequences", "/v1/status", "/metrics"} {
		method := "GET"
		if strings.HasSuffix(path, "/ids") {
			method = "POST"
		}
		for _, tok := range []string{"", "wrong", "s3cret-token-longer", "s3cret-toke"} {
			code, hdr, body := r.call(method, path, tok, "")
			wantError(t, fmt.Sprintf("%s with token %q", path, tok), code, body, 401, httpapi.CodeUnauthorized)
			if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: 401 without WWW-Authenticate: Bearer", path)
			}
			if strings.Contains(string(body), "s3cret") {
				t.Errorf("%s: the answer leaks the token: %s", path, body)
			}
		}
		if code, _, body := r.call(method, path, "s3cret-token", ""); code != 200 {
			t.Errorf("%s with the token: %d %s", path, code, body)
		}
	}
	// The scheme is case-insensitive (RFC 7235); other schemes are refused.
	for auth, want := range map[string]int{"bearer s3cret-token": 200, "Basic s3cret-token": 401, "s3cret-token": 401} {
		req, _ := http.NewRequest("GET", r.ts.URL+"/v1/sequences", nil)
		req.Header.Set("Authorization", auth)
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
	for _, path := range []string{"/livez", "/healthz", "/readyz"} {
		if code, _, body := r.call("GET", path, "", ""); code != 200 {
			t.Errorf("%s without a token: %d %s, want 200 (probes carry no token)", path, code, body)
		}
	}
}

func TestListDescribeStatusReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("plain", seqzk.Registration{Start: 100}, 199)
	if err := e.admin.Register(context.Background(), "waiting", seqzk.Registration{}); err != nil {
		t.Fatal(err)
	}
	conn := e.session()
	legacy := make([]byte, 8)
	binary.BigEndian.PutUint64(legacy, 41)
	for name, data := range map[string][]byte{"legacy": legacy, "broken": []byte("seqkeeper-sequence v1\nnext x\n"), "bad name!": nil} {
		if _, err := conn.Session().Create(context.Background(), e.root+"/"+name, data, 0); err != nil {
			t.Fatal(err)
		}
	}
	ready := errors.New("store unreachable")
	var mu sync.Mutex
	r := e.replica(httpapi.Options{
		Status: func(context.Context, httpapi.StatusQuery) httpapi.StatusView {
			return httpapi.StatusView{Replica: httpapi.ReplicaView{ID: "replica-1"}, ZooKeeperState: "has_session", Allocators: []httpapi.AllocatorStatus{}}
		},
		Ready: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return ready
		},
	}, sequence.Options{})
	r.ids("plain", 10)

	code, _, body := r.call("GET", "/v1/sequences", "", "")
	if code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
	var list struct{ Sequences []httpapi.SequenceSummary }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, s := range list.Sequences {
		kinds[s.Name] = s.Kind + "/" + s.Health
	}
	want := map[string]string{
		"bad name!": "invalid/broken", "broken": "corrupt/broken", "legacy": "legacy/legacy",
		"plain": "sequence/at_ceiling", "waiting": "uninitialised/waiting",
	}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("list kinds: %v\nwant %v\n%s", kinds, want, body)
	}

	code, _, body = r.call("GET", "/v1/sequences/plain", "", "")
	var d httpapi.SequenceDetail
	if err := json.Unmarshal(body, &d); code != 200 || err != nil {
		t.Fatalf("describe: %d %s %v", code, body, err)
	}
	// The allocator took a batch of 100 (all there is below 199) and
	// handed out 10: ZooKeeper sees next 200.
	if d.Start != 100 || d.Next != 200 || d.Ceiling != 199 || d.Available != 0 || d.Health != httpapi.HealthAtCeiling {
		t.Fatalf("describe plain: %+v", d)
	}
	code, _, body = r.call("GET", "/v1/sequences/legacy", "", "")
	if code != 200 || !strings.Contains(string(body), `"next":42`) || !strings.Contains(string(body), `"kind":"legacy"`) {
		t.Fatalf("describe legacy: %d %s", code, body)
	}
	code, _, body = r.call("GET", "/v1/sequences/broken", "", "")
	wantError(t, "describe corrupt", code, body, 500, httpapi.CodeCorrupt)

	if code, _, body := r.call("GET", "/v1/status", "", ""); code != 200 || !strings.Contains(string(body), `"replica":{"id":"replica-1"}`) {
		t.Fatalf("status: %d %s", code, body)
	}
	// Which sequences the reserve lists: a value it does not know, or too
	// many names, is refused.
	code, _, body = r.call("GET", "/v1/status?sequences=some", "", "")
	wantError(t, "GET /v1/status?sequences=some", code, body, 400, httpapi.CodeBadRequest)
	code, _, body = r.call("GET", "/v1/status?sequences=unhealthy&name=plain", "", "")
	if code != 200 {
		t.Fatalf("GET /v1/status?sequences=unhealthy&name=plain: %d %s", code, body)
	}
	code, _, body = r.call("GET", "/v1/status?name="+strings.Repeat("a&name=", 1000)+"a", "", "")
	wantError(t, "GET /v1/status with 1,001 names", code, body, 400, httpapi.CodeBadRequest)
	code, _, body = r.call("GET", "/readyz", "", "")
	wantError(t, "readyz", code, body, 503, httpapi.CodeNotReady)
	mu.Lock()
	ready = nil
	mu.Unlock()
	if code, _, body := r.call("GET", "/readyz", "", ""); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if code, _, body := r.call("GET", "/healthz", "", ""); code != 200 || !strings.Contains(string(body), "ok") {
		t.Fatalf("healthz: %d %s", code, body)
	}

	// Without a Status func, the status page shows the allocators.
	if _, err := e.admin.Keeper().Raise(context.Background(), "plain", 1000); err != nil {
		t.Fatal(err)
	}
	plain := e.replica(httpapi.Options{}, sequence.Options{})
	plain.ids("plain", 1)
	code, _, body = plain.call("GET", "/v1/status", "", "")
	if code != 200 || !strings.Contains(string(body), `"allocators":[{"sequence":"plain","batches":1`) {
		t.Fatalf("default status: %d %s", code, body)
	}
}

func TestListMissingRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.replica(httpapi.Options{}, sequence.Options{})
	if err := e.session().Session().Delete(context.Background(), e.root, zkclient.AnyVersion); err != nil {
		t.Fatal(err)
	}
	code, _, body := r.call("GET", "/v1/sequences", "", "")
	wantError(t, "list without a root", code, body, 404, httpapi.CodeUnknownSequence)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("m", seqzk.Registration{}, 100_000)
	e.create("n", seqzk.Registration{}, 100_000)
	r := e.replica(httpapi.Options{}, sequence.Options{})
	top := e.replica(httpapi.Options{TopSequences: 1}, sequence.Options{})
	for _, rep := range []*replica{r, top} {
		rep.ids("m", 100)
		rep.ids("m", 1)
		rep.ids("n", 3)
		rep.call("POST", "/v1/sequences/m/recycle", "", `{"ranges":[[5,6]]}`)
		rep.call("POST", "/v1/sequences/nosuch/ids", "", "")
	}
	code, _, body := r.call("GET", "/metrics", "", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		"seqkeeper_ids_served_total 104",
		"seqkeeper_ids_recycled_total 2",
		`seqkeeper_http_request_duration_seconds_count{code="200",route="POST /v1/sequences/{name}/ids"} 3`,
		`seqkeeper_http_request_duration_seconds_count{code="404",route="POST /v1/sequences/{name}/ids"} 1`,
		"seqkeeper_allocators 2",
		"seqkeeper_allocator_takes_total ",
		"seqkeeper_allocator_waits_total ",
		"seqkeeper_zookeeper_requests_total ",
		"seqkeeper_cas_conflicts_total 0",
		"seqkeeper_zookeeper_retries_total 0",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// By default no series names a sequence: their number does not grow
	// with the sequences.
	if strings.Contains(string(body), `sequence="`) {
		t.Errorf("per-sequence series without TopSequences:\n%s", body)
	}
	// With TopSequences 1, the sequence that served the most, only.
	_, _, body = top.call("GET", "/metrics", "", "")
	if !strings.Contains(string(body), `seqkeeper_sequence_ids_served_total{sequence="m"} 101`) ||
		strings.Contains(string(body), `sequence="n"`) || strings.Contains(string(body), `sequence="nosuch"`) {
		t.Errorf("TopSequences 1: want series for m only:\n%s", body)
	}

	// A second Server on the same registry is refused, not half-built.
	_, err := httpapi.New(httpapi.Options{Sequences: e.client(e.session(), sequence.Options{}), Registry: r.reg})
	if err == nil || !strings.Contains(err.Error(), "register metrics") {
		t.Fatalf("second Server on one registry: %v", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	zc := e.session()
	for name, opts := range map[string]httpapi.Options{
		"no sequences": {},
		"bad count":    {Sequences: e.client(zc, sequence.Options{}), MaxCount: -1},
		"bad token":    {Sequences: e.client(zc, sequence.Options{}), Token: "a b"},
		"bad batches":  {Sequences: e.client(zc, sequence.Options{}), Allocator: sequence.AllocatorOptions{MinBatch: 10, InitialBatch: 5}},
	} {
		if _, err := httpapi.New(opts); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// ledger checks that no ID is handed out twice.
type ledger struct {
	mu  sync.Mutex
	all []sequence.Range
}

func (l *ledger) add(rs sequence.Ranges) {
	l.mu.Lock()
	l.all = append(l.all, rs...)
	l.mu.Unlock()
}

// check fails on any ID held twice and returns the number of IDs.
func (l *ledger) check(t testing.TB) int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := slices.Clone(l.all)
	slices.SortFunc(rs, func(a, b sequence.Range) int { return int(a.Start - b.Start) })
	var n int64
	for i, r := range rs {
		if i > 0 && r.Start <= rs[i-1].End {
			t.Fatalf("ID handed out twice: %v and %v", rs[i-1], r)
		}
		n += r.Len()
	}
	return n
}

func TestConcurrentRequestsAcrossReplicasAreUnique(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("hot", seqzk.Registration{}, 1<<40)
	small := sequence.AllocatorOptions{InitialBatch: 50, MinBatch: 10, MaxBatch: 400, BatchDuration: 20 * time.Millisecond}
	replicas := []*replica{
		e.replica(httpapi.Options{Allocator: small}, sequence.Options{}),
		e.replica(httpapi.Options{Allocator: small}, sequence.Options{}),
	}
	var l ledger
	var wg sync.WaitGroup
	var want int64
	var wantMu sync.Mutex
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := replicas[g%len(replicas)]
			var mine int64
			for i := range 150 {
				count := 1 + (g*7+i*13)%40
				code, _, body := r.call("POST", fmt.Sprintf("/v1/sequences/hot/ids?count=%d", count), "", "")
				var got httpapi.IDsResponse
				if err := json.Unmarshal(body, &got); code != 200 || err != nil {
					t.Errorf("goroutine %d: %d %s", g, code, body)
					return
				}
				rs := sequence.Ranges(got.Ranges)
				if rs.Count() != int64(count) {
					t.Errorf("asked %d, got %d: %v", count, rs.Count(), rs)
				}
				if norm, err := sequence.NormalizeRanges(rs); err != nil || norm.String() != rs.String() {
					t.Errorf("answer not ascending and coalesced: %v", rs)
				}
				l.add(rs)
				mine += int64(count)
			}
			wantMu.Lock()
			want += mine
			wantMu.Unlock()
		}()
	}
	wg.Wait()
	if n := l.check(t); n != want {
		t.Fatalf("ledger holds %d IDs, want %d", n, want)
	}
}

func TestClosePushesBackUnusedIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("c", seqzk.Registration{}, 1000)
	e.create("d", seqzk.Registration{}, 1000)
	r := e.replica(httpapi.Options{Allocator: sequence.AllocatorOptions{InitialBatch: 100}}, sequence.Options{})
	var l ledger
	l.add(r.ids("c", 7))
	l.add(r.ids("c", 1))
	d := r.ids("d", 3)

	if err := r.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, _, body := r.call("POST", "/v1/sequences/c/ids", "", "")
	wantError(t, "ids after Close", code, body, 503, httpapi.CodeShuttingDown)
	code, _, body = r.call("GET", "/readyz", "", "")
	wantError(t, "readyz after Close", code, body, 503, httpapi.CodeNotReady)
	if err := r.srv.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Nothing is lost: every ID below next was either answered or is
	// recycled, and nothing is both.
	for name, answered := range map[string]sequence.Ranges{"c": nil, "d": d} {
		det, err := httpapi.DescribeSequence(context.Background(), e.admin, name)
		if err != nil {
			t.Fatal(err)
		}
		var lg ledger
		if name == "c" {
			lg.add(l.all)
		} else {
			lg.add(answered)
		}
		lg.add(sequence.Ranges(det.Recycled))
		if n := lg.check(t); n != det.Next-1 {
			t.Fatalf("%s: answered + recycled = %d IDs, next-1 = %d (recycled %v): IDs were lost", name, n, det.Next-1, sequence.Ranges(det.Recycled))
		}
	}
}

// BenchmarkHTTPIDs measures the HTTP API on loopback from 8 concurrent
// callers, one request per iteration:
//
//	go test -run '^$' -bench BenchmarkHTTPIDs -benchtime 5s ./httpapi/
func BenchmarkHTTPIDs(b *testing.B) {
	for _, count := range []int{1, 100} {
		b.Run(fmt.Sprintf("count=%d/callers=8", count), func(b *testing.B) {
			e := newEnv(b)
			e.create("bench", seqzk.Registration{}, 1<<60)
			r := e.replica(httpapi.Options{Allocator: sequence.AllocatorOptions{InitialBatch: 10_000, MaxBatch: 1_000_000}}, sequence.Options{})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			url := fmt.Sprintf("%s/v1/sequences/bench/ids?count=%d", r.ts.URL, count)
			r.ids("bench", 1) // warm up: the first batch

			const callers = 8
			lat := make([][]time.Duration, callers)
			var next sync.Mutex
			left := b.N
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						next.Lock()
						if left == 0 {
							next.Unlock()
							return
						}
						left--
						next.Unlock()
						t0 := time.Now()
						resp, err := client.Post(url, "", nil)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			b.ReportMetric(float64(len(all)*count)/elapsed.Seconds(), "IDs/s")
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkIDRouteVsBare runs the same load generator (8 callers on
// keep-alive connections, single-ID requests) against the ID route and
// against a bare net/http handler that returns a counter in the same JSON,
// alternating rounds of 5,000 requests, and reports the route's requests
// per second as a fraction of the bare handler's (ratio; 1 = as fast):
//
//	go test -run '^$' -bench BenchmarkIDRouteVsBare -benchtime 10x ./httpapi/
func BenchmarkIDRouteVsBare(b *testing.B) {
	e := newEnv(b)
	e.create("bench", seqzk.Registration{}, 1<<60)
	r := e.replica(httpapi.Options{Allocator: sequence.AllocatorOptions{InitialBatch: 100_000, MaxBatch: 1_000_000}}, sequence.Options{})
	var n atomic.Int64
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"sequence\":\"bench\",\"ranges\":[[%d,%d]]}\n", id, id)
	}))
	defer bare.Close()
	const callers, perRound = 8, 5_000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
	round := func(url string) float64 {
		var left atomic.Int64
		left.Store(perRound)
		start := time.Now()
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					resp, err := client.Post(url, "", nil)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("%s: status %d", url, resp.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		return perRound / time.Since(start).Seconds()
	}
	route, flat := r.ts.URL+"/v1/sequences/bench/ids", bare.URL+"/v1/sequences/bench/ids"
	round(route) // warm up both: connections, the first batch
	round(flat)
	var ratios []float64
	var routeRate, bareRate float64
	b.ResetTimer()
	for i := range b.N {
		var rr, br float64
		if i%2 == 0 { // alternate which goes first
			rr, br = round(route), round(flat)
		} else {
			br, rr = round(flat), round(route)
		}
		ratios = append(ratios, rr/br)
		routeRate += rr
		bareRate += br
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio-median")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(routeRate/float64(b.N), "route-req/s")
	b.ReportMetric(bareRate/float64(b.N), "bare-req/s")
}

// The API is strict about its query: a parameter a
// route does not take is refused, naming it, rather than ignored (?n=5
// returned one ID).
func TestUnknownQueryParameterIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("q", seqzk.Registration{}, 1000)
	rep := e.replica(httpapi.Options{}, sequence.Options{})
	for _, tc := range []struct{ method, path, bad string }{
		{"POST", "/v1/sequences/q/ids?n=5", "n"},
		{"POST", "/v1/sequences/q/ids?count=2&cout=5", "cout"},
		{"GET", "/v1/sequences?limt=1", "limt"},
		{"GET", "/v1/sequences/q?verbose=1", "verbose"},
	} {
		code, _, body := rep.call(tc.method, tc.path, "", "")
		wantError(t, tc.path, code, body, 400, httpapi.CodeBadRequest)
		if !strings.Contains(string(body), `unknown query parameter \"`+tc.bad+`\"`) {
			t.Errorf("%s: %s; want the parameter named", tc.path, body)
		}
	}
	if got := rep.ids("q", 5); got.Count() != 5 {
		t.Fatalf("?count=5: %v", got)
	}
}
