package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/primary"
)

func newWidenCmd(g *globals) *cobra.Command {
	var end int64
	cmd := &cobra.Command{
		Use:   "widen NAME --max N",
		Short: "Move the end of a sequence's space up to N",
		Long: `Move the end of a bounded sequence's space up to N, so that it goes on handing
out IDs above its old end: a sequence that used up its space, or lost part of
it to a restore after a ZooKeeper data loss (which skips what the store had
reserved). The store learns the new end before ZooKeeper does, so widen needs
the store; it is safe while takers run and while a primary runs, which then
raises the ceiling into the wider space.

Refused (exit 2, nothing changed): N below the current end (a space never
narrows: IDs up to it may have been handed out), a legacy 8-byte counter.`,
		Example: "  seqkeeper widen invoices --max 2000000",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !cmd.Flags().Changed("max") {
				return usagef("widen needs --max N, the new last ID of the sequence's space")
			}
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "widen", "it records the new end there before ZooKeeper", false)
			if err != nil {
				return err
			}
			defer zc.Close()
			before, _, err := seqs.Describe(cmd.Context(), name)
			if err != nil {
				return err
			}
			st, err := primary.Widen(cmd.Context(), seqs, store, name, end)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "max_before": before.End, "max": st.End, "widened": st.End != before.End})
			}
			if st.End == before.End {
				fmt.Fprintf(g.stdout, "sequence %q ends at %d already: nothing to do\n", name, st.End)
				return nil
			}
			fmt.Fprintf(g.stdout, "widened sequence %q: its space ends at %d (was %d), in the store first; the primary raises its ceiling into it\n", name, st.End, before.End)
			return nil
		},
	}
	cmd.Flags().Int64Var(&end, "max", 0, "the new last ID of the sequence's space (at least its current one)")
	return cmd
}
