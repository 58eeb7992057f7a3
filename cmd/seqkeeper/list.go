package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
)

func newListCmd(g *globals) *cobra.Command {
	var opts httpapi.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the sequences under the root with a summary of each",
		Long: `List every sequence under the root, read from ZooKeeper: next (the lowest
ID never issued), the ZooKeeper ceiling, the IDs available now, the recycled
IDs, the windows (open/configured) and a health word. Legacy 8-byte counters
are marked legacy and have no ceiling.

It reads the sequences a page at a time (--page-size), as GET /v1/sequences
pages, and prints each page as it comes; --prefix and --health narrow it.`,
		Example: "  seqkeeper list\n  seqkeeper list --prefix orders- --health at_ceiling",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Limit < 1 || opts.Limit > httpapi.MaxListLimit {
				return usagef("--page-size %d: want 1 to %d", opts.Limit, httpapi.MaxListLimit)
			}
			if opts.Health != "" && !slices.Contains(httpapi.Healths, opts.Health) {
				return usagef("--health %q: want one of %s", opts.Health, strings.Join(httpapi.Healths, ", "))
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			var all []httpapi.SequenceSummary // for -o json, one object
			var tw *tabwriter.Writer
			for page := opts; ; {
				list, next, err := httpapi.ListPage(cmd.Context(), seqs, page)
				if err != nil {
					return err
				}
				if g.jsonOutput() {
					all = append(all, list...)
				} else if len(list) > 0 {
					if tw == nil {
						tw = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
						fmt.Fprintln(tw, "NAME\tKIND\tNEXT\tCEILING\tAVAILABLE\tRECYCLED\tWINDOWS\tHEALTH")
					}
					printSummaries(tw, list)
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if next == "" {
					break
				}
				page.After = next
			}
			if g.jsonOutput() {
				if all == nil {
					all = []httpapi.SequenceSummary{}
				}
				return g.printJSON(map[string]any{"sequences": all})
			}
			if tw == nil {
				fmt.Fprintf(g.stdout, "no sequences under %s%s; create one with 'seqkeeper create NAME'\n", g.cfg.Root, narrowed(opts))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "only the sequences whose names start with this")
	cmd.Flags().StringVar(&opts.Health, "health", "", "only the sequences with this health: "+strings.Join(httpapi.Healths, ", "))
	cmd.Flags().IntVar(&opts.Limit, "page-size", httpapi.DefaultListLimit, "sequences read and printed at a time")
	return cmd
}

// narrowed says which filters left a list empty.
func narrowed(o httpapi.ListOptions) string {
	var f []string
	if o.Prefix != "" {
		f = append(f, fmt.Sprintf("prefix %q", o.Prefix))
	}
	if o.Health != "" {
		f = append(f, "health "+o.Health)
	}
	if len(f) == 0 {
		return ""
	}
	return " with " + strings.Join(f, " and ")
}

// printSummaries writes one row per sequence.
func printSummaries(tw *tabwriter.Writer, list []httpapi.SequenceSummary) {
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
}

// orDash prints 0 (no value) as "-".
func orDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}
