package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Candidate node names in the election directory: _c_<guid>-n_<sequence>,
// as go-zookeeper's protected ephemeral-sequential nodes are named. The
// election package owns the format; leader reads it without importing the
// package so that it needs nothing but ZooKeeper.
const (
	candidatePrefix = "_c_"
	candidateSeq    = "-n_"
)

// identity mirrors election.Identity, the JSON a candidate node holds.
type identity struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Version string `json:"version,omitempty"`
}

// leaderOutput is "leader -o json".
type leaderOutput struct {
	identity
	// Node is the leader's candidate node.
	Node string `json:"node"`
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

// readLeader reads the lowest candidate under dir. A candidate that leaves
// between the listing and the read is skipped for the next one.
func readLeader(ctx context.Context, zc *zkclient.Client, dir string) (leaderOutput, error) {
	for attempt := 0; attempt < 5; attempt++ {
		if err := ctx.Err(); err != nil {
			return leaderOutput{}, err
		}
		children, _, err := zc.Session().Children(ctx, dir)
		if errors.Is(err, zkclient.ErrNoNode) {
			return leaderOutput{}, errNoLeader
		}
		if err != nil {
			return leaderOutput{}, fmt.Errorf("read the election %s: %w", dir, err)
		}
		cands := candidates(children)
		if len(cands) == 0 {
			return leaderOutput{}, errNoLeader
		}
		data, _, err := zc.Session().Get(ctx, dir+"/"+cands[0])
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // it just left; look again
		}
		if err != nil {
			return leaderOutput{}, fmt.Errorf("read the leader's node %s/%s: %w", dir, cands[0], err)
		}
		var id identity
		if err := json.Unmarshal(data, &id); err != nil || id.ID == "" {
			return leaderOutput{}, fmt.Errorf("the leader's node %s/%s does not hold a replica identity (%q): is something else using %s?", dir, cands[0], data, dir)
		}
		return leaderOutput{identity: id, Node: dir + "/" + cands[0], Candidates: len(cands)}, nil
	}
	return leaderOutput{}, fmt.Errorf("the election under %s keeps changing; try again", dir)
}

// candidates returns the candidate node names among children, lowest
// sequence number first (the GUID prefix is random, so names do not sort).
func candidates(children []string) []string {
	type cand struct {
		name string
		seq  int64
	}
	var cs []cand
	for _, c := range children {
		rest, ok := strings.CutPrefix(c, candidatePrefix)
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, candidateSeq)
		if i < 0 {
			continue
		}
		seq, err := strconv.ParseInt(rest[i+len(candidateSeq):], 10, 64)
		if err != nil {
			continue
		}
		cs = append(cs, cand{c, seq})
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}
