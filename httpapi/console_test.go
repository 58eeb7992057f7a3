package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The console's files are open (they hold no data), come with a
// Content-Security-Policy that allows this origin only, and load nothing
// from elsewhere; /ui redirects to /ui/.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.replica(httpapi.Options{Token: "s3cret-token"}, sequence.Options{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(r.ts.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d Location %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for path, wantType := range map[string]string{
		"/ui/": "text/html", "/ui/console.js": "text/javascript", "/ui/console.css": "text/css", "/ui/favicon.svg": "image/svg+xml",
	} {
		code, hdr, body := r.call("GET", path, "", "")
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), wantType) {
			t.Errorf("GET %s without a token: %d %q, want 200 %s", path, code, hdr.Get("Content-Type"), wantType)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self'", path, csp)
		}
		// Air-gapped: no absolute URL to anywhere (the SVG namespace is a
		// name, not a request).
		text := strings.ReplaceAll(string(body), "http://www.w3.org/2000/svg", "")
		for _, bad := range []string{"http://", "https://", "//cdn", "@import", "localStorage"} {
			if strings.Contains(text, bad) {
				t.Errorf("GET %s: the file mentions %q", path, bad)
			}
		}
		if path == "/ui/" && strings.Contains(text, "<script>") {
			t.Errorf("GET /ui/: an inline script, which the CSP forbids")
		}
	}
	code, _, body := r.call("GET", "/ui/nosuch.js", "", "")
	if code != http.StatusNotFound {
		t.Errorf("GET /ui/nosuch.js: %d %s, want 404", code, body)
	}
	// The data is not open.
	code, _, body = r.call("GET", "/v1/history", "", "")
	wantError(t, "GET /v1/history without the token", code, body, 401, httpapi.CodeUnauthorized)
}

// GET /v1/history: the rate this replica served and, on the primary, the
// shortest runway of the status' reserve; oldest first, bounded.
func TestHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create("h", seqzk.Registration{}, 1_000_000)
	var standby atomic.Bool
	status := func(_ context.Context, q httpapi.StatusQuery) httpapi.StatusView {
		v := httpapi.StatusView{Leading: !standby.Load()}
		if v.Leading {
			rv := httpapi.ReserveViewOf(primary.Status{Leading: true, Sequences: []primary.SequenceStatus{
				{Name: "h", RunwaySeconds: 4.5}, {Name: "slow", RunwaySeconds: 86400}, {Name: "z", RunwaySeconds: 60},
			}}, q)
			v.Reserve = &rv
		}
		return v
	}
	r := e.replica(httpapi.Options{Status: status}, sequence.Options{})
	history := func() httpapi.HistoryView {
		t.Helper()
		code, _, body := r.call("GET", "/v1/history", "", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/history: %d %s", code, body)
		}
		var v httpapi.HistoryView
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if h := history(); h.IntervalSeconds != 5 || len(h.Samples) != 0 || h.Samples == nil {
		t.Fatalf("history before the first sample: %+v, want an interval of 5 s and no samples ([])", h)
	}
	r.ids("h", 500)
	start := time.Now()
	httpapi.SampleHistory(r.srv, start.Add(time.Second))
	standby.Store(true)
	httpapi.SampleHistory(r.srv, start.Add(2*time.Second))
	h := history()
	if len(h.Samples) != 2 {
		t.Fatalf("%d samples, want 2: %+v", len(h.Samples), h)
	}
	first, second := h.Samples[0], h.Samples[1]
	if first.IDsPerSecond < 100 || !first.Leading || first.MinRunwaySeconds == nil || *first.MinRunwaySeconds != 4.5 || first.MinRunwaySequence != "h" {
		t.Errorf("first sample %+v: want ids_per_second >= 100 (500 IDs in about a second), leading, min runway 4.5 s of h", first)
	}
	if second.IDsPerSecond != 0 || second.Leading || second.MinRunwaySeconds != nil || !second.At.After(first.At) {
		t.Errorf("second sample %+v: want 0 IDs/s, a standby, no runway, after the first", second)
	}
	_, _, body := r.call("GET", "/v1/history", "", "")
	wantSnakeCaseKeys(t, body)
	if !strings.Contains(string(body), `"min_runway_seconds":null`) {
		t.Errorf("a standby's sample omits min_runway_seconds instead of null: %s", body)
	}

	// Bounded: the oldest samples go.
	for i := range httpapi.HistorySamples + 5 {
		httpapi.SampleHistory(r.srv, start.Add(time.Duration(3+i)*time.Second))
	}
	h = history()
	if len(h.Samples) != httpapi.HistorySamples {
		t.Fatalf("%d samples, want the last %d", len(h.Samples), httpapi.HistorySamples)
	}
	for i := 1; i < len(h.Samples); i++ {
		if !h.Samples[i].At.After(h.Samples[i-1].At) {
			t.Fatalf("samples out of order at %d: %v then %v", i, h.Samples[i-1].At, h.Samples[i].At)
		}
	}
	if last := h.Samples[len(h.Samples)-1].At; !last.Equal(start.Add(time.Duration(2+httpapi.HistorySamples+5) * time.Second).UTC()) {
		t.Errorf("last sample at %v, want the latest", last)
	}
}

// wantSnakeCaseKeys fails unless every key of the JSON doc is snake_case.
func wantSnakeCaseKeys(t *testing.T, doc []byte) {
	t.Helper()
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.ToLower(k) != k || strings.Contains(k, "-") {
					t.Errorf("key %q is not snake_case in %s", k, doc)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	walk(v)
}
