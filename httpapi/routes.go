package httpapi

import (
	"crypto/sha256"
	_ "embed"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Access says which bearer token a route needs.
type Access int

const (
	// Open routes need no token: the probes and the OpenAPI document,
	// which reveal nothing.
	Open Access = iota
	// Taker routes need the API token (http_token) when one is set; the
	// admin token works on them too.
	Taker
	// Admin routes need the admin token (http_admin_token). Without one
	// configured they answer 403: creating and deleting sequences over
	// HTTP is off.
	Admin
)

func (a Access) String() string {
	switch a {
	case Open:
		return "open"
	case Taker:
		return "token"
	case Admin:
		return "admin token"
	}
	return "Access(" + strconv.Itoa(int(a)) + ")"
}

// Route is one route of the API: its method, its path pattern (net/http's
// form: /v1/sequences/{name}) and the token it needs. Routes lists them
// all; the OpenAPI document (openapi.json) and docs/http-api.md describe
// exactly these, which the package's tests check both ways.
type Route struct {
	Method string
	Path   string
	Access Access
	// Query are the query parameters the route takes: any other is
	// refused (400 bad_request), so that a misspelt one (?n=5 for
	// ?count=5) is not silently ignored. Nil for the routes outside /v1
	// (probes, metrics, the console), which take whatever is sent.
	Query []string
	// TokenInQuery routes take the token as the query parameter token too
	// (a bearer header wins): the compatibility routes, whose clients
	// (Leaf's, Tinyid's) send no header.
	TokenInQuery bool
}

// route is a Route with its handler.
type route struct {
	Route
	handle func(s *Server, w http.ResponseWriter, r *http.Request)
}

// routeTable is every route the Server serves.
var routeTable = []route{
	{Route{"POST", "/v1/sequences/{name}/ids", Taker, []string{"count"}, false}, (*Server).handleIDs},
	{Route{"POST", "/v1/sequences/{name}/recycle", Taker, []string{}, false}, (*Server).handleRecycle},
	{Route{"GET", "/v1/sequences", Taker, []string{"limit", "cursor", "prefix", "health"}, false}, (*Server).handleList},
	{Route{"POST", "/v1/sequences", Admin, []string{}, false}, (*Server).handleCreate},
	{Route{"GET", "/v1/sequences/{name}", Taker, []string{}, false}, (*Server).handleDescribe},
	{Route{"DELETE", "/v1/sequences/{name}", Admin, []string{}, false}, (*Server).handleDelete},
	{Route{"GET", "/v1/status", Taker, []string{"sequences", "name"}, false}, (*Server).handleStatus},
	{Route{"GET", "/v1/openapi.json", Open, []string{}, false}, (*Server).handleOpenAPI},
	{Route{"GET", "/v1/history", Taker, []string{}, false}, (*Server).handleHistory},
	{Route{"POST", "/v1/step-down", Admin, []string{}, false}, (*Server).handleStepDown},
	// The status console (console.go): open files, which read the /v1
	// routes with the token.
	{Route{"GET", "/ui/{file...}", Open, nil, false}, func(s *Server, w http.ResponseWriter, r *http.Request) { s.console.ServeHTTP(w, r) }},
	{Route{"GET", "/ui", Open, nil, false}, func(_ *Server, w http.ResponseWriter, r *http.Request) { redirectToConsole(w, r) }},
	{Route{"GET", "/metrics", Taker, nil, false}, func(s *Server, w http.ResponseWriter, r *http.Request) { s.promHandler.ServeHTTP(w, r) }},
	// Liveness: the process serves HTTP. Nothing outside it (ZooKeeper,
	// the store) makes it fail, so an outage never restarts replicas.
	{Route{"GET", "/livez", Open, nil, false}, (*Server).handleLive},
	{Route{"GET", "/healthz", Open, nil, false}, (*Server).handleLive}, // the name before /livez
	{Route{"GET", "/readyz", Open, nil, false}, (*Server).handleReady},
	// Compatibility (compat.go): the read routes of Meituan's Leaf and of
	// Tinyid, for their clients to point at a replica unchanged.
	{Route{"GET", "/api/segment/get/{key}", Taker, []string{"token"}, true}, (*Server).handleLeaf},
	{Route{"GET", "/tinyid/id/nextIdSimple", Taker, []string{"bizType", "batchSize", "token"}, true}, tinyidRoute(true)},
	{Route{"POST", "/tinyid/id/nextIdSimple", Taker, []string{"bizType", "batchSize", "token"}, true}, tinyidRoute(true)},
	{Route{"GET", "/tinyid/id/nextId", Taker, []string{"bizType", "batchSize", "token"}, true}, tinyidRoute(false)},
	{Route{"POST", "/tinyid/id/nextId", Taker, []string{"bizType", "batchSize", "token"}, true}, tinyidRoute(false)},
	{Route{"GET", "/tinyid/id/nextSegmentIdSimple", Taker, []string{"bizType", "token"}, true}, segmentRoute(true)},
	{Route{"POST", "/tinyid/id/nextSegmentIdSimple", Taker, []string{"bizType", "token"}, true}, segmentRoute(true)},
	{Route{"GET", "/tinyid/id/nextSegmentId", Taker, []string{"bizType", "token"}, true}, segmentRoute(false)},
	{Route{"POST", "/tinyid/id/nextSegmentId", Taker, []string{"bizType", "token"}, true}, segmentRoute(false)},
}

// tinyidRoute and segmentRoute are the handlers of Tinyid's ID and
// segment routes, simple (text) or not (JSON).
func tinyidRoute(simple bool) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) { s.handleTinyid(w, r, simple) }
}

func segmentRoute(simple bool) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) { s.handleTinyidSegment(w, r, simple) }
}

// Routes returns every route of the API, in a fixed order: the routes of
// routeTable, then their rooted forms (roots.go).
func Routes() []Route {
	all := allRoutes()
	out := make([]Route, len(all))
	for i, rt := range all {
		out[i] = rt.Route
	}
	return out
}

// allRoutes is routeTable and the rooted forms of a root's routes.
func allRoutes() []route { return append(slices.Clone(routeTable), rootedRoutes()...) }

// OpenAPI is the API's OpenAPI 3.1 document, as GET /v1/openapi.json
// serves it.
//
//go:embed openapi.json
var OpenAPI []byte

// routeUnmatched is the route label of requests no route matches.
const routeUnmatched = "unmatched"

// register puts every route of the table on the mux, each wrapped in its
// token check and its latency metric, and a catch-all that answers
// unknown routes and methods in JSON.
func (s *Server) register() {
	allowed := map[string][]string{} // path pattern -> methods
	for _, rt := range allRoutes() {
		pattern := rt.Method + " " + rt.Path
		switch {
		case strings.HasPrefix(rt.Path, RootPrefix):
			if len(s.roots) == 0 {
				continue // no rooted form: not found
			}
			// The root's Server checks the token and records the
			// latency, under the unrooted route.
			s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.handle(s, w, r) }))
		case s.multi() && !processRoute(rt.Path) && rt.Path != "/v1/status":
			// A root's route without its root.
			rr := rt
			rr.Access, rr.Query, rr.handle = Taker, nil, (*Server).rootRequired
			s.mux.Handle(pattern, s.instrument(pattern, s.guard(rr)))
		default:
			s.mux.Handle(pattern, s.instrument(pattern, s.guard(rt)))
		}
		allowed[rt.Path] = append(allowed[rt.Path], rt.Method)
	}
	for path, methods := range allowed {
		allow := strings.Join(methods, ", ")
		s.paths.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		})
	}
	s.mux.Handle("/", s.instrument(routeUnmatched, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.paths.Handler(r); pattern != "" {
			s.paths.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no route %s %s; see docs/http-api.md", r.Method, r.URL.Path))
	})))
}

// instrument records the latency of h's requests by route and status.
// The series of a 200 is looked up once, not on every request.
func (s *Server) instrument(route string, h http.Handler) http.Handler {
	ok := s.metrics.requests.WithLabelValues(route, "200")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		var o prometheus.Observer = ok
		if sw.code != http.StatusOK {
			o = s.metrics.requests.WithLabelValues(route, strconv.Itoa(sw.code))
		}
		o.Observe(time.Since(start).Seconds())
	})
}

// guard checks the token rt needs before calling its handler. Comparing
// SHA-256 digests keeps the comparisons constant-time whatever the
// lengths.
func (s *Server) guard(rt route) http.Handler {
	serve := func(w http.ResponseWriter, r *http.Request) {
		if bad, ok := unknownParam(r.URL.RawQuery, rt.Query); !ok {
			badRequest(w, "unknown query parameter %q on %s %s; it takes %s", bad, rt.Method, rt.Path, paramList(rt.Query))
			return
		}
		rt.handle(s, w, r)
	}
	switch {
	case rt.Access == Open, rt.Access == Taker && !s.hasToken && !s.hasAdminToken:
		return http.HandlerFunc(serve)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		bearer := strings.EqualFold(scheme, "Bearer")
		if rt.TokenInQuery && r.Header.Get("Authorization") == "" {
			// The query, or a POST's form body (Tinyid's clients send
			// either).
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			got, bearer = r.FormValue("token"), true
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		set := s.tokens.Load()
		admin := bearer && s.hasAdminToken && match(set.admin, sum)
		taker := bearer && s.hasToken && match(set.taker, sum)
		switch {
		case rt.Access == Admin && (!s.hasAdminToken || s.admin == nil):
			writeError(w, http.StatusForbidden, CodeForbidden, "creating and deleting sequences over HTTP is off on this replica: start it with http_admin_token_file (a token other than http_token), or use 'seqkeeper create' and 'seqkeeper delete'")
		case admin, rt.Access == Taker && (taker || !s.hasToken):
			serve(w, r)
		case rt.Access == Admin && taker:
			writeError(w, http.StatusForbidden, CodeForbidden, "this token takes IDs; creating and deleting sequences needs the admin token (http_admin_token)")
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="seqkeeper"`)
			name := "http_token"
			if rt.Access == Admin {
				name = "http_admin_token"
			}
			how := "send 'Authorization: Bearer <token>'"
			if rt.TokenInQuery {
				how += " or ?token=<token>"
			}
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, fmt.Sprintf("missing or wrong bearer token: %s with the token the replica was started with (%s)", how, name))
		}
	})
}

// unknownParam returns the first query parameter of raw that allowed does
// not list, and false; true when there is none or allowed is nil (any).
// It does not allocate for the common queries.
func unknownParam(raw string, allowed []string) (string, bool) {
	if allowed == nil {
		return "", true
	}
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		key, _, _ := strings.Cut(part, "=")
		if strings.ContainsAny(key, "%+") {
			if k, err := url.QueryUnescape(key); err == nil {
				key = k
			}
		}
		if key != "" && !slices.Contains(allowed, key) {
			return key, false
		}
	}
	return "", true
}

func paramList(allowed []string) string {
	if len(allowed) == 0 {
		return "no query parameters"
	}
	return "only " + strings.Join(allowed, ", ")
}

// handleOpenAPI serves GET /v1/openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	_, _ = w.Write(OpenAPI)
}

// handleLive serves GET /livez and GET /healthz.
func (s *Server) handleLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
