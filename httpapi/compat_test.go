package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The compatibility routes (a way in for Leaf and Tinyid users),
// with requests shaped as their clients send them: Leaf's a bare GET of
// /api/segment/get/{key}, Tinyid's a GET (or a POST with a form body) of
// nextIdSimple with bizType, batchSize and its token in the query. They
// hand out the sequence's IDs, unique with the /v1 route's, behind the
// same token.
func TestCompatibilityRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("orders", seqzk.Registration{}, 100_000)
	r := e.replica(httpapi.Options{Token: "T"}, sequence.Options{})
	seen := map[int64]string{}
	ids := func(what, body string) {
		t.Helper()
		for _, f := range strings.Split(body, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q is not a number: %q", what, f, body)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s: ID %d handed out again (first by %s)", what, id, prev)
			}
			seen[id] = what
		}
	}
	expect := func(what string, status int, h http.Header, body []byte, wantStatus int, wantIn string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(string(body), wantIn) {
			t.Fatalf("%s: %d %q; want %d with %q", what, status, body, wantStatus, wantIn)
		}
		if status == 200 && h.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("%s: Content-Type %q; want text/plain", what, h.Get("Content-Type"))
		}
	}

	// Leaf.
	status, h, body := r.call("GET", "/api/segment/get/orders?token=T", "", "")
	expect("leaf", status, h, body, 200, "")
	ids("leaf", string(body))
	status, h, body = r.call("GET", "/api/segment/get/orders", "T", "")
	expect("leaf with the header", status, h, body, 200, "")
	ids("leaf with the header", string(body))
	status, h, body = r.call("GET", "/api/segment/get/orders", "", "")
	expect("leaf without a token", status, h, body, 401, "?token=")
	status, h, body = r.call("GET", "/api/segment/get/orders?token=T", "wrong", "")
	expect("leaf with a wrong header and a right query token", status, h, body, 401, "unauthorized")
	status, h, body = r.call("GET", "/api/segment/get/missing?token=T", "", "")
	expect("leaf, unknown key", status, h, body, 404, `sequence \"missing\" does not exist`)
	status, h, body = r.call("GET", "/api/segment/get/-bad?token=T", "", "")
	expect("leaf, invalid key", status, h, body, 400, `\"-bad\"`)
	status, h, body = r.call("GET", "/api/segment/get/orders?token=T&step=5", "", "")
	expect("leaf, unknown parameter", status, h, body, 400, `\"step\"`)

	// Tinyid.
	status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?bizType=orders&token=T", "", "")
	expect("tinyid", status, h, body, 200, "")
	ids("tinyid", string(body))
	status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?bizType=orders&batchSize=10&token=T", "", "")
	expect("tinyid batch", status, h, body, 200, ",")
	if n := strings.Count(string(body), ",") + 1; n != 10 {
		t.Fatalf("tinyid batchSize=10: %d IDs: %q", n, body)
	}
	ids("tinyid batch", string(body))
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	status, h, body = r.callWith("POST", "/tinyid/id/nextIdSimple", form, "bizType=orders&batchSize=3&token=T")
	expect("tinyid POST form", status, h, body, 200, ",")
	ids("tinyid POST form", string(body))
	status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?bizType=orders&batchSize=20000&token=T", "", "")
	expect("tinyid above the limit", status, h, body, 200, ",")
	if n := strings.Count(string(body), ",") + 1; n != 10000 {
		t.Fatalf("tinyid batchSize=20000: %d IDs; want the limit, 10000", n)
	}
	ids("tinyid above the limit", string(body))
	status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?bizType=missing&token=T", "", "")
	expect("tinyid, unknown bizType", status, h, body, 404, `sequence \"missing\" does not exist`)
	for _, c := range []struct{ query, want string }{
		{"batchSize=2&token=T", "needs bizType"},
		{"bizType=orders&batchSize=0&token=T", "batchSize"},
		{"bizType=orders&batchSize=x&token=T", "batchSize"},
		{"bizType=bad/name&token=T", `\"bad/name\"`},
	} {
		status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?"+c.query, "", "")
		expect("tinyid "+c.query, status, h, body, 400, c.want)
	}
	status, h, body = r.callWith("POST", "/tinyid/id/nextIdSimple", form, "bizType=orders&token=T&extra=1")
	expect("tinyid POST with an unknown form field", status, h, body, 400, `\"extra\"`)
	status, h, body = r.call("GET", "/tinyid/id/nextIdSimple?bizType=orders&token=wrong", "", "")
	expect("tinyid with a wrong token", status, h, body, 401, "unauthorized")

	// The /v1 route hands out the same sequence's IDs: none of those.
	status, _, body = r.call("POST", "/v1/sequences/orders/ids?count=5", "T", "")
	if status != 200 {
		t.Fatalf("v1 take: %d %s", status, body)
	}
	var got struct{ Ranges [][2]int64 }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for _, rg := range got.Ranges {
		for id := rg[0]; id <= rg[1]; id++ {
			if prev, dup := seen[id]; dup {
				t.Fatalf("v1 handed out %d, which %s handed out", id, prev)
			}
		}
	}
}
