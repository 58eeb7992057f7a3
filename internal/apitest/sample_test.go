package apitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type complaints struct {
	testing.TB
	mu   sync.Mutex
	list []string
}

func (c *complaints) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, fmt.Sprintf(format, args...))
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
	_, r, err := router()
	if err != nil {
		t.Fatal(err)
	}
	rec := &complaints{TB: t}
	v := (&Transport{t: rec, base: ts.Client().Transport, router: r}).Sampled(5, 10)
	c := &http.Client{Transport: v}
	for range 100 {
		resp, err := c.Post(ts.URL+"/v1/sequences/orders/ids", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// 99 drifted answers of one kind: the first 5, then the 15th, 25th,
	// ..., 95th (one in 10 after the first 5); then the new kind's first.
	if got, want := len(rec.list), 5+10+1; got != want {
		t.Fatalf("%d complaints, want %d: %q", got, want, rec.list)
	}
	if last := rec.list[len(rec.list)-1]; !strings.Contains(last, "-> 503") {
		t.Errorf("the new kind's drift was not caught: the last complaint is %q", last)
	}
}
