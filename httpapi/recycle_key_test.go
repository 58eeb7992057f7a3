package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// recycle posts body to the recycle route of name with the given
// Idempotency-Key headers (none: no header) and returns the status and body.
func (r *replica) recycle(name, body string, keys ...string) (int, []byte) {
	r.e.t.Helper()
	h := http.Header{}
	for _, k := range keys {
		h.Add(httpapi.IdempotencyKeyHeader, k)
	}
	code, _, data := r.callWith("POST", "/v1/sequences/"+name+"/recycle", h, body)
	return code, data
}

// zkData reads the raw data of sequence name's znode.
func (e *env) zkData(name string) string {
	e.t.Helper()
	data, _, err := e.admin.ZK().Session().Get(context.Background(), e.root+"/"+name)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// A recycle whose caller timed out is retried with the same key after
// another worker took the recycled IDs: the retry is answered 200
// "already_applied" and changes nothing, through this replica or another.
// Without the key the retry would recycle the IDs again and the next take
// would hand them out a second time.
func TestRecycleWithIdempotencyKeyAppliesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("r", seqzk.Registration{}, 1000)
	rep := e.replica(httpapi.Options{}, sequence.Options{})
	if got := rep.ids("r", 10); got.String() != "1:10" {
		t.Fatalf("ids: %v", got)
	}
	const key = "0b6f7e2c-1d2a-4c3b-9e8f-123456789abc"
	answer := func(what string, code int, body []byte) httpapi.RecycleResponse {
		t.Helper()
		var got httpapi.RecycleResponse
		if code != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("%s: %d %s", what, code, body)
		}
		if got.Sequence != "r" || got.Recycled != 3 {
			t.Fatalf("%s: %s, want sequence r, recycled 3", what, body)
		}
		return got
	}
	code, body := rep.recycle("r", `{"ranges":[[3,5]]}`, key)
	if answer("first", code, body).AlreadyApplied || !strings.Contains(string(body), `"already_applied":false`) {
		t.Fatalf("first: %s, want already_applied false", body)
	}

	// Another worker takes the recycled IDs.
	worker := e.client(e.session(), sequence.Options{})
	if got, err := worker.Take(context.Background(), "r", 3); err != nil || got.String() != "3:5" {
		t.Fatalf("worker take = %s, %v; want the recycled 3:5", got, err)
	}
	before := e.zkData("r")

	other := e.replica(httpapi.Options{}, sequence.Options{})
	for i, rp := range []*replica{rep, other} {
		code, body := rp.recycle("r", `{"ranges":[[3,5]]}`, key)
		if !answer("retry", code, body).AlreadyApplied {
			t.Fatalf("retry %d: %s, want already_applied true", i, body)
		}
		if after := e.zkData("r"); after != before {
			t.Fatalf("retry %d changed the state:\n%s\nbecame\n%s", i, before, after)
		}
	}
	// The worker's IDs are not handed out again.
	got, err := e.client(e.session(), sequence.Options{}).Take(context.Background(), "r", 3)
	if err != nil || got.Contains(3) || got.Contains(4) || got.Contains(5) {
		t.Fatalf("next take = %s, %v; the worker's 3:5 must not come back", got, err)
	}

	// A request without a key behaves as before and says so.
	code, body = rep.recycle("r", `{"ranges":[[7,7]]}`)
	if code != 200 || !strings.Contains(string(body), `"recycled":1`) || !strings.Contains(string(body), `"already_applied":false`) {
		t.Fatalf("recycle without a key: %d %s", code, body)
	}
}

func TestRecycleIdempotencyKeyErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("r", seqzk.Registration{}, 1000)
	rep := e.replica(httpapi.Options{}, sequence.Options{})
	if got := rep.ids("r", 10); got.String() != "1:10" {
		t.Fatalf("ids: %v", got)
	}
	before := e.zkData("r")
	tests := []struct {
		name string
		keys []string
		want string
	}{
		{"empty", []string{""}, "it is empty"},
		{"too long", []string{strings.Repeat("k", 65)}, "it is 65 bytes long"},
		{"space", []string{"my key"}, "byte 3 is ' '"},
		{"slash", []string{"a/b"}, "byte 2 is '/'"},
		{"colon", []string{"urn:uuid:1"}, "byte 4 is ':'"},
		{"non-ASCII", []string{"cl\u00e9"}, "invalid push key"},
		{"two headers", []string{"a", "b"}, "2 headers; send exactly one"},
	}
	for _, tt := range tests {
		code, body := rep.recycle("r", `{"ranges":[[3,5]]}`, tt.keys...)
		wantError(t, tt.name, code, body, 400, httpapi.CodeBadRequest)
		if !strings.Contains(string(body), "Idempotency-Key") || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: %s, want the header named and %q", tt.name, body, tt.want)
		}
	}
	if after := e.zkData("r"); after != before {
		t.Fatalf("refused requests changed the state:\n%s\nbecame\n%s", before, after)
	}
	// Refused pushes with a key are refused as without one, and record
	// nothing: the same key then works for a valid push.
	code, body := rep.recycle("r", `{"ranges":[[999999,1000000]]}`, "k1")
	wantError(t, "never issued, keyed", code, body, 409, httpapi.CodeNotHandedOut)
	code, body = rep.recycle("r", `{"ranges":[[3,5]]}`, "k1")
	if code != 200 || !strings.Contains(string(body), `"already_applied":false`) {
		t.Fatalf("valid push after a refused one with the same key: %d %s", code, body)
	}
	code, body = rep.recycle("none", `{"ranges":[[1,1]]}`, "k1")
	wantError(t, "unknown sequence, keyed", code, body, 404, httpapi.CodeUnknownSequence)
}

// One curl must not hand out IDs twice: replica A holds
// a batch in its allocator and has served the first IDs of it; a recycle
// of IDs A holds but has not served yet, sent to replica B, was accepted
// and both replicas then handed them out. A replica now takes back only
// IDs it handed out itself: B refuses, and so does A for the IDs it still
// holds; A accepts what it served, once.
func TestRecycleOnlyWhatThisReplicaHandedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("r", seqzk.Registration{}, 100_000)
	a := e.replica(httpapi.Options{Allocator: sequence.AllocatorOptions{InitialBatch: 100}}, sequence.Options{})
	b := e.replica(httpapi.Options{}, sequence.Options{})
	served := a.ids("r", 7)
	if served.String() != "1:7" {
		t.Fatalf("a served %s", served)
	}
	before := e.zkData("r")
	// 8:9 are in a's allocator, issued in ZooKeeper, not handed out.
	for who, rp := range map[string]*replica{"the other replica": b, "the replica holding them": a} {
		code, body := rp.recycle("r", `{"ranges":[[8,9]]}`)
		wantError(t, "recycle through "+who, code, body, 409, httpapi.CodeNotHandedOut)
		if !strings.Contains(string(body), "were not handed out by this replica") {
			t.Errorf("recycle through %s: %s; want it to say why", who, body)
		}
	}
	// Nor what a served, through b.
	code, body := b.recycle("r", `{"ranges":[[3,4]]}`)
	wantError(t, "a's IDs through b", code, body, 409, httpapi.CodeNotHandedOut)
	if after := e.zkData("r"); after != before {
		t.Fatalf("refused recycles changed the state:\n%s\nbecame\n%s", before, after)
	}
	// a takes back what it served, once.
	if code, body := a.recycle("r", `{"ranges":[[3,4]]}`); code != 200 {
		t.Fatalf("recycle through a of what it served: %d %s", code, body)
	}
	code, body = a.recycle("r", `{"ranges":[[3,4]]}`)
	wantError(t, "the same IDs again", code, body, 409, httpapi.CodeNotHandedOut)
	// And the IDs a holds are handed out once: by a.
	next := a.ids("r", 2)
	if next.String() != "8:9" {
		t.Fatalf("a served %s next; want 8:9", next)
	}
}
