package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/spf13/cobra"
)

func newCreateCmd(g *globals) *cobra.Command {
	var r seqzk.Registration
	var ifNotExists bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Register a new sequence; the primary initialises it",
		Long: `Register a new sequence by creating its znode under the root. The primary
initialises it (and reserves its first ceiling) when it sees it; until then
takes wait. Names are 1 to 200 of A-Z a-z 0-9 . _ -, starting with a letter
or digit.

--windows N splits a hot sequence into N windows (sub-ranges, each a znode
of its own) so that N clients take IDs without contending: each client keeps
to one window, every window is sized for about 10 s of the demand it sees and
is refilled before it runs dry. IDs stay unique, no longer in order.`,
		Example: "  seqkeeper create orders\n  seqkeeper create invoices --start 1000000 --windows 4",
		Args:    nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := r.Check(func(s string) string { return "--" + s }); err != nil {
				return usagef("%s", strings.TrimPrefix(err.Error(), seqzk.ErrInvalidSettings.Error()+": "))
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			created, err := seqs.Operator().Create(cmd.Context(), name, r)
			switch {
			case err == nil && !created && !ifNotExists:
				return fmt.Errorf("sequence %q %w (with --if-not-exists that is a success when its settings match)", name, seqzk.ErrExists)
			case errors.Is(err, seqzk.ErrOtherSettings) && ifNotExists:
				return fmt.Errorf("%w; --if-not-exists changes nothing", err)
			case errors.Is(err, seqzk.ErrOtherSettings):
				return fmt.Errorf("sequence %q %w (with --if-not-exists that is a success when its settings match)", name, seqzk.ErrExists)
			case err != nil:
				return err
			}
			got := r.Resolved()
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "start": got.Start, "end": got.End, "windows": got.Windows, "created": created})
			}
			if !created {
				fmt.Fprintf(g.stdout, "sequence %q exists with these settings: IDs %d to %d, %d windows; nothing to do\n", name, got.Start, got.End, got.Windows)
				return nil
			}
			fmt.Fprintf(g.stdout, "created sequence %q: IDs %d to %d, %d windows; the primary initialises it when it sees it\n",
				name, got.Start, got.End, got.Windows)
			return nil
		},
	}
	cmd.Flags().Int64Var(&r.Start, "start", 0, "first ID (default 1)")
	cmd.Flags().Int64Var(&r.End, "max", 0, "last ID (default 9223372036854775807)")
	cmd.Flags().IntVar(&r.Windows, "windows", 0, "windows for a hot sequence, about one per concurrent client (IDs stay unique, not ordered)")
	cmd.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed without change when the sequence exists with the same --start, --max and --windows (fail when they differ)")
	return cmd
}
