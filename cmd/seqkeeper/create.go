package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/sequence/state"

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
			switch {
			case r.Start < 0:
				return usagef("--start %d: IDs start at 1 or above", r.Start)
			case r.End < 0 || (r.End != 0 && r.End < max(r.Start, state.DefaultStart)):
				return usagef("--max %d: must be at least the start (%d)", r.End, max(r.Start, state.DefaultStart))
			case r.Windows < 0 || r.Windows > state.MaxWindows:
				return usagef("--windows %d: want 0 to %d", r.Windows, state.MaxWindows)
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			if err := zc.EnsurePath(cmd.Context(), g.cfg.Root); err != nil {
				return fmt.Errorf("create the root %s: %w", g.cfg.Root, err)
			}
			start, end := r.Start, r.End
			if start == 0 {
				start = state.DefaultStart
			}
			if end == 0 {
				end = state.MaxID
			}
			created := true
			err = seqs.Register(cmd.Context(), name, r)
			if errors.Is(err, seqzk.ErrExists) && ifNotExists {
				if err = sameSettings(cmd.Context(), seqs, name, start, end, r.Windows); err != nil {
					return err
				}
				created = false
			}
			if errors.Is(err, seqzk.ErrExists) {
				return fmt.Errorf("%w (with --if-not-exists that is a success when its settings match)", err)
			}
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "start": start, "end": end, "windows": r.Windows, "created": created})
			}
			if !created {
				fmt.Fprintf(g.stdout, "sequence %q exists with these settings: IDs %d to %d, %d windows; nothing to do\n", name, start, end, r.Windows)
				return nil
			}
			fmt.Fprintf(g.stdout, "created sequence %q: IDs %d to %d, %d windows; the primary initialises it when it sees it\n",
				name, start, end, r.Windows)
			return nil
		},
	}
	cmd.Flags().Int64Var(&r.Start, "start", 0, "first ID (default 1)")
	cmd.Flags().Int64Var(&r.End, "max", 0, "last ID (default 9223372036854775807)")
	cmd.Flags().IntVar(&r.Windows, "windows", 0, "windows for a hot sequence, about one per concurrent client (IDs stay unique, not ordered)")
	cmd.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed without change when the sequence exists with the same --start, --max and --windows (fail when they differ)")
	return cmd
}

// sameSettings returns nil when sequence name exists with these settings,
// else an error that says how it differs.
func sameSettings(ctx context.Context, seqs *seqzk.Client, name string, start, end int64, windows int) error {
	st, _, err := seqs.Describe(ctx, name)
	if err != nil {
		return err
	}
	if st.Legacy {
		return fmt.Errorf("sequence %q exists as a legacy counter, not with the settings asked for", name)
	}
	var diff []string
	if st.Start != start {
		diff = append(diff, fmt.Sprintf("--start %d (asked %d)", st.Start, start))
	}
	if st.End != end {
		diff = append(diff, fmt.Sprintf("--max %d (asked %d)", st.End, end))
	}
	if st.Windows != windows {
		diff = append(diff, fmt.Sprintf("--windows %d (asked %d)", st.Windows, windows))
	}
	if len(diff) > 0 {
		return fmt.Errorf("sequence %q exists with other settings: %s; --if-not-exists changes nothing", name, strings.Join(diff, ", "))
	}
	return nil
}
