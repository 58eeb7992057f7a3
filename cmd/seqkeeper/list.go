package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

func newListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the sequences under the root with a summary of each",
		Long: `List every sequence under the root, read from ZooKeeper: next (the lowest
ID never issued), the ZooKeeper ceiling, the IDs available now, the recycled
IDs, the windows (open/configured) and a health word. Legacy 8-byte counters
are marked legacy and have no ceiling.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			list, err := httpapi.ListSequences(cmd.Context(), seqs)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				if list == nil {
					list = []httpapi.SequenceSummary{}
				}
				return g.printJSON(map[string]any{"sequences": list})
			}
			if len(list) == 0 {
				fmt.Fprintf(g.stdout, "no sequences under %s; create one with 'seqkeeper create NAME'\n", g.cfg.Root)
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tNEXT\tCEILING\tAVAILABLE\tRECYCLED\tWINDOWS\tHEALTH")
			for _, s := range list {
				if s.Error != "" {
					fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t%s: %s\n", s.Name, s.Kind, s.Health, s.Error)
					continue
				}
				ceiling, avail := orDash(s.Ceiling), strconv.FormatInt(s.Available, 10)
				if s.Kind == httpapi.KindLegacy {
					avail = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d/%d\t%s\n",
					s.Name, s.Kind, s.Next, ceiling, avail, s.RecycledIDs, s.OpenWindows, s.Windows, s.Health)
			}
			return tw.Flush()
		},
	}
}

// orDash prints 0 (no value) as "-".
func orDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}
