package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// withPrimary runs a real primary over e's root with a store on MinIO,
// and returns the admin service the admin routes use.
func (e *env) withPrimary() *httpapi.Operator {
	e.t.Helper()
	s3 := testenv.ObjectStore(e.t)
	b, err := persist.NewS3(context.Background(), persist.S3Config{Bucket: s3.Bucket, Endpoint: s3.Endpoint,
		Region: s3.Region, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		e.t.Fatal(err)
	}
	store, err := persist.NewStore(b, persist.StoreOptions{Buckets: 16, EpochCheckInterval: 100 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	zc := e.session()
	seqs, err := seqzk.NewClient(zc, seqzk.Options{Root: e.root, CeilingWait: time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := config.DefaultPrimary()
	cfg.MarkerPath = strings.TrimSuffix(e.root, "/all-sequences") + "/cluster"
	cfg.Runway, cfg.MinReserve, cfg.SweepInterval = time.Second, 100, 200*time.Millisecond
	p, err := primary.New(cfg, primary.Deps{Sequences: seqs, Store: store, Holder: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return &httpapi.Operator{Sequences: seqs, Store: store}
}

// Create and delete over HTTP, behind the admin token: a taker's token is
// refused, creating again with the same settings changes nothing, other
// settings conflict, and a sequence created again after a delete starts
// above every ID the deleted one handed out.
func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	svc := e.withPrimary()
	const taker, adm = "taker-token", "admin-token"
	r := e.replica(httpapi.Options{Token: taker, AdminToken: adm, Admin: svc}, sequence.Options{CeilingWait: 5 * time.Second})

	create := `{"name":"orders","start":1000,"max":1000000,"windows":0}`
	for _, tc := range []struct {
		token  string
		status int
		code   string
	}{{"", 401, httpapi.CodeUnauthorized}, {"wrong", 401, httpapi.CodeUnauthorized}, {taker, 403, httpapi.CodeForbidden}} {
		code, _, body := r.call("POST", "/v1/sequences", tc.token, create)
		wantError(t, "create with token "+tc.token, code, body, tc.status, tc.code)
		code, _, body = r.call("DELETE", "/v1/sequences/orders", tc.token, "")
		wantError(t, "delete with token "+tc.token, code, body, tc.status, tc.code)
	}

	code, hdr, body := r.call("POST", "/v1/sequences", adm, create)
	var got httpapi.CreateResponse
	if err := json.Unmarshal(body, &got); code != http.StatusCreated || err != nil ||
		got != (httpapi.CreateResponse{Sequence: "orders", Start: 1000, End: 1000000, Created: true}) || hdr.Get("Location") != "/v1/sequences/orders" {
		t.Fatalf("create: %d %s %s", code, hdr.Get("Location"), body)
	}
	if code, _, body := r.call("POST", "/v1/sequences", adm, create); code != 200 || !strings.Contains(string(body), `"created":false`) {
		t.Fatalf("create again with the same settings: %d %s", code, body)
	}
	code, _, body = r.call("POST", "/v1/sequences", adm, `{"name":"orders","start":5}`)
	wantError(t, "create with other settings", code, body, 409, httpapi.CodeExists)
	if !strings.Contains(string(body), "start 1000 (asked 5)") {
		t.Errorf("the conflict does not say what differs: %s", body)
	}
	for _, bad := range []string{`{"name":"orders","start":-1}`, `{"name":"x","max":3,"start":10}`, `{"name":"x","windows":5000}`, `{"name":"x","colour":"red"}`, `{}`, `[`} {
		code, _, body := r.call("POST", "/v1/sequences", adm, bad)
		if code != 400 {
			t.Errorf("create %s: %d %s, want 400", bad, code, body)
		}
	}

	// The admin token works on the taker's routes too; the primary
	// initialises the new sequence.
	code, _, body = r.call("POST", "/v1/sequences/orders/ids?count=10", adm, "")
	var ids httpapi.IDsResponse
	if err := json.Unmarshal(body, &ids); code != 200 || err != nil || ids.Ranges[0].Start != 1000 {
		t.Fatalf("take after create: %d %s", code, body)
	}
	before := sequence.Ranges(ids.Ranges)

	code, _, body = r.call("DELETE", "/v1/sequences/orders", adm, "")
	var del httpapi.DeleteResponse
	if err := json.Unmarshal(body, &del); code != 200 || err != nil || !del.Deleted || del.TombstoneCeiling < 1009 {
		t.Fatalf("delete: %d %s", code, body)
	}
	code, _, body = r.call("DELETE", "/v1/sequences/orders", adm, "")
	wantError(t, "delete again", code, body, 404, httpapi.CodeUnknownSequence)

	// Created again: it starts above the tombstone, whatever start it asks.
	if code, _, body := r.call("POST", "/v1/sequences", adm, `{"name":"orders","start":1000,"max":1000000}`); code != 201 {
		t.Fatalf("create after delete: %d %s", code, body)
	}
	code, _, body = r.call("POST", "/v1/sequences/orders/ids?count=10", taker, "")
	if err := json.Unmarshal(body, &ids); code != 200 || err != nil {
		t.Fatalf("take after re-create: %d %s", code, body)
	}
	for _, rg := range ids.Ranges {
		if rg.Start <= del.TombstoneCeiling {
			t.Fatalf("the re-created sequence handed out %v, at or below the tombstone %d (the old one handed out %v)", ids.Ranges, del.TombstoneCeiling, before)
		}
	}
}

// Without an admin token (or without an admin service) the admin routes
// are off; the server refuses an admin token equal to the taker's.
func TestAdminRoutesOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.replica(httpapi.Options{Token: "taker"}, sequence.Options{})
	code, _, body := r.call("POST", "/v1/sequences", "taker", `{"name":"x"}`)
	wantError(t, "create with admin routes off", code, body, 403, httpapi.CodeForbidden)
	if !strings.Contains(string(body), "http_admin_token") {
		t.Errorf("the refusal does not name the setting: %s", body)
	}
	zc := e.session()
	if _, err := httpapi.New(httpapi.Options{Sequences: e.client(zc, sequence.Options{}), Token: "same", AdminToken: "same"}); err == nil {
		t.Fatal("New accepted an admin token equal to the taker's")
	}
}
