package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

// maxTake bounds take -n; a larger batch belongs in a program using the
// library or the HTTP API.
const maxTake = 1_000_000

func newTakeCmd(g *globals) *cobra.Command {
	var n int64
	cmd := &cobra.Command{
		Use:   "take NAME",
		Short: "Take IDs from a sequence and print them",
		Long: `Take N IDs (default 1) from a sequence, by compare-and-set in ZooKeeper, and
print the ranges handed out, one start:end per line (a single ID as id:id).
Recycled IDs come first. Fewer than N are printed when fewer remain below the
reserved ceiling; at the ceiling, take waits up to ceiling_wait for the
primary to raise it. The IDs are yours: push back the ones you do not use.`,
		Example: "  seqkeeper take orders -n 100\n  seqkeeper take orders -o json",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if n < 1 || n > maxTake {
				return usagef("-n %d: want 1 to %d", n, maxTake)
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			got, err := seqs.Take(cmd.Context(), name, n)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(httpapi.IDsResponse{Sequence: name, Ranges: httpapi.IDRanges(got)})
			}
			for _, r := range got {
				fmt.Fprintf(g.stdout, "%d:%d\n", r.Start, r.End)
			}
			return nil
		},
	}
	cmd.Flags().Int64VarP(&n, "count", "n", 1, "number of IDs to take")
	return cmd
}
