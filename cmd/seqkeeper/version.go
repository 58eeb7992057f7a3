package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the seqkeeper version",
		Args:        usageArgs(cobra.NoArgs),
		Annotations: map[string]string{annotationNoConfig: "true"},
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(g.stdout, buildVersion())
			return nil
		},
	}
}

// buildVersion is the version stamped at build time, else the module's.
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
