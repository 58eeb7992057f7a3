package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

// maxTake bounds take -n; a larger batch belongs in a program using the
// library or the HTTP API.
const maxTake = 1_000_000

func newTakeCmd(g *globals) *cobra.Command {
	var n int64
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "take NAME",
		Short: "Take IDs from a sequence and print them",
		Long: `Take N IDs (default 1) from a sequence, by compare-and-set in ZooKeeper, and
print the ranges handed out, one start:end per line (a single ID as id:id).
Recycled IDs come first. Fewer than N are printed when fewer remain below the
reserved ceiling; at the ceiling, take waits up to ceiling_wait for the
primary to raise it, and at the end of a bounded space it takes what is
left; either way it says so on stderr (the exit code stays 0: the IDs
printed are yours). The IDs are yours: push back the ones you do not use.`,
		Example: "  seqkeeper take orders -n 100\n  seqkeeper take orders -o json\n  seqkeeper take orders -n 3 --every 1s   (a demo worker: until SIGTERM)",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if n < 1 || n > maxTake {
				return usagef("-n %d: want 1 to %d", n, maxTake)
			}
			if every < 0 {
				return usagef("--every %s: want a positive interval", every)
			}
			ctx := cmd.Context()
			if every > 0 {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
				defer stop()
			}
			zc, seqs, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer zc.Close()
			for {
				got, err := seqs.Take(ctx, name, n)
				switch {
				case err != nil && every == 0:
					return err
				case err != nil && ctx.Err() != nil:
					return nil
				case err != nil:
					// A worker keeps going: a failover or an outage shows
					// as a pause and a message, then IDs flow again.
					fmt.Fprintf(g.stderr, "seqkeeper: %s %v\n", time.Now().Format(time.TimeOnly), err)
				case g.jsonOutput():
					if err := g.printJSON(httpapi.IDsResponse{Sequence: name, Ranges: httpapi.IDRanges(got)}); err != nil {
						return err
					}
				default:
					for _, r := range got {
						fmt.Fprintf(g.stdout, "%d:%d\n", r.Start, r.End)
					}
				}
				if err == nil && got.Count() < n {
					g.fewer(ctx, seqs, name, got.Count(), n)
				}
				if every == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	cmd.Flags().Int64VarP(&n, "count", "n", 1, "number of IDs to take")
	cmd.Flags().DurationVar(&every, "every", 0, "repeat every interval until interrupted, printing each batch (a demo worker); errors are reported and retried")
	return cmd
}

// fewer says on stderr that a take handed out got of the n IDs asked for,
// and why: the end of the sequence's space, or its reserved ceiling.
func (g *globals) fewer(ctx context.Context, seqs *seqzk.Client, name string, got, n int64) {
	why := "fewer remain below the reserved ceiling; take again for more"
	if st, _, err := seqs.Describe(ctx, name); err == nil && !st.Legacy && st.Next > st.End {
		why = fmt.Sprintf("its space ends at %d: the sequence is exhausted now ('seqkeeper widen %s --max N' extends it)", st.End, name)
	}
	fmt.Fprintf(g.stderr, "seqkeeper: took %d of the %d IDs asked for: %s\n", got, n, why)
}
