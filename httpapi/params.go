package httpapi

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/internal/strictjson"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The parsing of the routes' parameters and bodies, apart from the
// handlers so that it is fuzzed without a ZooKeeper behind them
// (params_fuzz_test.go).

// parseQuery reads a route's raw query strictly. r.URL.Query() drops a
// pair it cannot read (a bad escape, a ';') and Get takes the first of a
// repeated parameter, so "count=500;" would be read as no count (1), and
// "count=5&count=50" as 5: a request read as another. Both are errors here
// (FuzzIDsQuery holds it); multi names the parameters that may be
// repeated.
func parseQuery(raw string, multi ...string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("query %.100q: %v", raw, err)
	}
	for k, vs := range q {
		// The key "" is ignored, as unknownParam ignores it.
		if len(vs) > 1 && k != "" && !slices.Contains(multi, k) {
			return nil, fmt.Errorf("%q given %d times: give it once", k, len(vs))
		}
	}
	return q, nil
}

// idsCount reads the count of POST /v1/sequences/{name}/ids from its raw
// query: 1 when there is none.
func idsCount(raw string, maxCount int64) (int64, error) {
	// The common query, count alone, is read without building a map: this
	// is the route that must be fast.
	v, ok := strings.CutPrefix(raw, "count=")
	if !ok || strings.ContainsAny(v, "&;%+") {
		q, err := parseQuery(raw)
		if err != nil {
			return 0, err
		}
		v = q.Get("count")
	}
	if v == "" {
		return 1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > maxCount {
		return 0, fmt.Errorf("count %q: want a whole number from 1 to %d", v, maxCount)
	}
	return n, nil
}

// listOptions reads the parameters of GET /v1/sequences from its raw
// query.
func listOptions(raw string) (ListOptions, error) {
	q, err := parseQuery(raw)
	if err != nil {
		return ListOptions{}, err
	}
	opts := ListOptions{Prefix: q.Get("prefix"), Health: q.Get("health"), Limit: DefaultListLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return ListOptions{}, fmt.Errorf("limit %q: want 1 to %d", v, MaxListLimit)
		}
		opts.Limit = n
	}
	if opts.Health != "" && !slices.Contains(Healths, opts.Health) {
		return ListOptions{}, fmt.Errorf("health %q: want one of %s", opts.Health, strings.Join(Healths, ", "))
	}
	if c := q.Get("cursor"); c != "" {
		// Only as listCursor spells it: base64 also reads "YR" (non-zero
		// padding bits) and "Y\nQ" as "a" (FuzzListQuery holds it).
		after, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || sequence.ValidateName(string(after)) != nil || listCursor(string(after)) != c {
			return ListOptions{}, fmt.Errorf("cursor %q is not one this API gave: pass next_cursor from the previous page as it is", c)
		}
		opts.After = string(after)
	}
	return opts, nil
}

// listCursor is the cursor of the page after name.
func listCursor(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

// tinyidParams reads the parameters of Tinyid's nextIdSimple (the query
// and a form body, parsed): the sequence's name (not checked) and the
// count, at most maxCount.
func tinyidParams(form url.Values, route string, batch bool, maxCount int64) (name string, count int64, err error) {
	known := []string{"bizType", "token"}
	if batch {
		known = append(known, "batchSize")
	}
	for key, vs := range form {
		if !slices.Contains(known, key) {
			return "", 0, fmt.Errorf("unknown parameter %q of %s; it takes %s", key, route, strings.Join(known, ", "))
		}
		// Get would take the first (the form body's, where the query has
		// it too; FuzzTinyidParams holds it).
		if len(vs) > 1 {
			return "", 0, fmt.Errorf("%q given %d times (in the query and the form body together): give it once", key, len(vs))
		}
	}
	name = form.Get("bizType")
	if name == "" {
		return "", 0, fmt.Errorf("%s needs bizType, the sequence's name", route)
	}
	count = 1
	if v := form.Get("batchSize"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("batchSize %q: want a whole number from 1 (at most %d are handed out at once)", v, maxCount)
		}
		count = min(n, maxCount)
	}
	return name, count, nil
}

// createRequest reads the body of POST /v1/sequences. An error wraps
// sequence.ErrInvalidName for a bad name; any other is the request's.
func createRequest(body io.Reader) (name string, reg seqzk.Registration, err error) {
	var req CreateRequest
	if err := decodeBody(body, &req); err != nil {
		return "", reg, fmt.Errorf(`body: want {"name":"orders","start":1,"max":1000000,"windows":0} (only name is required): %v`, err)
	}
	if err := sequence.ValidateName(req.Name); err != nil {
		return "", reg, err
	}
	reg = seqzk.Registration{Start: req.Start, End: req.Max, Windows: req.Windows}
	if err := reg.Check(func(f string) string { return f }); err != nil {
		return "", reg, err
	}
	return req.Name, reg, nil
}

// recycleRanges reads the body of POST /v1/sequences/{name}/recycle: the
// IDs to push back, normalised. An error wraps sequence.ErrBadPush for
// ranges that cannot be pushed; any other is the request's.
func recycleRanges(body io.Reader, name string) (sequence.Ranges, error) {
	var req IDsResponse
	if err := decodeBody(body, &req); err != nil {
		return nil, fmt.Errorf(`body: want {"ranges":[[start,end],...]}: %v`, err)
	}
	if req.Sequence != "" && req.Sequence != name {
		return nil, fmt.Errorf("body names sequence %q but the URL names %q", req.Sequence, name)
	}
	if len(req.Ranges) == 0 {
		return nil, fmt.Errorf(`body: "ranges" is empty: nothing to recycle`)
	}
	ids, err := sequence.NormalizeRanges(req.Ranges)
	if err != nil {
		return nil, fmt.Errorf("sequence %q: %w: %v", name, sequence.ErrBadPush, err)
	}
	return ids, nil
}

// decodeBody reads a request body, one JSON object, into v strictly
// (strictjson): dec.More() lets "{...}]" and "{...}}" through, and
// encoding/json reads a key given twice or in another case, and null
// for a number, as a request the body does not spell
// (FuzzCreateRequest and FuzzRecycleBody hold it).
func decodeBody(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	return strictjson.Decode(data, v)
}
