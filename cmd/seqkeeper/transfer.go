package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/transfer"
)

func newExportCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every sequence and tombstone as JSON lines",
		Long: `Write every sequence of the root (next, ceiling, space, windows, recycled IDs)
and every tombstone of the store as JSON lines, sorted by name, after a header
line: the input of 'seqkeeper import', to move a root to a new ensemble or a
new bucket. Each ceiling is the higher of ZooKeeper's and the store's.

An export is a snapshot of a live system. To move a root, stop its primary
('seqkeeper serve') and its takers first: IDs they hand out after the export
are not covered by it.`,
		Example: "  seqkeeper export > sequences.jsonl\n  seqkeeper export --file sequences.jsonl",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "export", "tombstones and the ceilings it covers live there", false)
			if err != nil {
				return err
			}
			defer zc.Close()
			w := io.Writer(g.stdout)
			var f *os.File
			if file != "" && file != "-" {
				if f, err = os.Create(file); err != nil {
					return usagef("--file: %v", err)
				}
				w = f
			}
			n, err := transfer.Export(cmd.Context(), seqs, store, w)
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			fmt.Fprintf(g.stderr, "exported %d sequences (%d known only to the store) and %d tombstones\n", n.Sequences, n.StoreOnly, n.Tombstones)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "write to this file instead of standard output")
	return cmd
}

func newImportCmd(g *globals) *cobra.Command {
	var file string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Read an export into this root; never moves a counter back or revives a name",
		Long: `Read the JSON lines of 'seqkeeper export' into the root and the store of this
configuration. A sequence the root lacks is created above the export's ceiling
(its new ceiling written to the store first, as a restore does); one it has
with the same settings is advanced there if it is below (as 'seqkeeper
advance' does); a tombstone is recorded in the store. Recycled IDs are not
imported: they lie below the export's ceiling. Lines that would move a counter
back, bring back a deleted name, delete a live one, or change a sequence's
settings are refused and listed (exit 1); the other lines are still imported.
Running import again changes nothing.`,
		Example: "  seqkeeper import --file sequences.jsonl --dry-run\n  seqkeeper import < sequences.jsonl",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := io.Reader(g.stdin)
			if file != "" && file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return usagef("--file: %v", err)
				}
				defer f.Close()
				in = f
			}
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "import", "ceilings and tombstones are written there first", true)
			if err != nil {
				return err
			}
			defer zc.Close()
			if !dryRun {
				if err := usageIfConfig(host.ClaimPaths(cmd.Context(), g.cfg, seqs)); err != nil {
					return err // before any write: nothing was imported
				}
			}
			out, err := transfer.Import(cmd.Context(), seqs, store, in, transfer.ImportOptions{MinReserve: g.cfg.MinReserve, DryRun: dryRun})
			if errors.Is(err, transfer.ErrNotExport) {
				return usagef("import: %v; nothing was imported", err)
			}
			counts := map[string]int{}
			for _, o := range out {
				counts[o.Action]++
			}
			if g.jsonOutput() {
				if perr := g.printJSON(map[string]any{"dry_run": dryRun, "lines": out, "counts": counts}); perr != nil {
					return perr
				}
			} else {
				for _, o := range out {
					if o.Action == transfer.Unchanged && !dryRun {
						continue
					}
					line := fmt.Sprintf("line %d: %-10s %s", o.Line, o.Action, o.Name)
					if o.Reason != "" {
						line += ": " + o.Reason
					}
					fmt.Fprintln(g.stdout, line)
				}
				fmt.Fprintf(g.stdout, "%d created, %d advanced, %d tombstoned, %d unchanged, %d refused%s\n",
					counts[transfer.Created], counts[transfer.Advanced], counts[transfer.Tombstoned], counts[transfer.Unchanged], counts[transfer.Refused],
					map[bool]string{true: " (dry run: nothing changed)"}[dryRun])
			}
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			if counts[transfer.Refused] > 0 {
				return fmt.Errorf("import: %d line(s) refused: see above; the other lines were imported", counts[transfer.Refused])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read this file instead of standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "decide every line, change nothing")
	return cmd
}
