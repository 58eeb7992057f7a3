package main

import (
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/sequence"
)

func newPushCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "push NAME RANGE...",
		Short: "Give unused IDs back to a sequence",
		Long: `Give IDs you took and will not use back to a sequence; later takes hand them
out before fresh ones. RANGE is start:end (inclusive) or a single ID.

Push refuses, changing nothing, IDs the sequence never issued, IDs outside
its space, and IDs already recycled: accepting them could hand an ID out
twice. It cannot tell IDs you took from IDs someone else took: push only
your own. If the connection is lost mid-push, the outcome is unknown and the
IDs must be treated as lost (do not push them again).`,
		Example: "  seqkeeper push orders 1001:1100 1205",
		Args:    nameArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			ranges := make([]sequence.Range, 0, len(args)-1)
			for _, a := range args[1:] {
				r, err := state.ParseRange(a)
				if err != nil {
					return usagef("%v; write ranges as start:end or a single ID", err)
				}
				ranges = append(ranges, r)
			}
			norm, err := sequence.NormalizeRanges(ranges)
			if err != nil {
				return usagef("%v", err)
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			if err := seqs.Push(cmd.Context(), name, norm); err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "recycled": norm.Count(), "ranges": httpapi.IDRanges(norm)})
			}
			fmt.Fprintf(g.stdout, "pushed %d IDs back to %q: %s\n", norm.Count(), name, norm)
			return nil
		},
	}
}
