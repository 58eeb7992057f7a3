package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/httpapi"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// describeOutput is "describe -o json": the ZooKeeper view (as GET
// /v1/sequences/{name} has it) plus the store's.
type describeOutput struct {
	httpapi.SequenceDetail
	// StoredCeiling is the durable ceiling; null when unknown (see Store).
	StoredCeiling *int64 `json:"stored_ceiling"`
	// Store is "ok", "not configured", "no record" or "error: ...".
	Store string `json:"store"`
	// Unsafe is set when ZooKeeper's ceiling is above the stored one:
	// IDs may be handed out that a restore would hand out again.
	Unsafe bool `json:"unsafe"`
}

func newDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show one sequence: next, ceilings, recycled IDs, windows, health",
		Long: `Show one sequence as ZooKeeper holds it (next, the ZooKeeper ceiling, the end
of the space, recycled ranges, windows, leaked IDs) and, with --store, the
ceiling the durable store holds for it. The stored ceiling must never be
below the ZooKeeper ceiling; describe says so loudly if it is.`,
		Args: nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			d, err := httpapi.DescribeSequence(cmd.Context(), seqs, name)
			if err != nil {
				return err
			}
			out := describeOutput{SequenceDetail: d}
			storeErr := g.describeStore(cmd.Context(), &out)
			if g.jsonOutput() {
				if err := g.printJSON(out); err != nil {
					return err
				}
			} else {
				g.printDescribe(out)
			}
			if storeErr != nil {
				return fmt.Errorf("sequence %q: read the stored ceiling: %w", name, storeErr)
			}
			return nil
		},
	}
}

// describeStore fills in the store's view, read with g.storeCeiling.
// It returns the store's error, if any, after recording it in out.
func (g *globals) describeStore(ctx context.Context, out *describeOutput) error {
	switch {
	case g.cfg.Store == "":
		out.Store = "not configured"
		return nil
	}
	c, err := g.storeCeiling(ctx, g.cfg, out.Name)
	switch {
	case errors.Is(err, errNotInStore):
		out.Store = "no record"
		return nil
	case err != nil:
		out.Store = "error: " + err.Error()
		return err
	}
	out.Store, out.StoredCeiling = "ok", &c
	out.Unsafe = out.Kind == httpapi.KindSequence && out.Ceiling > c
	return nil
}

func (g *globals) printDescribe(d describeOutput) {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 1, ' ', 0)
	line := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	line("sequence", "%s", d.Name)
	line("kind", "%s", d.Kind)
	switch d.Kind {
	case httpapi.KindLegacy:
		line("next", "%d (the 8-byte counter holds %d, the highest ID possibly issued)", d.Next, d.Next-1)
		line("zookeeper ceiling", "none: legacy counters have no ceiling")
	case httpapi.KindUninitialised:
		line("next", "%d (once the primary initialises it)", d.Next)
		line("zookeeper ceiling", "none yet: waiting for the primary")
	default:
		line("next", "%d", d.Next)
		line("zookeeper ceiling", "%d", d.Ceiling)
	}
	switch {
	case d.StoredCeiling != nil:
		line("stored ceiling", "%d", *d.StoredCeiling)
	case d.Store == "not configured":
		line("stored ceiling", "(store not configured)")
	case d.Store == "no record":
		line("stored ceiling", "(no record yet: no primary has reserved for it)")
	default:
		line("stored ceiling", "(%s)", d.Store)
	}
	line("start", "%d", d.Start)
	line("end", "%d", d.End)
	if d.Kind != httpapi.KindLegacy {
		line("available", "%d", d.Available)
	}
	if len(d.Recycled) == 0 {
		line("recycled", "none")
	} else {
		line("recycled", "%d IDs in %s: %s", d.RecycledIDs, plural(len(d.Recycled), "range"), sequence.Ranges(d.Recycled))
	}
	windows := make([]string, 0, len(d.WindowDetails))
	for _, w := range d.WindowDetails {
		windows = append(windows, fmt.Sprintf("%s (next %d, end %d, %d left)", w.Name, w.Next, w.End, w.Available))
	}
	if d.Windows == 0 && len(windows) == 0 {
		line("windows", "none")
	} else {
		line("windows", "%d configured, %d open %s", d.Windows, d.OpenWindows, strings.Join(windows, ", "))
	}
	line("leaked", "%d", d.Leaked)
	health := d.Health
	switch {
	case d.Unsafe:
		health = "UNSAFE: the ZooKeeper ceiling is above the stored ceiling, so a restore could hand out IDs again; run 'seqkeeper verify'"
	case d.Health == httpapi.HealthAtCeiling:
		health += ": takes wait for the primary to raise the ceiling; is 'seqkeeper serve' running and reaching its store?"
	case d.Health == httpapi.HealthWaiting:
		health += ": no primary has initialised it yet; is 'seqkeeper serve' running?"
	case d.Health == httpapi.HealthExhausted:
		health += ": every ID of the space has been issued or skipped; widen it (seqkeeper widen NAME --max N) or use a new sequence"
	case d.Health == httpapi.HealthLegacy:
		health += ": no ceiling; IDs taken faster than the primary reacts are not covered by the store (docs/cli.md)"
	}
	line("health", "%s", health)
	_ = tw.Flush()
}

// plural writes n and word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
