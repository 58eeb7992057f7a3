package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Several roots behind one listener. Every route of one root has a rooted
// form, /v1/roots/{root}/..., with the part after /v1 (or the whole path
// of a compatibility route) after the root's name:
//
//	POST /v1/sequences/{name}/ids   ->  POST /v1/roots/{root}/sequences/{name}/ids
//	GET  /v1/status                 ->  GET  /v1/roots/{root}/status
//	GET  /api/segment/get/{key}     ->  GET  /v1/roots/{root}/api/segment/get/{key}
//
// A Server of one root (Options.Name set) answers its own rooted form too.
// A Server of several roots (Options.Roots) sends each rooted request to
// that root's Server, serves the process's routes itself (probes,
// /metrics, the console, the OpenAPI document, and a /v1/status of every
// root), and answers the unrooted form of a root's route 404
// root_required, naming the roots: it never guesses which root was meant.

// RootPrefix starts the path of every rooted route.
const RootPrefix = "/v1/roots/"

// NamedServer is one root's Server and its name in URLs.
type NamedServer struct {
	Name   string
	Server *Server
}

// processRoute reports whether a route of the table belongs to the process
// rather than to one root.
func processRoute(path string) bool {
	switch path {
	case "/v1/openapi.json", "/ui/{file...}", "/ui", "/metrics", "/livez", "/healthz", "/readyz":
		return true
	}
	return false
}

// rootedPath is the rooted form of a root's route path.
func rootedPath(path string) string {
	if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		return RootPrefix + "{root}/" + rest
	}
	return RootPrefix + "{root}" + path
}

// unrootedPath is the inverse of rootedPath for a request's path after
// the root's name ("/sequences/x/ids" -> "/v1/sequences/x/ids").
func unrootedPath(rest string) string {
	if strings.HasPrefix(rest, "/api/") || strings.HasPrefix(rest, "/tinyid/") {
		return rest
	}
	return "/v1" + rest
}

// rootedRoutes are the rooted forms of the routes of one root.
func rootedRoutes() []route {
	var out []route
	for _, rt := range routeTable {
		if processRoute(rt.Path) {
			continue
		}
		r := rt
		r.Path = rootedPath(rt.Path)
		r.handle = (*Server).dispatch
		out = append(out, r)
	}
	return out
}

// dispatch sends a rooted request to its root's Server, as the unrooted
// request it stands for. The root's Server checks the token and records
// the latency under the unrooted route, with its root label.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("root")
	target := s.roots[name]
	if target == nil {
		writeError(w, http.StatusNotFound, CodeUnknownRoot, fmt.Sprintf("no root %q on this replica; it serves %s (GET /v1/status lists them)", name, s.rootList()))
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, RootPrefix+name)
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = unrootedPath(rest), ""
	r2.URL = &u
	target.ServeHTTP(w, r2)
}

// rootRequired answers a root's unrooted route on a Server of several
// roots.
func (s *Server) rootRequired(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, CodeRootRequired, fmt.Sprintf("this replica serves several roots: address one as %s{root}/%s; roots: %s",
		RootPrefix, strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1"), "/"), s.rootList()))
}

// rootList names the roots, sorted, for messages.
func (s *Server) rootList() string {
	names := make([]string, 0, len(s.roots))
	for n := range s.roots {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// multi reports whether the Server fronts several roots.
func (s *Server) multi() bool { return len(s.rootServers) > 0 }

// newRootsServer checks opts.Roots and builds the roots map.
func newRootsServer(opts Options) (map[string]*Server, error) {
	roots := make(map[string]*Server, len(opts.Roots))
	for _, ns := range opts.Roots {
		if err := validRootName(ns.Name); err != nil {
			return nil, err
		}
		switch {
		case ns.Server == nil:
			return nil, fmt.Errorf("httpapi: root %q has no Server", ns.Name)
		case roots[ns.Name] != nil:
			return nil, fmt.Errorf("httpapi: root name %q given twice", ns.Name)
		case ns.Server.multi():
			return nil, fmt.Errorf("httpapi: root %q: its Server fronts roots itself", ns.Name)
		}
		roots[ns.Name] = ns.Server
	}
	return roots, nil
}

// validRootName checks a root's name for a URL path segment.
func validRootName(name string) error {
	if name == "" || strings.ContainsAny(name, "/?#%") {
		return fmt.Errorf("httpapi: root name %q: want a non-empty name without '/', '?', '#' or '%%'", name)
	}
	return nil
}

// closeRoots closes every root's Server at once (each pushes its
// allocators' IDs back), bounded by ctx.
func (s *Server) closeRoots(ctx context.Context) error {
	errs := make([]error, len(s.rootServers))
	var wg sync.WaitGroup
	for i, ns := range s.rootServers {
		wg.Go(func() {
			if err := ns.Server.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("root %s: %w", ns.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
