package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

func newAdoptCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "adopt NAME",
		Short: "Move a Curator 8-byte counter to seqkeeper's format, above its value",
		Long: `Move the 8-byte counter at NAME, written by Apache Curator's
DistributedAtomicLong (or an older seqkeeper), to seqkeeper's state format:
from then on it has a reserved ceiling in the durable store, and seqkeeper's
full guarantee (a legacy counter's IDs can be handed out twice after a
ZooKeeper data loss). The new state hands out IDs from above the counter (and
above any mark of it the store holds), with twice min_reserve IDs reserved.

The store learns the new ceiling first; then the counter is replaced in one
transaction at the version read, guarded by the name's deletion record, and
then the store learns the new sequence: a worker that moves the counter, or
a delete, meanwhile only makes adopt read it again. It is safe beside seqkeeper's own
takers and a running primary. Stop the writers of other libraries first
(Curator would read the new data as a number and write one back);
move them to seqkeeper's library or HTTP API (docs/migrate.md).

A sequence in seqkeeper's format already is left alone (exit 0). Refused
(exit 2): a counter at the end of the ID space. kazoo's
Counter writes decimal text, which seqkeeper reads as a registration: see
docs/migrate.md for it.`,
		Example: "  seqkeeper adopt orders",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "adopt", "it records the new ceiling there before ZooKeeper", false)
			if err != nil {
				return err
			}
			defer zc.Close()
			// The adopted sequence is validated, as only a primary's were:
			// the replica started next must find its paths claimed.
			if err := usageIfConfig(host.ClaimPaths(cmd.Context(), g.cfg, seqs)); err != nil {
				return err // before any write: nothing was adopted
			}
			a, err := primary.Adopt(cmd.Context(), seqs, store, name, g.cfg.MinReserve)
			if errors.Is(err, seqzk.ErrNotLegacy) {
				if g.jsonOutput() {
					return g.printJSON(map[string]any{"sequence": name, "adopted": false})
				}
				fmt.Fprintf(g.stdout, "sequence %q is in seqkeeper's format already: nothing to do\n", name)
				return nil
			}
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "adopted": true, "format": a.Counter.Format,
					"counter": a.Counter.Value, "next": a.State.Next, "ceiling": a.State.Ceiling})
			}
			fmt.Fprintf(g.stdout, "adopted %q: the %s counter at %d is now a sequence handing out IDs from %d, ceiling %d (in the store first)\n",
				name, a.Counter.Format, a.Counter.Value, a.State.Next, a.State.Ceiling)
			return nil
		},
	}
}
