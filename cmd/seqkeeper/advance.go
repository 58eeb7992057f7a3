package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/primary"
)

func newAdvanceCmd(g *globals) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "advance NAME --to N",
		Short: "Move a sequence forward so that it hands out no ID below N",
		Long: `Move a sequence forward, after an import or a migration, so that from now on
it hands out no ID below N: its next ID moves up to N, never down, and its
recycled IDs and open windows are dropped (they lie below its next ID). The
store learns the new ceiling (N plus twice min_reserve IDs) before ZooKeeper
does, so advance needs the store; it is safe while takers run and while a
primary starts or changes. A sequence already at or past N is left alone.

Refused (exit 2, nothing changed): N beyond the last ID of the sequence's
space, an exhausted sequence, a legacy 8-byte counter, a sequence the
primary has not initialised yet. IDs that clients took before the advance
(a hi-lo allocator's batch, a sidecar's) are theirs and may still be handed
out by them: restart them to be sure.`,
		Example: "  seqkeeper advance orders --to 5000000",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !cmd.Flags().Changed("to") {
				return usagef("advance needs --to N, the lowest ID the sequence may hand out from now on")
			}
			if to < 1 {
				return usagef("--to %d: IDs start at 1 or above", to)
			}
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "advance", "it records the new ceiling there before ZooKeeper", false)
			if err != nil {
				return err
			}
			defer zc.Close()
			a, err := primary.Advance(cmd.Context(), seqs, store, name, to, g.cfg.MinReserve)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				out := map[string]any{"sequence": name, "to": to, "advanced": a.Changed()}
				if a.Changed() {
					out["next_before"], out["next"], out["ceiling"] = a.Replaced.Next, a.State.Next, a.State.Ceiling
					out["recycled_dropped"] = a.Replaced.Recycled.Count()
				}
				return g.printJSON(out)
			}
			if !a.Changed() {
				fmt.Fprintf(g.stdout, "sequence %q hands out no ID below %d already: nothing to do\n", name, to)
				return nil
			}
			fmt.Fprintf(g.stdout, "advanced sequence %q: next %d -> %d, ceiling %d (in the store first); %d recycled IDs and the open windows dropped\n",
				name, a.Replaced.Next, a.State.Next, a.State.Ceiling, a.Replaced.Recycled.Count())
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "the lowest ID the sequence may hand out from now on")
	return cmd
}
