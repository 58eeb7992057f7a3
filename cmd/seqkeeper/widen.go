package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

func newWidenCmd(g *globals) *cobra.Command {
	var w seqzk.Widening
	cmd := &cobra.Command{
		Use:   "widen NAME [--max N] [--windows W]",
		Short: "Move the end of a sequence's space up to N, or its windows up to W",
		Long: `Move the end of a bounded sequence's space up to N, so that it goes on handing
out IDs above its old end: a sequence that used up its space, or lost part of
it to a restore after a ZooKeeper data loss (which skips what the store had
reserved). With --windows, give a sequence more lock-free windows (about one
per concurrent client of a very busy sequence). The store learns the new
settings before ZooKeeper does, so widen needs the store; it is safe while
takers run and while a primary runs, which then raises the ceiling into the
wider space; takers open the new windows as they take.

Refused (exit 2, nothing changed): N below the current end (a space never
narrows: IDs up to it may have been handed out), W below the current
windows (the store keeps the most a sequence was given: a restore would
bring them back), a legacy 8-byte counter ('seqkeeper adopt' first).`,
		Example: "  seqkeeper widen invoices --max 2000000\n  seqkeeper widen orders --windows 8",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !cmd.Flags().Changed("max") && !cmd.Flags().Changed("windows") {
				return usagef("widen needs --max N (the new last ID of the sequence's space), --windows W, or both")
			}
			if w.End < 0 || w.Windows < 0 || (cmd.Flags().Changed("max") && w.End == 0) || (cmd.Flags().Changed("windows") && w.Windows == 0) {
				return usagef("widen: --max and --windows take positive numbers")
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
			st, err := primary.Widen(cmd.Context(), seqs, store, name, w)
			if err != nil {
				return err
			}
			widened := st.End != before.End || st.Windows != before.Windows
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "max_before": before.End, "max": st.End,
					"windows_before": before.Windows, "windows": st.Windows, "widened": widened})
			}
			if !widened {
				fmt.Fprintf(g.stdout, "sequence %q ends at %d with %d windows already: nothing to do\n", name, st.End, st.Windows)
				return nil
			}
			fmt.Fprintf(g.stdout, "widened sequence %q: its space ends at %d (was %d), %d windows (were %d), in the store first; the primary raises its ceiling into it\n",
				name, st.End, before.End, st.Windows, before.Windows)
			return nil
		},
	}
	cmd.Flags().Int64Var(&w.End, "max", 0, "the new last ID of the sequence's space (at least its current one)")
	cmd.Flags().IntVar(&w.Windows, "windows", 0, "the new number of window slots (at least its current one)")
	return cmd
}
