package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// advance through the command line: forward, already past, refused (exit
// 2), and its usage errors.
func TestAdvanceCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	c.ok("create", "adv")
	c.initialise("adv", 500)
	c.ok("take", "adv", "-n", "10")
	if out := c.ok("advance", "adv", "--to", "1000"); !strings.Contains(out, `advanced sequence "adv": next 11 -> 1000`) {
		t.Fatalf("advance: %q", out)
	}
	if out := c.ok("take", "adv"); !strings.HasPrefix(strings.TrimSpace(out), "1000") {
		t.Fatalf("take after advancing to 1000: %q", out)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(c.ok("advance", "adv", "--to", "20", "-o", "json")), &js); err != nil || js["advanced"] != false {
		t.Fatalf("advance backwards -o json: %v %v", js, err)
	}
	c.ok("create", "small", "--max", "100")
	c.initialise("small", 50)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"advance", "small", "--to", "101"}, "beyond the last ID of its space (100)"},
		{[]string{"advance", "adv"}, "advance needs --to N"},
		{[]string{"advance", "adv", "--to", "0"}, "--to 0"},
	} {
		if _, errOut, code := c.run("", tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("seqkeeper %s: exit %d, %q; want 2 naming %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	delete(c.env, "SEQKEEPER_STORE")
	if _, errOut, code := c.run("", "advance", "adv", "--to", "2000"); code != 2 || !strings.Contains(errOut, "advance needs the store") {
		t.Errorf("advance without a store: exit %d, %q", code, errOut)
	}
}

// Moving a root as docs/cli.md tells it: export from one root and store,
// import into another, import again, start a replica there (on a
// configuration that sets only the root: it leads and serves, since the
// import claimed the derived paths). Inputs that are not exports exit 2,
// refused lines exit 1.
func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	src := newCLI(t)
	src.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	src.ok("create", "moved", "--start", "100")
	src.initialise("moved", 400)
	src.ok("take", "moved", "-n", "5")
	file := filepath.Join(t.TempDir(), "root.jsonl")
	if _, errOut, code := src.run("", "export", "--file", file); code != 0 || !strings.Contains(errOut, "exported 1 sequences") {
		t.Fatalf("export: exit %d, %q", code, errOut)
	}

	dst := newCLI(t)
	dst.root += "-moved"
	dst.env["SEQKEEPER_STORE"] = "file://" + t.TempDir()
	derivedOnly(dst)
	if out := dst.ok("import", "--file", file); !strings.Contains(out, "1 created, 0 advanced, 0 tombstoned, 0 unchanged, 0 refused") {
		t.Fatalf("import: %q", out)
	}
	if out := dst.ok("import", "--file", file); !strings.Contains(out, "0 created, 0 advanced, 0 tombstoned, 1 unchanged, 0 refused") {
		t.Fatalf("import again: %q", out)
	}
	if out := dst.ok("take", "moved"); !strings.HasPrefix(strings.TrimSpace(out), "401") {
		t.Fatalf("take after the import (exported ceiling 400): %q", out)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), `"start":100`, `"start":7`, 1)
	if out, _, code := dst.run(changed, "import"); code != 1 || !strings.Contains(out, "refused    moved: settings differ") {
		t.Fatalf("import with other settings: exit %d, %q", code, out)
	}
	if _, errOut, code := dst.run("hello\n", "import"); code != 2 || !strings.Contains(errOut, "not a seqkeeper export") {
		t.Fatalf("import of garbage: exit %d, %q", code, errOut)
	}
	startTheReplicas(dst, "moved", 402)
}
