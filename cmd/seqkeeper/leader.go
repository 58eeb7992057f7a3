package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/election"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// leaderOutput is "leader -o json".
type leaderOutput struct {
	election.Candidate
	// Candidates counts the replicas in the election, leader included.
	Candidates int `json:"candidates"`
}

// errNoLeader reports an election directory without candidates.
var errNoLeader = errors.New("no leader elected")

func newLeaderCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Show which replica is the primary",
		Long: `Show the replica that leads the election (the primary): the candidate with
the lowest sequence number under the election path. Right after a failure it
can still name a replica that has stopped acting; the next candidate takes
over within a session timeout.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			zc, _, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			out, err := readLeader(cmd.Context(), zc, g.cfg.ElectionPath)
			if errors.Is(err, errNoLeader) {
				return fmt.Errorf("%w: is 'seqkeeper serve' running against the same --zk and %s? (no candidates under %s)", errNoLeader, g.rootHint(), g.cfg.ElectionPath)
			}
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(out)
			}
			addr := out.Address
			if addr == "" {
				addr = "(no address published)"
			}
			fmt.Fprintf(g.stdout, "leader:     %s\naddress:    %s\n", out.ID, addr)
			if out.Version != "" {
				fmt.Fprintf(g.stdout, "version:    %s\n", out.Version)
			}
			fmt.Fprintf(g.stdout, "candidates: %d\n", out.Candidates)
			return nil
		},
	}
	return cmd
}

// readLeader reads the election under dir: its first candidate leads.
func readLeader(ctx context.Context, zc *zkclient.Client, dir string) (leaderOutput, error) {
	cands, err := election.Candidates(ctx, zc, dir)
	if err != nil {
		return leaderOutput{}, err
	}
	if len(cands) == 0 {
		return leaderOutput{}, errNoLeader
	}
	return leaderOutput{Candidate: cands[0], Candidates: len(cands)}, nil
}
