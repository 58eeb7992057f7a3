package httpapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/apitest"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// The OpenAPI document describes exactly the routes the server serves:
// every route of the table is in it with its method and token, and every
// operation in it is a route of the table.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := apitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	inTable := map[string]httpapi.Route{}
	for _, rt := range httpapi.Routes() {
		for _, path := range docPaths(rt.Path) {
			inTable[rt.Method+" "+path] = rt
		}
	}
	inDoc := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			inDoc[key] = true
			rt, ok := inTable[key]
			if !ok {
				t.Errorf("httpapi/openapi.json describes %s, which the server does not serve", key)
				continue
			}
			var schemes []string
			if op.Security != nil {
				for _, req := range *op.Security {
					for name := range req {
						schemes = append(schemes, name)
					}
				}
			}
			want := map[httpapi.Access][]string{httpapi.Open: nil, httpapi.Taker: {"token"}, httpapi.Admin: {"admin"}}[rt.Access]
			allowed := rt.Query
			if rt.TokenInQuery {
				// The token may come as the query parameter token: a
				// security scheme of its own, not a parameter.
				want = append(slices.Clone(want), "tokenQuery")
				allowed = slices.DeleteFunc(slices.Clone(allowed), func(p string) bool { return p == "token" })
			}
			if !slices.Equal(schemes, want) {
				t.Errorf("%s: security %v in the document, want %v (the route is %s)", key, schemes, want, rt.Access)
			}
			// The query parameters the route takes (the others it
			// refuses) are the document's.
			var query []string
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value != nil && p.Value.In == "query" {
					query = append(query, p.Value.Name)
				}
			}
			if rt.Query != nil && !slices.Equal(slices.Sorted(slices.Values(query)), slices.Sorted(slices.Values(allowed))) {
				t.Errorf("%s: query parameters %v in the document, %v in the route table", key, query, allowed)
			}
		}
	}
	for key := range inTable {
		if !inDoc[key] {
			t.Errorf("route %s is missing from httpapi/openapi.json", key)
		}
	}
}

// docPaths are the OpenAPI paths of a route's pattern: a trailing
// wildcard {x...} (the rest of the path, maybe empty) is two of them,
// prefix/ and prefix/{x}.
func docPaths(pattern string) []string {
	i := strings.LastIndex(pattern, "{")
	if i < 0 || !strings.HasSuffix(pattern, "...}") {
		return []string{pattern}
	}
	return []string{pattern[:i], pattern[:i] + "{" + strings.TrimSuffix(pattern[i+1:], "...}") + "}"}
}

// docsRoute is a row of the route table of docs/http-api.md.
var docsRoute = regexp.MustCompile("^\\| `(GET|POST|PUT|DELETE|PATCH) ([^`]+)` \\| (open|token|admin token) \\|")

// docsError is a row of the error table of docs/http-api.md.
var docsError = regexp.MustCompile("^\\| ([0-9]{3}) \\| `([a-z_]+)` \\|")

// docs/http-api.md and the document say the same thing: its route table
// lists the routes and their tokens, and its error table lists the
// document's error codes, each with the status it comes with.
func TestDocsMatchOpenAPI(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	errs := map[string][]int{} // code -> statuses in the docs
	for line := range strings.Lines(string(md)) {
		if m := docsRoute.FindStringSubmatch(line); m != nil {
			routes = append(routes, m[1]+" "+m[2]+" "+m[3])
		}
		if m := docsError.FindStringSubmatch(line); m != nil {
			status, _ := strconv.Atoi(m[1])
			errs[m[2]] = append(errs[m[2]], status)
		}
	}
	var want []string
	for _, rt := range httpapi.Routes() {
		want = append(want, rt.Method+" "+rt.Path+" "+rt.Access.String())
	}
	slices.Sort(routes)
	slices.Sort(want)
	if !slices.Equal(routes, want) {
		t.Errorf("the route table of docs/http-api.md lists\n  %s\nthe server serves\n  %s", strings.Join(routes, "\n  "), strings.Join(want, "\n  "))
	}

	// Every code of the document's Error schema is in the docs' error
	// table, and no other; each status the document gives a code is the
	// docs' status of that code.
	codes := apitest.Codes()
	for _, c := range codes {
		if len(errs[c]) == 0 {
			t.Errorf("error code %q of httpapi/openapi.json is missing from the error table of docs/http-api.md", c)
		}
	}
	for c := range errs {
		if !slices.Contains(codes, c) {
			t.Errorf("error code %q of docs/http-api.md is missing from httpapi/openapi.json", c)
		}
	}
	// Every Code constant of the package is in the document.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		spec, ok := node.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || !strings.HasPrefix(spec.Names[0].Name, "Code") || len(spec.Values) != 1 {
			return true
		}
		lit, ok := spec.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		n++
		if code, _ := strconv.Unquote(lit.Value); !slices.Contains(codes, code) {
			t.Errorf("httpapi.%s = %s is missing from httpapi/openapi.json's Error codes", spec.Names[0].Name, lit.Value)
		}
		return true
	})
	if n != len(codes) {
		t.Errorf("errors.go has %d Code constants, httpapi/openapi.json %d codes", n, len(codes))
	}
}

// GET /v1/openapi.json serves the document without a token.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.replica(httpapi.Options{Token: "taker-token"}, sequence.Options{})
	code, hdr, body := r.call("GET", "/v1/openapi.json", "", "")
	if code != 200 || hdr.Get("Content-Type") != "application/json" || string(body) != string(httpapi.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %s, %d bytes", code, hdr.Get("Content-Type"), len(body))
	}
}
