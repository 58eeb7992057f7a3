package apitest

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// A rolling upgrade runs servers of an earlier release beside this tree's.
// The document describes this tree's API, which may have added to what an
// earlier release answers (a field, a route). Round trips to an earlier
// release are checked all the same, but what breaks the contract is kept
// apart for the test to report, not failed by Check: it is what a client
// written against this document meets during the upgrade.
var predated struct {
	mu    sync.Mutex
	hosts map[string]bool
	seen  map[string]int
}

// Predates marks the server at host (host:port, as request URLs name it)
// as one of an earlier release: Transports without a test (InstallDefault,
// Wrap) check its round trips as any other, and Predated counts what
// breaks the contract instead of Check.
func Predates(host string) {
	predated.mu.Lock()
	defer predated.mu.Unlock()
	if predated.hosts == nil {
		predated.hosts = map[string]bool{}
		predated.seen = map[string]int{}
	}
	predated.hosts[host] = true
}

// Predated returns how often each way of breaking the contract was seen
// on the hosts Predates marked, keyed by "METHOD path -> status: what
// broke" (the first line of it).
func Predated() map[string]int {
	predated.mu.Lock()
	defer predated.mu.Unlock()
	return maps.Clone(predated.seen)
}

func predates(host string) bool {
	predated.mu.Lock()
	defer predated.mu.Unlock()
	return predated.hosts[host]
}

func notePredated(req *http.Request, status int, broke error) {
	what, _, _ := strings.Cut(broke.Error(), "\n")
	key := fmt.Sprintf("%s %s -> %d: %s", req.Method, req.URL.Path, status, what)
	predated.mu.Lock()
	defer predated.mu.Unlock()
	predated.seen[key]++
}
