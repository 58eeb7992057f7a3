package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/testenv"
	"github.com/seqkeeper/seqkeeper/persist"
)

// rootNameCLI runs the command line in-process with a config file and an
// environment of its own (no SEQKEEPER_ROOT and the like, which
// --root-name refuses beside it).
type rootNameCLI struct {
	t   *testing.T
	env map[string]string
}

func (c *rootNameCLI) run(args ...string) (string, string, int) {
	c.t.Helper()
	var stdout, stderr testenv.Buffer
	g := &globals{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		lookupEnv:    func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
		storeCeiling: storeCeiling,
	}
	code := run(context.Background(), g, args)
	return stdout.String(), stderr.String(), code
}

func (c *rootNameCLI) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("seqkeeper %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// refused runs a command that must exit 2 with a message holding every
// one of want.
func (c *rootNameCLI) refused(args []string, want ...string) {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	for _, w := range want {
		if code != 2 || !strings.Contains(errOut, w) {
			c.t.Errorf("seqkeeper %s: exit %d, stderr %q; want exit 2 saying %q (stdout %q)", strings.Join(args, " "), code, errOut, w, out)
		}
	}
}

// writeFile writes a config file into dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --root-name picks one root of a config file's roots: list for the
// operator commands: create, list, delete and leader work on that entry's
// root, store and election path (set in one entry, derived in the other)
// and on no other root's; the environment's SEQKEEPER_ROOT_NAME does the
// same. Without it, with an unknown name, beside --store or
// SEQKEEPER_ROOT, for serve, and naming a root a file without roots: does
// not have, the command exits 2 saying what to do.
func TestRootNamePicksARootOfTheList(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	conn := testenv.Connect(t, z.Servers, 10*time.Second)
	dir := t.TempDir()
	type root struct{ name, root, store, election string }
	orders := root{"orders", z.Path("orders", "sequences"), filepath.Join(dir, "orders-store"), z.Path("orders-election")}
	billing := root{"billing", z.Path("billing", "ids"), filepath.Join(dir, "billing-store"), ""}
	billing.election, _ = config.DerivedPaths(billing.root)
	for _, r := range []root{orders, billing} {
		if err := os.Mkdir(r.store, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rootsFile := writeFile(t, dir, "roots.yaml", fmt.Sprintf(`zk: [%s]
zk_connect_timeout: 5s
ceiling_wait: 500ms
log_format: json
roots:
  - {name: orders, root: %s, store: "file://%s", election_path: %s}
  - {name: billing, root: %s, store: "file://%s"}
`, strings.Join(z.Servers, ", "), orders.root, orders.store, orders.election, billing.root, billing.store))
	c := &rootNameCLI{t: t, env: map[string]string{}}

	c.ok("--config", rootsFile, "--root-name", "orders", "create", "only-in-orders")
	c.env[envRootName] = "billing"
	c.ok("--config", rootsFile, "create", "only-in-billing")
	delete(c.env, envRootName)

	ctx := context.Background()
	exists := func(path string) bool {
		t.Helper()
		ok, _, err := conn.Session().Exists(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, r := range []root{orders, billing} {
		for _, seq := range []string{"only-in-orders", "only-in-billing"} {
			if want := seq == "only-in-"+r.name; exists(r.root+"/"+seq) != want {
				t.Errorf("%s/%s exists: %v, want %v", r.root, seq, !want, want)
			}
		}
		out := c.ok("--config", rootsFile, "--root-name", r.name, "list", "-o", "json")
		if !strings.Contains(out, `"only-in-`+r.name+`"`) || strings.Count(out, `"only-in-`) != 1 {
			t.Errorf("list --root-name %s: %s; want only-in-%s alone", r.name, out, r.name)
		}
		// The election path is the entry's (set, or derived as serve
		// derives it): leader names it when no replica runs.
		if _, errOut, code := c.run("--config", rootsFile, "--root-name", r.name, "leader"); code != 1 || !strings.Contains(errOut, "no candidates under "+r.election+")") {
			t.Errorf("leader --root-name %s: exit %d %q; want exit 1 naming the election %s", r.name, code, errOut, r.election)
		}
	}
	// --all-roots runs the read-only commands once per root: each root's
	// sequences under its own heading, or one JSON object of them all.
	out := c.ok("--config", rootsFile, "--all-roots", "list")
	for _, r := range []root{orders, billing} {
		head := fmt.Sprintf("== root %s (%s) ==\n", r.name, r.root)
		i := strings.Index(out, head)
		if i < 0 || !strings.Contains(out[i:], "only-in-"+r.name) {
			t.Errorf("list --all-roots lacks %q followed by only-in-%s:\n%s", head, r.name, out)
		}
	}
	var all struct {
		Roots []struct {
			Name, Root string
			Output     json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(c.ok("--config", rootsFile, "--all-roots", "list", "-o", "json")), &all); err != nil ||
		len(all.Roots) != 2 || all.Roots[0].Name != "orders" || !strings.Contains(string(all.Roots[1].Output), "only-in-billing") {
		t.Errorf("list --all-roots -o json: %+v, %v", all, err)
	}
	// No replica runs: leader fails for each root, exit 1, naming each.
	if out, errOut, code := c.run("--config", rootsFile, "--all-roots", "leader"); code != 1 ||
		!strings.Contains(errOut, "root orders: no leader elected") || !strings.Contains(errOut, "root billing: no leader elected") {
		t.Errorf("leader --all-roots: exit %d\n%s%s", code, out, errOut)
	}
	c.refused([]string{"--config", rootsFile, "--all-roots", "create", "x"}, "works on one root at a time")
	c.refused([]string{"--config", rootsFile, "--all-roots", "--root-name", "orders", "list"}, "both say which roots to work on")

	if exists(config.DefaultRoot + "/only-in-orders") {
		t.Errorf("a sequence was created under the default root %s", config.DefaultRoot)
	}

	// Each root's store: delete leaves its tombstone in its root's store,
	// and nowhere else.
	c.ok("--config", rootsFile, "--root-name", "orders", "delete", "only-in-orders", "--yes")
	c.ok("--config", rootsFile, "--root-name", "billing", "delete", "only-in-billing", "--yes")
	for _, r := range []root{orders, billing} {
		b, err := persist.NewFile(r.store)
		if err != nil {
			t.Fatal(err)
		}
		s, err := persist.NewStore(b, persist.StoreOptions{Root: r.root})
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range []string{"only-in-orders", "only-in-billing"} {
			rec, err := s.Get(ctx, seq)
			switch want := seq == "only-in-"+r.name; {
			case want && (err != nil || !rec.Deleted()):
				t.Errorf("store of %s: %s: %+v %v; want its tombstone", r.name, seq, rec, err)
			case !want && !errors.Is(err, persist.ErrNotFound):
				t.Errorf("store of %s: %s: %+v %v; want no record (another root's)", r.name, seq, rec, err)
			}
		}
	}

	// The refusals.
	c.refused([]string{"--config", rootsFile, "list"},
		"the config file lists several roots (orders, billing); this command works on one: pick one with --root-name (one of: orders, billing)")
	c.refused([]string{"--config", rootsFile, "--root-name", "ordres", "list"},
		"--root-name ordres: no root of that name in the config file's roots: list (orders, billing): did you mean orders?")
	c.env[envRootName] = "shipping"
	c.refused([]string{"--config", rootsFile, "list"}, "SEQKEEPER_ROOT_NAME shipping: no root of that name", "(orders, billing)")
	delete(c.env, envRootName)
	c.refused([]string{"--config", rootsFile, "--root-name", "orders", "--store", "file://" + dir, "list"},
		"--root-name orders and --store both say which root to work on")
	c.refused([]string{"--config", rootsFile, "--root-name", "orders", "--election-path", "/x", "list"}, "--election-path")
	c.env["SEQKEEPER_ROOT"] = "/elsewhere"
	c.refused([]string{"--config", rootsFile, "--root-name", "orders", "list"}, "--root-name orders and SEQKEEPER_ROOT both say")
	delete(c.env, "SEQKEEPER_ROOT")
	c.refused([]string{"--config", rootsFile, "--root-name", "orders", "serve", "--http", "127.0.0.1:0"},
		"--root-name orders: serve hosts every root of its configuration")

	// A file of one root (no roots: list): --root-name may name that root,
	// by the name its rooted routes have, and nothing else.
	single := z.Path("single", "ids")
	singleFile := writeFile(t, dir, "single.yaml", fmt.Sprintf("zk: [%s]\nzk_connect_timeout: 5s\nroot: %s\n", strings.Join(z.Servers, ", "), single))
	c.ok("--config", singleFile, "--root-name", "ids", "create", "one")
	if !exists(single + "/one") {
		t.Errorf("create --root-name ids with a file of the root %s: no %s/one", single, single)
	}
	c.refused([]string{"--config", singleFile, "--root-name", "orders", "list"},
		"--root-name orders: the configuration has no roots: list; its one root, "+single+", is named ids")
}

// --all-roots joins each root's error: a usage error wins (2), then any
// failure (1); a loss verify found is 3 only when every root's error is.
func TestAllRootsExitCodeIsTheWorst(t *testing.T) {
	t.Parallel()
	lost := func(root string) error { return fmt.Errorf("root %s: %w", root, lossPending{1}) }
	for _, c := range []struct {
		err  error
		want int
	}{
		{errors.Join(lost("a"), lost("b")), 3},
		{errors.Join(lost("a"), fmt.Errorf("root b: %w", errNoLeader)), 1},
		{errors.Join(lost("a"), usagef("bad")), 2},
		{lost("a"), 3},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
