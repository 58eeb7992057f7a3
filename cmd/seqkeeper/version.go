package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."
// (scripts/images.sh stamps the output of git describe).
var version = ""

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the seqkeeper version",
		Args:        usageArgs(cobra.NoArgs),
		Annotations: map[string]string{annotationNoConfig: "true"},
		RunE: func(*cobra.Command, []string) error {
			if err := g.resolveOutput(); err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(struct {
					Version  string `json:"version"`
					Revision string `json:"revision,omitempty"`
					Go       string `json:"go"`
				}{buildVersion(), buildRevision(), runtime.Version()})
			}
			fmt.Fprintln(g.stdout, buildVersion())
			return nil
		},
	}
}

// buildVersion is the version stamped at build time, else what the Go
// toolchain recorded: the module version of a `go install ...@v0.1.0`
// build, or for a build from a checkout the commit (and "-dirty" when the
// tree had changes), else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionFrom(bi)
}

// versionFrom reads a version out of the build information.
func versionFrom(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}

// buildRevision is the commit the binary was built from, or "".
func buildRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
