package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/fuzztest"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The fuzz tests of the routes' parameters and bodies (params.go). Each
// holds a parser to a reference reading of its input, net/url's for a
// query and encoding/json's generic one for a body: what the parser
// accepts, the reference reads the same way, and what the reference finds
// malformed, repeated or unknown, the parser refuses. A request is never
// read as another one.

// queryOf is net/url's reading of raw with every parameter given at most
// once and only those in allowed (the key "" is ignored, as unknownParam
// does): one value per parameter, "" when absent or empty. ok is false for
// a query a strict reader refuses.
func queryOf(raw string, allowed ...string) (params map[string]string, ok bool) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return nil, false
	}
	params = map[string]string{}
	for k, vs := range values {
		switch {
		case k == "":
		case !slices.Contains(allowed, k) || len(vs) != 1:
			return nil, false
		default:
			params[k] = vs[0]
		}
	}
	return params, true
}

// querySeeds are queries of a route of params: each alone, repeated, with
// ';', with a bad escape, escaped, unknown.
func querySeeds(param, value string) []fuzztest.Seed {
	return []fuzztest.Seed{
		fuzztest.New("none", ""),
		fuzztest.New("one", param+"="+value),
		fuzztest.New("empty", param+"="),
		fuzztest.New("repeated", param+"="+value+"&"+param+"="+value+"0"),
		fuzztest.New("semicolon", param+"="+value+";"),
		fuzztest.New("bad-escape", param+"="+value+"&x=%zz"),
		fuzztest.New("escaped", "%"+strconv.FormatInt(int64(param[0]), 16)+param[1:]+"="+url.QueryEscape(value)),
		fuzztest.New("unknown", param+"="+value+"&other=1"),
		fuzztest.New("upper", strings.ToUpper(param)+"="+value),
		fuzztest.New("blank-key", "="+value+"&"+param+"="+value),
	}
}

// FuzzIDsQuery: the query of POST /v1/sequences/{name}/ids (unknownParam,
// then idsCount) is accepted exactly when net/url reads it as count alone,
// at most once, from 1 to the limit, and then as that count.
func FuzzIDsQuery(f *testing.F) {
	var seeds []fuzztest.Seed
	for _, s := range append(querySeeds("count", "5"),
		fuzztest.New("max", "count=10000"), fuzztest.New("above", "count=10001"), fuzztest.New("plus", "count=+7"),
		fuzztest.New("zero", "count=0"), fuzztest.New("leading-zero", "count=007"), fuzztest.New("space", "count=%205")) {
		seeds = append(seeds, fuzztest.New(s.Name, s.Args[0], int64(DefaultMaxCount)))
	}
	fuzztest.Corpus(f, seeds...)
	f.Fuzz(func(t *testing.T, raw string, maxCount int64) {
		if maxCount < 1 {
			return // New refuses it
		}
		n, err := idsCount(raw, maxCount)
		_, known := unknownParam(raw, []string{"count"})
		want, ok := int64(1), false
		if q, valid := queryOf(raw, "count"); valid {
			ok = true
			if v := q["count"]; v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				want, ok = n, err == nil && n >= 1 && n <= maxCount
			}
		}
		if got := err == nil && known; got != ok || got && n != want {
			t.Fatalf("query %q (limit %d): count %d, %v (known params: %v); net/url reads count %d (valid: %v)", raw, maxCount, n, err, known, want, ok)
		}
	})
}

// listParams are the parameters of GET /v1/sequences.
var listParams = []string{"limit", "cursor", "prefix", "health"}

// FuzzListQuery: the query of GET /v1/sequences is accepted exactly when
// net/url reads it as known parameters, each at most once, with a limit
// in range, a health word and a cursor that the API gives (listCursor of a
// sequence name, spelt as the API spells it); accepted, it reads as
// net/url reads it.
func FuzzListQuery(f *testing.F) {
	seeds := querySeeds("cursor", listCursor("orders"))
	seeds = append(seeds,
		fuzztest.New("page", "limit=2&cursor="+listCursor("a.b-c_9")+"&prefix=or&health="+HealthAtCeiling),
		fuzztest.New("limits", "limit=+5"), fuzztest.New("limit-max", "limit="+strconv.Itoa(MaxListLimit+1)),
		fuzztest.New("cursor-bits", "cursor=YR"), fuzztest.New("cursor-newline", "cursor=Y%0AQ"),
		fuzztest.New("cursor-padded", "cursor=YQ=="), fuzztest.New("cursor-slash", "cursor="+listCursor("a/b")),
		fuzztest.New("health", "health=sick"))
	fuzztest.Corpus(f, seeds...)
	f.Fuzz(func(t *testing.T, raw string) {
		opts, err := listOptions(raw)
		_, known := unknownParam(raw, listParams)
		q, ok := queryOf(raw, listParams...)
		want := ListOptions{Prefix: q["prefix"], Health: q["health"], Limit: DefaultListLimit}
		if v := q["limit"]; ok && v != "" {
			n, err := strconv.Atoi(v)
			ok = err == nil && n >= 1 && n <= MaxListLimit
			want.Limit = n
		}
		ok = ok && (want.Health == "" || slices.Contains(Healths, want.Health))
		if c := q["cursor"]; ok && c != "" {
			after, err := base64RawURL(c)
			ok = err == nil && sequence.ValidateName(after) == nil && listCursor(after) == c
			want.After = after
		}
		if got := err == nil && known; got != ok || got && opts != want {
			t.Fatalf("query %q: %+v, %v (known params: %v); net/url reads %+v (valid: %v)", raw, opts, err, known, want, ok)
		}
	})
}

// FuzzStatusQuery: the query of GET /v1/status is accepted exactly when
// net/url reads it as sequences (at most once, a word it knows) and any
// number of names, and then as that.
func FuzzStatusQuery(f *testing.F) {
	seeds := querySeeds("sequences", SequencesUnhealthy)
	seeds = append(seeds, fuzztest.New("names", "sequences=none&name=a&name=b&name="), fuzztest.New("word", "sequences=some"))
	fuzztest.Corpus(f, seeds...)
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := statusQuery(raw)
		_, known := unknownParam(raw, []string{"sequences", "name"})
		values, perr := url.ParseQuery(raw)
		delete(values, "")
		names := values["name"]
		delete(values, "name")
		q, ok := queryOf(values.Encode(), "sequences")
		ok = ok && perr == nil && len(names) <= maxStatusNames
		want := StatusQuery{Sequences: q["sequences"], Names: names}
		switch want.Sequences {
		case "":
			want.Sequences = SequencesAll
		case SequencesAll, SequencesUnhealthy, SequencesNone:
		default:
			ok = false
		}
		if accepted := err == nil && known; accepted != ok || accepted && !reflect.DeepEqual(got, want) {
			t.Fatalf("query %q: %+v, %v (known params: %v); net/url reads %+v (valid: %v)", raw, got, err, known, want, ok)
		}
	})
}

// FuzzTinyidParams: the parameters of Tinyid's nextIdSimple (the query
// and the form body, as http.Request.ParseForm merges them) are accepted
// exactly when each known one is given at most once, bizType is given and
// batchSize is a count from 1; then they read as that (at most the limit).
func FuzzTinyidParams(f *testing.F) {
	var seeds []fuzztest.Seed
	for _, s := range append(querySeeds("batchSize", "3"), fuzztest.New("all", "bizType=orders&batchSize=20000&token=T"),
		fuzztest.New("no-name", "batchSize=2"), fuzztest.New("two-names", "bizType=a&bizType=b")) {
		raw := s.Args[0].(string)
		if !strings.Contains(raw, "bizType") {
			raw = strings.TrimPrefix(raw+"&bizType=orders", "&")
		}
		seeds = append(seeds, fuzztest.New(s.Name, raw, int64(DefaultMaxCount)))
	}
	fuzztest.Corpus(f, seeds...)
	f.Fuzz(func(t *testing.T, raw string, maxCount int64) {
		form, err := url.ParseQuery(raw)
		if err != nil || maxCount < 1 {
			return // ParseForm refuses it; New refuses the limit
		}
		name, count, err := tinyidParams(form, "nextIdSimple", true, maxCount)
		q, ok := queryOf(raw, "bizType", "batchSize", "token")
		_, blank := form[""]
		ok = ok && !blank && q["bizType"] != ""
		wantCount := int64(1)
		if v := q["batchSize"]; ok && v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			ok, wantCount = err == nil && n >= 1, min(n, maxCount)
		}
		if accepted := err == nil; accepted != ok || accepted && (name != q["bizType"] || count != wantCount) {
			t.Fatalf("form %q: %q %d, %v; net/url reads %q %d (valid: %v)", raw, name, count, err, q["bizType"], wantCount, ok)
		}
	})
}

// FuzzCreateRequest: a body of POST /v1/sequences is accepted only when it
// is one JSON object that says exactly the registration read from it, with
// a valid name and settings; and that registration's own body reads back
// the same.
func FuzzCreateRequest(f *testing.F) {
	body := func(v any) []byte {
		data, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	const full = `{"name":"orders","start":1,"max":1000000,"windows":2}`
	fuzztest.Corpus(f,
		fuzztest.New("name-only", body(CreateRequest{Name: "orders"})),
		fuzztest.New("full", body(CreateRequest{Name: "a.b-c_9", Start: 5, Max: 1 << 40, Windows: 3})),
		fuzztest.New("zeros", []byte(`{"name":"x","start":0,"max":0,"windows":0}`)),
		fuzztest.New("trailing-brace", []byte(full+"}")),
		fuzztest.New("trailing-bracket", []byte(full+"]")),
		fuzztest.New("two-objects", []byte(full+full)),
		fuzztest.New("duplicate-name", []byte(`{"name":"orders","name":"other"}`)),
		fuzztest.New("upper-key", []byte(`{"NAME":"orders"}`)),
		fuzztest.New("null-start", []byte(`{"name":"orders","start":null}`)),
		fuzztest.New("unknown", []byte(`{"name":"orders","end":5}`)),
		fuzztest.New("bad-name", []byte(`{"name":"a/b"}`)),
		fuzztest.New("bad-space", []byte(`{"name":"a","start":10,"max":5}`)),
		fuzztest.New("float", []byte(`{"name":"a","start":1.5}`)),
		fuzztest.New("empty", []byte{}),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		name, reg, err := createRequest(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := sequence.ValidateName(name); err != nil {
			t.Fatalf("accepted name %q: %v", name, err)
		}
		if err := reg.Check(func(f string) string { return f }); err != nil {
			t.Fatalf("accepted %+v: %v", reg, err)
		}
		enc, _ := json.Marshal(map[string]any{"name": name, "start": reg.Start, "max": reg.End, "windows": reg.Windows})
		if err := fuzztest.SameJSON(data, enc); err != nil {
			t.Fatalf("body %q read as %q %+v: %v", data, name, reg, err)
		}
		own, _ := json.Marshal(CreateRequest{Name: name, Start: reg.Start, Max: reg.End, Windows: reg.Windows})
		if name2, reg2, err := createRequest(bytes.NewReader(own)); err != nil || name2 != name || reg2 != reg {
			t.Fatalf("round trip of %q %+v: %q %+v, %v", name, reg, name2, reg2, err)
		}
	})
}

// FuzzRecycleBody: a body of POST /v1/sequences/{name}/recycle is
// accepted only when it is one JSON object, with at most the sequence
// (this one) and ranges of one or two whole numbers, and then it reads as
// exactly the IDs those ranges hold, normalised.
func FuzzRecycleBody(f *testing.F) {
	answer := httptest.NewRecorder()
	writeIDs(answer, "orders", sequence.Ranges{{Start: 1, End: 10}, {Start: 20, End: 20}})
	own, err := json.Marshal(IDsResponse{Sequence: "orders", Ranges: IDRanges{{Start: 5, End: 9}, {Start: 1, End: 3}, {Start: 4, End: 4}}})
	if err != nil {
		f.Fatal(err)
	}
	const ranges = `{"ranges":[[1,2]]}`
	seed := func(name, body string) fuzztest.Seed { return fuzztest.New(name, []byte(body), "orders") }
	fuzztest.Corpus(f,
		fuzztest.New("take-answer", answer.Body.Bytes(), "orders"),
		fuzztest.New("encoded", own, "orders"),
		seed("single", `{"ranges":[[7]]}`),
		seed("extremes", `{"ranges":[[1,9223372036854775807]]}`),
		seed("other-sequence", `{"sequence":"users","ranges":[[1,2]]}`),
		seed("empty-ranges", `{"ranges":[]}`),
		seed("overlap", `{"ranges":[[1,5],[3,8]]}`),
		seed("triple", `{"ranges":[[1,2,3]]}`),
		seed("null-end", `{"ranges":[[5,null]]}`),
		seed("null-sequence", `{"sequence":null,"ranges":[[1,2]]}`),
		seed("trailing-brace", ranges+"}"),
		seed("trailing-bracket", ranges+"]"),
		seed("two-objects", ranges+ranges),
		seed("duplicate-ranges", `{"ranges":[[1,2]],"ranges":[[3,4]]}`),
		seed("upper-key", `{"RANGES":[[1,2]]}`),
		seed("zero", `{"ranges":[[0,2]]}`),
	)
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if sequence.ValidateName(name) != nil {
			return // the handler refuses the URL first
		}
		ids, err := recycleRanges(bytes.NewReader(data), name)
		if err != nil {
			return
		}
		keys, err := fuzztest.ObjectKeys(data)
		if err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		var body map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if s, ok := body[k].(string); k == "sequence" && ok && (s == "" || s == name) || k == "ranges" {
				continue
			}
			t.Fatalf("accepted %q with key %q: %v", data, k, body[k])
		}
		var listed []sequence.Range
		list, _ := body["ranges"].([]any)
		for _, r := range list {
			pair, _ := fuzztest.Numbers(r).([]any)
			if len(pair) == 1 {
				pair = append(pair, pair[0])
			}
			start, ok1 := pair[0].(int64)
			end, ok2 := pair[len(pair)-1].(int64)
			if len(pair) != 2 || !ok1 || !ok2 {
				t.Fatalf("accepted %q with the range %v", data, r)
			}
			listed = append(listed, sequence.Range{Start: start, End: end})
		}
		if want, err := sequence.NormalizeRanges(listed); err != nil || !reflect.DeepEqual(ids, want) {
			t.Fatalf("body %q read as %v; its ranges are %v (%v)", data, ids, want, err)
		}
	})
}

// base64RawURL reads a cursor as package base64 does (leniently: the
// oracle's listCursor equality makes it strict).
func base64RawURL(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return string(b), err
}
