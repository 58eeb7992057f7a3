package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/apitest"
)

// recorder is a testing.TB that keeps the errors reported to it, so that
// a test can check the validator complains when it must.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// The validator must fail a test when the server drifts from the
// document: an undocumented field, route or status, or a request the
// document refuses answered with success. The server here is a plain
// handler that answers what each case needs; the package's users point
// the validator at the real one.
func TestValidatorCatchesDrift(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, path, body string
		status                   int
		answer                   string
		complaint                string // "" when the round trip is in the contract
	}{
		{"in the contract", "POST", "/v1/sequences/orders/ids?count=2", "", 200,
			`{"sequence":"orders","ranges":[[1,2]]}`, ""},
		{"documented error", "POST", "/v1/sequences/nosuch/ids", "", 404,
			`{"error":{"code":"unknown_sequence","message":"no"}}`, ""},
		{"refusal of a refused request", "POST", "/v1/sequences/orders/ids?count=0", "", 400,
			`{"error":{"code":"bad_request","message":"count"}}`, ""},
		{"undocumented field", "POST", "/v1/sequences/orders/ids", "", 200,
			`{"sequence":"orders","ranges":[[1,1]],"shard":3}`, "not what httpapi/openapi.json describes"},
		{"missing field", "GET", "/livez", "", 200, `{}`, "not what httpapi/openapi.json describes"},
		{"undocumented status", "GET", "/v1/sequences/orders", "", 418,
			`{"error":{"code":"internal","message":"teapot"}}`, "not what httpapi/openapi.json describes"},
		{"undocumented error code", "GET", "/v1/sequences/orders", "", 500,
			`{"error":{"code":"oops","message":"x"}}`, "not what httpapi/openapi.json describes"},
		{"undocumented route served", "GET", "/v1/secrets", "", 200, `{}`, "no such route in the document"},
		{"refused request accepted", "POST", "/v1/sequences/orders/ids?count=0", "", 200,
			`{"sequence":"orders","ranges":[[1,1]]}`, "instead of refusing it"},
		{"bad name accepted", "GET", "/v1/sequences/-x", "", 200, `{}`, "instead of refusing it"},
		{"unknown body field accepted", "POST", "/v1/sequences/orders/recycle", `{"ranges":[[1,1]],"all":true}`, 200,
			`{"sequence":"orders","recycled":1,"already_applied":false}`, "instead of refusing it"},
		{"refused with an unknown code", "POST", "/v1/sequences/orders/ids?count=0", "", 400,
			`{"error":{"code":"nope","message":"x"}}`, "does not list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer ts.Close()
			rec := &recorder{TB: t}
			c := apitest.Client(rec, ts.Client())
			req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != tc.answer {
				t.Errorf("the caller got %q, want the server's answer %q", got, tc.answer)
			}
			switch {
			case tc.complaint == "" && len(rec.errs) > 0:
				t.Errorf("complaints about a round trip in the contract: %q", rec.errs)
			case tc.complaint != "" && (len(rec.errs) == 0 || !strings.Contains(rec.errs[0], tc.complaint)):
				t.Errorf("want a complaint containing %q, got %q", tc.complaint, rec.errs)
			}
		})
	}
}

// A server marked as an earlier release (a rolling upgrade) is checked
// all the same, but what it answers outside the document is counted by
// Predated, not failed by Check.
func TestPredatedServersAreCountedApart(t *testing.T) {
	drift := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`) // /livez without its status
	})
	older := httptest.NewServer(drift)
	defer older.Close()
	apitest.Predates(strings.TrimPrefix(older.URL, "http://"))
	c := &http.Client{Transport: apitest.Wrap(http.DefaultTransport)}
	for range 2 {
		resp, err := c.Get(older.URL + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code := apitest.Check(); code != 0 {
		t.Fatalf("Check = %d after answers of a predated server only", code)
	}
	var got []string
	for k, n := range apitest.Predated() {
		got = append(got, fmt.Sprintf("%dx %s", n, k))
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "2x GET /livez -> 200: ") {
		t.Errorf("Predated = %q, want the two answers of /livez under one key", got)
	}
}

// A sampling Transport validates each kind's first round trips and then
// one in every, and a kind it has not seen (a status that only a fault
// brings) from its first round trip: drift there is caught however many
// alike round trips came before.
func TestSampledValidationCatchesANewKind(t *testing.T) {
	var calls int
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		switch {
		case calls == 100:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"no_such_code","message":"x"}}`)
		default:
			_, _ = io.WriteString(w, `{"sequence":"orders","ranges":[[1,1]],"shard":3}`) // undocumented field
		}
	}))
	defer ts.Close()
	rec := &recorder{TB: t}
	c := apitest.Client(rec, ts.Client())
	c.Transport = c.Transport.(*apitest.Transport).Sampled(5, 10)
	for range 100 {
		resp, err := c.Post(ts.URL+"/v1/sequences/orders/ids", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// 99 drifted answers of one kind: the first 5, then the 15th, 25th,
	// ..., 95th (one in 10 after the first 5); then the new kind's first.
	if got, want := len(rec.errs), 5+10+1; got != want {
		t.Fatalf("%d complaints, want %d: %q", got, want, rec.errs)
	}
	if last := rec.errs[len(rec.errs)-1]; !strings.Contains(last, "-> 503") {
		t.Errorf("the new kind's drift was not caught: the last complaint is %q", last)
	}
}
