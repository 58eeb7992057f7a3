// Package docmap holds the test that keeps docs/architecture.md's package
// table true to the code.
package docmap

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/seqkeeper/seqkeeper/"

// tableRow is a row of the package table: | `pkg` | provides | callers |.
var tableRow = regexp.MustCompile("^\\| `([^`]+)`(?:, `[^`]+`)* \\| .* \\| ([^|]*) \\|$")

// backticked finds the `names` of a cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// Every package of the module is in the table of docs/architecture.md, and
// for an internal package the "who may call it" column lists exactly the
// packages that import it (besides tests): the map cannot drift from the
// ground again.
func TestArchitectureMapMatchesTheImports(t *testing.T) {
	md, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string][]string{} // package -> the column's packages
	documented := map[string]bool{}
	for line := range strings.Lines(string(md)) {
		m := tableRow.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		first := strings.SplitN(line, " | ", 2)[0]
		var listed []string
		for _, c := range backticked.FindAllStringSubmatch(m[2], -1) {
			listed = append(listed, c[1])
		}
		for _, p := range backticked.FindAllStringSubmatch(first, -1) {
			documented[p[1]] = true
			callers[p[1]] = listed
		}
	}
	if len(documented) < 10 {
		t.Fatalf("found %d rows in the package table of docs/architecture.md: has its form changed?", len(documented))
	}

	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := map[string][]string{}
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		p, deps, _ := strings.Cut(strings.TrimSpace(line), ":")
		p = strings.TrimPrefix(p, module)
		pkgs = append(pkgs, p)
		for d := range strings.FieldsSeq(deps) {
			if dep, ok := strings.CutPrefix(d, module); ok {
				importers[dep] = append(importers[dep], p)
			}
		}
	}
	for _, p := range pkgs {
		if !documented[p] && !documentedUnder(p, documented) {
			t.Errorf("package %s is missing from the package table of docs/architecture.md", p)
		}
	}
	for p, listed := range callers {
		if !strings.HasPrefix(p, "internal/") {
			continue // public: anyone may call it
		}
		want := slices.Sorted(slices.Values(importers[p]))
		var got []string
		for _, c := range listed {
			if slices.Contains(pkgs, c) {
				got = append(got, c)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md says %s is called by %v; it is imported by %v", p, got, want)
		}
	}
}

// documentedUnder reports whether p is inside a documented package's tree
// that the table describes as a whole (a tool's or test helper's
// subpackages, the vendored go-zookeeper).
func documentedUnder(p string, documented map[string]bool) bool {
	for d := range documented {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
