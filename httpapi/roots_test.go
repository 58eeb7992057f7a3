package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// A Server of several roots: each root's routes under /v1/roots/{root}/,
// each root's own sequences (the same name is two sequences), the
// unrooted form refused with root_required, an unknown root with
// unknown_root, the tokens checked and replaced on every root, the
// process's status, and every root's metrics labelled, all through the
// OpenAPI validator.
func TestServerOfSeveralRoots(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var named []httpapi.NamedServer
	envs := map[string]*env{}
	for _, name := range []string{"orders", "billing"} {
		e := newEnv(t)
		e.create("ids", seqzk.Registration{Start: map[string]int64{"orders": 1, "billing": 1_000_000}[name]}, 1<<40)
		srv, err := httpapi.New(httpapi.Options{Sequences: e.client(e.session(), sequence.Options{}), Registry: reg,
			MetricLabels: prometheus.Labels{"root": name}, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, httpapi.NamedServer{Name: name, Server: srv})
		envs[name] = e
	}
	front, err := httpapi.New(httpapi.Options{Roots: named, Registry: reg, MetricLabels: prometheus.Labels{"root": ""}, Token: "tok",
		Status: func(context.Context, httpapi.StatusQuery) httpapi.StatusView {
			v := httpapi.StatusView{Replica: httpapi.ReplicaView{ID: "r1"}, ZooKeeperSession: "0x1", ZooKeeperState: "has_session",
				Store: httpapi.StoreView{Healthy: true}, Allocators: []httpapi.AllocatorStatus{}, Handovers: []httpapi.HandoverView{}}
			one := v
			one.Store.URL = "file:///o"
			v.Roots = []httpapi.RootStatusView{{Name: "orders", Root: "/o", StatusView: one}}
			return v
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(front)
	t.Cleanup(func() {
		ts.Close()
		if err := front.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	r := &replica{e: envs["orders"], srv: front, ts: ts, reg: reg, client: apitest.Client(t, ts.Client())}

	take := func(root string) int64 {
		t.Helper()
		code, _, body := r.call("POST", "/v1/roots/"+root+"/sequences/ids/ids?count=2", "tok", "")
		var got httpapi.IDsResponse
		if code != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got.Ranges) == 0 {
			t.Fatalf("take from %s: %d %s", root, code, body)
		}
		return got.Ranges[0].Start
	}
	if o, b := take("orders"), take("billing"); o >= 1_000_000 || b < 1_000_000 {
		t.Fatalf("orders gave %d, billing %d: each root's own sequence wanted (orders from 1, billing from 1,000,000)", o, b)
	}
	for _, tc := range []struct {
		method, path, token string
		code                int
		want                string
	}{
		{"POST", "/v1/sequences/ids/ids?count=1", "tok", 404, `"root_required"`},
		{"GET", "/v1/sequences", "tok", 404, "roots: billing, orders"},
		{"GET", "/v1/history", "tok", 404, `"root_required"`},
		{"GET", "/v1/roots/nosuch/sequences", "tok", 404, `"unknown_root"`},
		{"GET", "/v1/roots/orders/sequences", "", 401, `"unauthorized"`},
		{"PUT", "/v1/roots/orders/sequences/ids", "tok", 405, "GET, DELETE"},
		{"GET", "/v1/roots/billing/sequences/ids", "tok", 200, `"start":1000000`},
		{"GET", "/v1/status", "tok", 200, `"roots":[{"name":"orders","root":"/o"`},
		{"GET", "/readyz", "", 200, `"ready":true`},
	} {
		code, _, body := r.call(tc.method, tc.path, tc.token, "")
		if code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s; want %d with %s", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
	code, _, body := r.call("GET", "/metrics", "tok", "")
	for _, want := range []string{`seqkeeper_ids_served_total{root="orders"} 2`, `seqkeeper_ids_served_total{root="billing"} 2`,
		`seqkeeper_http_request_duration_seconds_count{code="200",root="orders",route="POST /v1/sequences/{name}/ids"} 1`} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics: %d; want %s in:\n%s", code, want, body)
		}
	}
	if err := front.SetTokens([]string{"new"}, nil); err != nil {
		t.Fatal(err)
	}
	if code, _, body := r.call("GET", "/v1/roots/billing/sequences/ids", "new", ""); code != 200 {
		t.Errorf("the new token on a root: %d %s", code, body)
	}
	if code, _, _ := r.call("GET", "/v1/roots/billing/sequences/ids", "tok", ""); code != 401 {
		t.Errorf("the old token on a root after SetTokens: %d; want 401", code)
	}
}

// A Server of one root answers its rooted form under its name too.
func TestServerOfOneRootAnswersItsName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("ids", seqzk.Registration{}, 1<<40)
	r := e.replica(httpapi.Options{Name: "main"}, sequence.Options{})
	if code, _, body := r.call("POST", "/v1/roots/main/sequences/ids/ids?count=3", "", ""); code != 200 {
		t.Fatalf("rooted take: %d %s", code, body)
	}
	if code, _, body := r.call("GET", "/v1/roots/other/status", "", ""); code != 404 || !strings.Contains(string(body), `"unknown_root"`) {
		t.Fatalf("another root: %d %s; want 404 unknown_root", code, body)
	}
	r.ids("ids", 1) // the unrooted form still works
}
