package httpapi_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// GET /v1/sequences pages: limit, an opaque cursor, a name prefix and a
// health filter; following next_cursor visits every sequence once.
func TestListPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range []string{"a1", "a2", "a3", "b1", "b2"} {
		e.create(name, seqzk.Registration{}, 100)
	}
	if err := e.admin.Register(context.Background(), "a4", seqzk.Registration{}); err != nil { // waiting
		t.Fatal(err)
	}
	r := e.replica(httpapi.Options{}, sequence.Options{})
	get := func(query string) httpapi.ListResponse {
		t.Helper()
		code, _, body := r.call("GET", "/v1/sequences"+query, "", "")
		if code != 200 {
			t.Fatalf("GET /v1/sequences%s: %d %s", query, code, body)
		}
		var lr httpapi.ListResponse
		if err := json.Unmarshal(body, &lr); err != nil {
			t.Fatal(err)
		}
		return lr
	}
	names := func(lr httpapi.ListResponse) []string {
		var out []string
		for _, s := range lr.Sequences {
			out = append(out, s.Name)
		}
		return out
	}

	var all []string
	pages := 0
	for q := "?limit=2"; ; pages++ {
		lr := get(q)
		all = append(all, names(lr)...)
		if lr.NextCursor == "" {
			break
		}
		q = "?limit=2&cursor=" + lr.NextCursor
	}
	if want := []string{"a1", "a2", "a3", "a4", "b1", "b2"}; !slices.Equal(all, want) || pages != 2 {
		t.Fatalf("pages of 2: %v in %d more pages; want %v in 2", all, pages, want)
	}
	if got := names(get("?prefix=a&limit=3")); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("prefix a, limit 3: %v", got)
	}
	if lr := get("?prefix=b"); !slices.Equal(names(lr), []string{"b1", "b2"}) || lr.NextCursor != "" {
		t.Fatalf("prefix b: %v, cursor %q", names(lr), lr.NextCursor)
	}
	if got := names(get("?health=waiting")); !slices.Equal(got, []string{"a4"}) {
		t.Fatalf("health waiting: %v", got)
	}
	if got := names(get("")); len(got) != 6 {
		t.Fatalf("no parameters: %v", got)
	}
	for _, q := range []string{"?limit=0", "?limit=" + strconv.Itoa(httpapi.MaxListLimit+1), "?limit=x", "?health=sick", "?cursor=%21%21"} {
		code, _, body := r.call("GET", "/v1/sequences"+q, "", "")
		wantError(t, q, code, body, 400, httpapi.CodeBadRequest)
	}
}
