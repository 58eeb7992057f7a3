// Package apitest holds the HTTP API to its OpenAPI document in tests: a
// RoundTripper that validates every request a test makes, and every answer
// it gets, against httpapi.OpenAPI (with kin-openapi's openapi3filter).
// Validation runs in tests only, never in the serving path.
//
// The rules, checked on every round trip (or, for a load generator's
// thousands of like ones, a sample of each kind: Transport.Sampled):
//
//   - a request the document accepts must get an answer the document
//     describes: a documented status, headers and a body of the documented
//     schema (a route or field missing from the document fails the test);
//   - a request the document refuses (an unknown route, a bad parameter or
//     body, a name that is not a name) must be refused: a 4xx with the
//     document's Error body. A server that accepts what the document
//     refuses fails the test as well.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

// Document loads and validates httpapi.OpenAPI.
func Document() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("httpapi/openapi.json: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("httpapi/openapi.json is not a valid OpenAPI document: %w", err)
	}
	return doc, nil
}

var shared struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// router returns the document's router, built once per test binary.
func router() (*openapi3.T, routers.Router, error) {
	shared.once.Do(func() {
		// The status console's files are text the document describes as
		// strings.
		for _, ct := range []string{"text/html", "text/css", "text/javascript", "image/svg+xml"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
		shared.doc, shared.err = Document()
		if shared.err == nil {
			shared.router, shared.err = gorillamux.NewRouter(shared.doc)
		}
	})
	return shared.doc, shared.router, shared.err
}

// Transport is an http.RoundTripper that validates every round trip
// against the OpenAPI document and reports violations with t.Errorf, or,
// installed for a whole test binary (InstallDefault), to Check.
type Transport struct {
	t      testing.TB // nil: report to violations
	base   http.RoundTripper
	router routers.Router
	sample *sampler // nil: every round trip
}

// sampler picks the round trips a Transport validates: of each kind (a
// request's method and route; an answer's, with its status), the first
// first and then one in every.
type sampler struct {
	first, every int
	mu           sync.Mutex
	seen         map[string]int
}

func (s *sampler) due(kind string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.seen[kind]
	s.seen[kind] = n + 1
	return n < s.first || (n-s.first)%s.every == 0
}

// violations are the reports of Transports without a test.
var violations struct {
	mu   sync.Mutex
	list []string
}

func (v *Transport) errorf(format string, args ...any) {
	if v.t != nil {
		v.t.Errorf(format, args...)
		return
	}
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, msg)
	violations.mu.Lock()
	violations.list = append(violations.list, msg)
	violations.mu.Unlock()
}

// InstallDefault makes http.DefaultTransport validate every round trip,
// so that http.Get, http.Post and every client without a Transport of its
// own are held to the document in a test binary; Wrap does it for a
// transport of the test's own. Call it from TestMain, and Check after the
// tests. It panics when the document does not load.
// It returns the Transport it installed.
func InstallDefault() *Transport {
	t := Wrap(http.DefaultTransport)
	http.DefaultTransport = t
	return t
}

// Sampled returns a Transport like v for a load generator's thousands of
// round trips of one kind: of each kind (a request's method and route, and
// an answer's status on it) it validates the first first and then one in
// every, so a kind seen only under a fault (a 503 in a busy take loop) is
// validated from its first round trip. A Transport costs what its
// validations do: for a 3.1 document, kin-openapi compiles a JSON Schema
// validator for each value it checks.
func (v *Transport) Sampled(first, every int) *Transport {
	c := *v
	c.sample = &sampler{first: first, every: max(every, 1), seen: map[string]int{}}
	return &c
}

// Wrap returns a Transport over base that reports to Check.
func Wrap(base http.RoundTripper) *Transport {
	_, r, err := router()
	if err != nil {
		panic(err)
	}
	return &Transport{base: base, router: r}
}

// Check returns 1, having printed them, when Transports without a test
// reported violations, and 0 otherwise: the exit code for TestMain.
//
//	func TestMain(m *testing.M) {
//		apitest.InstallDefault()
//		os.Exit(max(testenv.Run(m), apitest.Check()))
//	}
func Check() int {
	violations.mu.Lock()
	defer violations.mu.Unlock()
	if len(violations.list) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "FAIL: %d HTTP round trips broke the OpenAPI contract (httpapi/openapi.json):\n", len(violations.list))
	for _, v := range violations.list {
		fmt.Fprintln(os.Stderr, "  "+v)
	}
	return 1
}

// NewTransport returns a Transport over base (http.DefaultTransport when
// nil). It fails t at once when the document does not load.
func NewTransport(t testing.TB, base http.RoundTripper) *Transport {
	t.Helper()
	_, r, err := router()
	if err != nil {
		t.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{t: t, base: base, router: r}
}

// Client returns a copy of c (a new client when nil) whose transport
// validates every round trip.
func Client(t testing.TB, c *http.Client) *http.Client {
	t.Helper()
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	out.Transport = NewTransport(t, out.Transport)
	return out
}

// ours says whether a request that a Transport without a test sees is
// for the API: a test binary's default transport also carries requests to
// the other servers of the test (MinIO's health checks, say).
func ours(path string) bool {
	switch path {
	case "/metrics", "/livez", "/healthz", "/readyz", "/v1", "/ui":
		return true
	}
	return strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/ui/")
}

// RoundTrip sends req through the base transport and checks both sides.
func (v *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if v.t == nil && !ours(req.URL.Path) {
		return v.base.RoundTrip(req)
	}
	older := v.t == nil && predates(req.URL.Host)
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	input, refused := v.checkRequest(req, body)

	resp, err := v.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if err != nil {
		// The connection broke mid-answer (a replica killed by the test):
		// there is nothing to validate.
		return resp, nil
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.HasPrefix(answer, []byte("Client sent an HTTP request to an HTTPS server")) {
		// net/http's own answer to plain HTTP on a TLS listener: no route
		// ever saw the request.
		return resp, nil
	}
	what := fmt.Sprintf("%s %s -> %d %s", req.Method, req.URL.RequestURI(), resp.StatusCode, bytes.TrimSpace(answer))
	if refused != nil {
		if err := checkRefusal(resp, answer); err != nil && older {
			notePredated(req, resp.StatusCode, err)
		} else if err != nil {
			v.errorf("OpenAPI contract: %s: the document refuses the request (%v) but the server %v", what, refused, err)
		}
		return resp, nil
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(answer)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if input != nil && !v.sample.due(fmt.Sprintf("%s %s %d", req.Method, input.Route.Path, resp.StatusCode)) {
		return resp, nil
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil && older {
		notePredated(req, resp.StatusCode, err)
	} else if err != nil {
		v.errorf("OpenAPI contract: %s: the answer is not what httpapi/openapi.json describes: %v", what, err)
	}
	return resp, nil
}

// checkRequest validates req; refused is why the document refuses it (nil:
// it accepts it). The server reads a body as JSON whatever its
// Content-Type (curl -d sends a form type), so the check does too, except
// on a route whose document declares the request's type (Tinyid's form
// body).
func (v *Transport) checkRequest(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("no such route in the document: %w", err)
	}
	probe := req.Clone(context.Background())
	if body != nil {
		probe.Body = io.NopCloser(bytes.NewReader(body))
		ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		if rb := route.Operation.RequestBody; ct != "application/json" && (rb == nil || rb.Value == nil || rb.Value.Content.Get(ct) == nil) {
			probe.Header.Set("Content-Type", "application/json")
		}
	}
	input := &openapi3filter.RequestValidationInput{
		Request:    probe,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if !v.sample.due(req.Method + " " + route.Path) {
		return input, nil
	}
	if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
		return input, err
	}
	return input, nil
}

// checkRefusal says what is wrong with the answer to a request the
// document refuses: it must be a 4xx with an Error body of a known code.
func checkRefusal(resp *http.Response, answer []byte) error {
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		return fmt.Errorf("answered %d instead of refusing it (4xx)", resp.StatusCode)
	}
	var e httpapi.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return fmt.Errorf("refused it without the Error body: %v", err)
	}
	if !slices.Contains(Codes(), e.Error.Code) || e.Error.Message == "" {
		return fmt.Errorf("refused it with code %q, which the document does not list, or no message", e.Error.Code)
	}
	return nil
}

// Codes returns the error codes the document's Error schema lists.
func Codes() []string {
	doc, _, err := router()
	if err != nil {
		return nil
	}
	var out []string
	code := doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value
	for _, c := range code.Enum {
		if s, ok := c.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
