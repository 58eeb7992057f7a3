package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// The console of a replica of several roots: a picker lists the roots of
// /v1/status, the first shown by default; picking the other shows its
// sequences and status, read from /v1/roots/{root}/..., and keeps the
// choice in the URL's hash, on which a new tab opens. The page never asks
// a root's unrooted routes (404 root_required there). The sequences are
// created with the operator commands' --root-name, from the file serve
// runs with.
func TestConsoleOfSeveralRoots(t *testing.T) {
	testenv.ParallelUnderShort(t)
	browser := newBrowser(t)
	z := testenv.ZooKeeper(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "roots.yaml")
	yaml := fmt.Sprintf(`zk: [%s]
zk_connect_timeout: 10s
ceiling_wait: 500ms
runway: 2s
min_reserve: 50
sweep_interval: 200ms
log_format: json
roots:
  - {name: north, root: %s, store: "file://%s"}
  - {name: south, root: %s, store: "file://%s"}
`, strings.Join(z.Servers, ", "), z.Path("north", "sequences"), filepath.Join(dir, "north"), z.Path("south", "sequences"), filepath.Join(dir, "south"))
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &rootNameCLI{t: t, env: map[string]string{}}
	r := serveConfig(t, config, "m")
	eventually(t, "the replica ready", func() bool { return r.get(t, "/readyz", nil) == http.StatusOK })
	c.ok("--config", config, "--root-name", "north", "create", "north-1")
	c.ok("--config", config, "--root-name", "north", "create", "north-2")
	c.ok("--config", config, "--root-name", "south", "create", "south-1")

	rows := `[...document.querySelectorAll('#sequences tr[data-name]')].map(r => r.dataset.name).sort().join(',')`
	hidden := func(id string) string { return fmt.Sprintf(`String(document.getElementById(%q).hidden)`, id) }
	p := openConsole(t, browser, "http://"+r.addr)
	p.waitFor("the root picker", hidden("root-pick"), equals("false"))
	if opts := p.eval(`[...document.querySelectorAll('#root option')].map(o => o.value).join(',')`); opts != "north,south" {
		t.Errorf("the picker offers %q, want north,south", opts)
	}
	p.waitFor("the first root's sequences", rows, equals("north-1,north-2"))
	p.waitFor("the first root in the hash", `location.hash`, equals("#root=north"))
	p.waitFor("the role in north", text("#role"), equals("PRIMARY"))
	p.waitFor("north's primary", text("#primary"), equals("m"))

	p.eval(`(() => { const s = document.getElementById('root'); s.value = 'south'; s.dispatchEvent(new Event('change')); return ''; })()`)
	p.waitFor("south's sequences after the switch", rows, equals("south-1"))
	p.waitFor("south in the hash", `location.hash`, equals("#root=south"))
	p.waitFor("south's sequence initialised", cell("south-1", "health"), equals("ok"))
	p.waitFor("the role in south", text("#role"), equals("PRIMARY"))
	p.waitFor("no error shown", hidden("error"), equals("true"))

	// Every request of a root's data went to that root's routes.
	asked := map[string]bool{}
	for _, req := range p.requestsTo("/v1/") {
		path := strings.TrimPrefix(req.url, p.origin)
		switch {
		case path == "/v1/status?sequences=none": // which roots: once
		case strings.HasPrefix(path, "/v1/roots/north/"), strings.HasPrefix(path, "/v1/roots/south/"):
			route, _, _ := strings.Cut(path, "?")
			asked[route] = true
		default:
			t.Errorf("the page of a replica of several roots asked %s", path)
		}
	}
	for _, route := range []string{"north/sequences", "north/status", "north/history", "south/sequences", "south/status", "south/history"} {
		if !asked["/v1/roots/"+route] {
			t.Errorf("the page never asked /v1/roots/%s (asked %v)", route, asked)
		}
	}

	// A new tab opens on the root of its hash.
	q := openConsoleAt(t, browser, p.origin, "/ui/#root=south")
	q.waitFor("south's sequences in a tab opened on it", rows, equals("south-1"))
	if v := q.eval(`document.getElementById('root').value`); v != "south" {
		t.Errorf("the picker of a tab opened on #root=south shows %q", v)
	}
	// And back, through the hash.
	q.eval(`(location.hash = '#root=north', '')`)
	q.waitFor("north's sequences after the hash changed", rows, equals("north-1,north-2"))
	p.check()
	q.check()
}

// serveConfig runs 'seqkeeper --config config serve' in-process, with no
// SEQKEEPER_* variables, on a free port.
func serveConfig(t *testing.T, config, id string) *replicaProc {
	t.Helper()
	r := &replicaProc{id: id, addr: freeAddr(t), exit: make(chan int, 1), stderr: &testenv.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	g := &globals{
		stdin: strings.NewReader(""), stdout: io.Discard, stderr: r.stderr,
		lookupEnv:    func(string) (string, bool) { return "", false },
		storeCeiling: storeCeiling,
	}
	go func() { r.exit <- run(ctx, g, []string{"--config", config, "serve", "--http", r.addr, "--id", id}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.exit:
		case <-time.After(30 * time.Second):
			t.Errorf("replica %s did not stop", id)
		}
		if t.Failed() {
			l := r.stderr.String()
			if len(l) > 16<<10 {
				l = "..." + l[len(l)-16<<10:]
			}
			t.Logf("replica %s's log (its end):\n%s", id, l)
		}
	})
	return r
}
