// Command promrules checks Prometheus rule files as `promtool check rules`
// does: strict YAML (unknown fields are errors), every expression parsed as
// PromQL, `for` durations, labels and annotation templates. It uses the
// Prometheus module's own rulefmt package, from the Go module proxy, and is
// a module of its own so that Prometheus stays out of seqkeeper's module
// graph. scripts/validate-manifests.sh runs it on the alert rules of
// docs/operations.md.
//
//	go run . FILE...
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/prometheus/model/rulefmt"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules RULE-FILE...")
		os.Exit(2)
	}
	failed := false
	for _, f := range os.Args[1:] {
		groups, errs := rulefmt.ParseFile(f)
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			failed = true
		}
		if len(errs) == 0 {
			n := 0
			for _, g := range groups.Groups {
				n += len(g.Rules)
			}
			fmt.Printf("%s: %d rules in %d groups, valid\n", f, n, len(groups.Groups))
		}
	}
	if failed {
		os.Exit(1)
	}
}
