package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// setNonZero gives v a value other than its zero value. A field of a kind
// it does not know fails the test, so that a new field of the internal
// structs is looked at here, and its view written.
func setNonZero(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)))
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.CanInt():
		v.SetInt(7)
	case v.CanFloat():
		v.SetFloat(2.5)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	default:
		t.Fatalf("%s: no non-zero value for a field of type %s; teach setNonZero", name, v.Type())
	}
}

// everyFieldShows fails unless setting any one field of T changes the JSON
// of its view: the view keeps every field's information.
func everyFieldShows[T any](t *testing.T, view func(T) any) {
	t.Helper()
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var zero T
	base := marshal(view(zero))
	rt := reflect.TypeOf(zero)
	for i := range rt.NumField() {
		f := rt.Field(i)
		var v T
		setNonZero(t, rt.Name()+"."+f.Name, reflect.ValueOf(&v).Elem().Field(i))
		if got := marshal(view(v)); got == base {
			t.Errorf("%s.%s does not show in the view: %s", rt, f.Name, got)
		}
	}
}

func TestStatusViewsKeepEveryField(t *testing.T) {
	everyFieldShows(t, func(id election.Identity) any { return httpapi.ReplicaViewOf(id) })
	everyFieldShows(t, func(st election.Stats) any { return httpapi.ElectionViewOf(st) })
	all := httpapi.StatusQuery{Sequences: httpapi.SequencesAll}
	everyFieldShows(t, func(st primary.Status) any { return httpapi.ReserveViewOf(st, all) })
	everyFieldShows(t, func(s primary.SequenceStatus) any {
		return httpapi.ReserveViewOf(primary.Status{Sequences: []primary.SequenceStatus{s}}, all)
	})
}

// ReserveViewOf lists the sequences a GET /v1/status asks for, and sums
// up all of them whatever it lists.
func TestReserveViewChoosesSequences(t *testing.T) {
	st := primary.Status{Leading: true, Sequences: []primary.SequenceStatus{
		{Name: "a", Healthy: true, RunwaySeconds: 600},
		{Name: "b", Healthy: false, RunwaySeconds: 30, Problem: "p"},
		{Name: "c", Healthy: true, RunwaySeconds: 5},
		{Name: "d", Healthy: false, RunwaySeconds: 900, Problem: "q"},
	}}
	cases := []struct {
		q    httpapi.StatusQuery
		want []string
	}{
		{httpapi.StatusQuery{Sequences: httpapi.SequencesAll}, []string{"a", "b", "c", "d"}},
		{httpapi.StatusQuery{Sequences: httpapi.SequencesUnhealthy}, []string{"b", "d"}},
		{httpapi.StatusQuery{Sequences: httpapi.SequencesNone}, []string{}},
		{httpapi.StatusQuery{Sequences: httpapi.SequencesNone, Names: []string{"c", "zz"}}, []string{"c"}},
		{httpapi.StatusQuery{Sequences: httpapi.SequencesUnhealthy, Names: []string{"a", "b"}}, []string{"a", "b", "d"}},
	}
	for _, c := range cases {
		v := httpapi.ReserveViewOf(st, c.q)
		got := []string{}
		for _, s := range v.Sequences {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: sequences %v, want %v", c.q, got, c.want)
		}
		sum := v.Summary
		if sum.Sequences != 4 || sum.Unhealthy != 2 || sum.MinRunwaySeconds == nil || *sum.MinRunwaySeconds != 5 || sum.MinRunwaySequence != "c" {
			t.Errorf("%+v: summary %+v, want 4 sequences, 2 unhealthy, shortest runway 5 s (c)", c.q, sum)
		}
	}
	empty := httpapi.ReserveViewOf(primary.Status{}, httpapi.StatusQuery{Sequences: httpapi.SequencesAll})
	if empty.Summary.MinRunwaySeconds != nil || empty.Sequences == nil {
		t.Errorf("no sequences: %+v; want no shortest runway and an empty list", empty)
	}
	// Before the first sweep there is no last sweep: no 0001-01-01 (issue
	// 31).
	if data, err := json.Marshal(empty); err != nil || bytes.Contains(data, []byte("last_sweep")) {
		t.Errorf("before the first sweep: %s, %v; want no last_sweep", data, err)
	}
	st.LastSweep = time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
	if data, _ := json.Marshal(httpapi.ReserveViewOf(st, httpapi.StatusQuery{})); !bytes.Contains(data, []byte(`"last_sweep":"2026-11-24T23:00:00Z"`)) {
		t.Errorf("after a sweep: %s", data)
	}
}

// The full view: every key snake_case, no omitted booleans.
func TestStatusViewJSON(t *testing.T) {
	last := time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
	primaryID := httpapi.ReplicaViewOf(election.Identity{ID: "b", Address: "b:7070", Version: "v0.1.0"})
	v := httpapi.StatusView{
		Replica: httpapi.ReplicaViewOf(election.Identity{ID: "a", Address: "a:7070", Version: "v0.1.0"}),
		Primary: &primaryID, ZooKeeperSession: "0x1", ZooKeeperState: "has_session",
		Store: httpapi.StoreView{URL: "s3://b/p", Error: "timeout", LastRequest: &last},
		Reserve: func() *httpapi.ReserveView {
			r := httpapi.ReserveViewOf(primary.Status{Epoch: 3, ZKEpoch: 2, LastSweep: last,
				Sequences: []primary.SequenceStatus{{Name: "orders", Problem: "p", LegacyMargin: -1}}},
				httpapi.StatusQuery{Sequences: httpapi.SequencesAll})
			return &r
		}(),
		Election:   httpapi.ElectionViewOf(election.Stats{Terms: 1}),
		Allocators: []httpapi.AllocatorStatus{{Sequence: "orders"}},
		Handovers:  []httpapi.HandoverView{{At: last, Primary: &primaryID}, {At: last}},
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !key.MatchString(k) {
					t.Errorf("key %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
	// Booleans are there when false.
	seq := doc["reserve"].(map[string]any)["sequences"].([]any)[0].(map[string]any)
	for _, k := range []string{"legacy", "healthy"} {
		if _, ok := seq[k]; !ok {
			t.Errorf("reserve.sequences[0] omits %s: %s", k, b)
		}
	}
	for _, k := range []string{"leading"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("omits %s: %s", k, b)
		}
	}
	if _, ok := doc["store"].(map[string]any)["healthy"]; !ok {
		t.Errorf("store omits healthy: %s", b)
	}
	// A moment without a primary is null, not an omitted key.
	if p, ok := doc["handovers"].([]any)[1].(map[string]any)["primary"]; !ok || p != nil {
		t.Errorf("handovers[1] without a primary: %s", b)
	}
}

// The ID route writes its answer by hand; it must be what encoding/json
// makes of IDsResponse.
func TestIDAnswerIsJSON(t *testing.T) {
	for _, rs := range []sequence.Ranges{nil, {{Start: 1, End: 1}}, {{Start: 5, End: 9}, {Start: 1 << 62, End: 1<<63 - 1}}} {
		rec := httptest.NewRecorder()
		httpapi.WriteIDs(rec, "a.b_c-1", rs)
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(httpapi.IDsResponse{Sequence: "a.b_c-1", Ranges: httpapi.IDRanges(rs)}); err != nil {
			t.Fatal(err)
		}
		if rec.Body.String() != want.String() || rec.Header().Get("Content-Type") != "application/json" || rec.Code != 200 {
			t.Errorf("%v: wrote %d %q %q, encoding/json %q", rs, rec.Code, rec.Header().Get("Content-Type"), rec.Body, want.String())
		}
	}
}

// BenchmarkStatusBody is what one GET /v1/status of the console costs the
// primary at 100,000 sequences: the view chosen and encoded, for the whole
// list (the default) and for the console's question (the unhealthy ones
// and a page of 50 names); body-bytes is the answer's size.
//
//	go test -run '^$' -bench StatusBody ./httpapi/
func BenchmarkStatusBody(b *testing.B) {
	const n = 100_000
	st := primary.Status{Leading: true, Sequences: make([]primary.SequenceStatus, n)}
	for i := range st.Sequences {
		st.Sequences[i] = primary.SequenceStatus{Name: fmt.Sprintf("seq-%06d", i), Next: 1_000_000 + int64(i),
			Ceiling: 1_060_000 + int64(i), StoredCeiling: 1_060_000 + int64(i), Rate: 1000, RunwaySeconds: 60, Healthy: i%1000 != 0}
	}
	page := make([]string, 50)
	for i := range page {
		page[i] = fmt.Sprintf("seq-%06d", 5000+i)
	}
	for _, c := range []struct {
		name string
		q    httpapi.StatusQuery
	}{
		{"all", httpapi.StatusQuery{Sequences: httpapi.SequencesAll}},
		{"console", httpapi.StatusQuery{Sequences: httpapi.SequencesUnhealthy, Names: page}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				v := httpapi.ReserveViewOf(st, c.q)
				body, err := json.Marshal(httpapi.StatusView{Reserve: &v})
				if err != nil {
					b.Fatal(err)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}
