package sequence_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// A module outside this repository that imports the worker library gets
// the fixed ZooKeeper client (the vendored copy inside zkclient, not
// upstream go-zookeeper, whose data race a replace directive would not
// pass on) and nothing of the test machinery (testcontainers, moby) in its
// module graph; and the program it builds takes IDs.
func TestOutsideModuleGetsTheFixedClientAndNoTestMachinery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module (go mod tidy, go build): not run with -short")
	}
	e := newEnv(t)
	e.create("orders", seqzk.Registration{}, 1000)

	_, self, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(self))
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(repo, "sequence", "testdata", "outside", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", string(src))
	write("go.mod", "module example.com/outside\n\ngo 1.26\n\n"+
		"require github.com/seqkeeper/seqkeeper v0.0.0\n\n"+
		"replace github.com/seqkeeper/seqkeeper => "+repo+"\n")
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")

	deps := goCmd("list", "-deps", ".")
	for _, want := range []string{"github.com/seqkeeper/seqkeeper/sequence", "github.com/seqkeeper/seqkeeper/zkclient/internal/zk"} {
		if !strings.Contains(deps, want+"\n") {
			t.Errorf("the outside program does not import %s", want)
		}
	}
	graph := goCmd("mod", "graph")
	for _, unwanted := range []string{"github.com/go-zookeeper/zk", "testcontainers", "github.com/moby/", "github.com/docker/"} {
		if strings.Contains(deps, unwanted) {
			t.Errorf("the outside program imports %s", unwanted)
		}
		if strings.Contains(graph, unwanted) {
			t.Errorf("the outside module's graph holds %s:\n%s", unwanted, graph)
		}
	}

	bin := filepath.Join(dir, "outside")
	goCmd("build", "-o", bin, ".")
	out, err := exec.CommandContext(context.Background(), bin,
		"-zk", strings.Join(e.servers, ","), "-root", e.root).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1:3\n4" {
		t.Fatalf("outside program: %v, %q; want it to take 1:3, then 4 from an allocator", err, out)
	}
}

// The README's library example is the outside program's takeOrders, which
// TestOutsideModuleGetsTheFixedClientAndNoTestMachinery builds and runs: it
// compiles, and it handles every error (it used to drop them all, and
// panicked after 30 s without a ZooKeeper).
func TestTheREADMELibraryExampleIsTheOneThatRuns(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(self))
	src, err := os.ReadFile(filepath.Join(repo, "sequence", "testdata", "outside", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(src), "// README begin\n")
	example, _, ok2 := strings.Cut(rest, "\n// README end")
	if !ok1 || !ok2 {
		t.Fatal("sequence/testdata/outside/main.go lost its README begin and end marks")
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+example+"```") {
		t.Errorf("README.md's library example is not takeOrders of sequence/testdata/outside/main.go; copy it:\n%s", example)
	}
}
