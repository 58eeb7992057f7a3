package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// deleteAttempts bounds the re-reads when the sequence keeps changing
// under delete (clients taking, the primary raising).
const deleteAttempts = 20

func newDeleteCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a sequence, leaving a tombstone in the store",
		Long: `Delete a sequence: first record a tombstone with its ceiling in the durable
store, then remove its znode (and its windows) from ZooKeeper. The tombstone
makes a sequence created later under the same name start above every ID the
old one ever issued, so deletion needs --store. Asks for the name to be
typed unless --yes is given.`,
		Args: nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if g.cfg.Store == "" {
				return usagef("delete needs the store (--store, SEQKEEPER_STORE or 'store:' in the config file): the tombstone it leaves there keeps a re-created %q from reusing IDs", name)
			}
			if g.tombstone == nil {
				return fmt.Errorf("delete: %w (tombstones cannot be written, so nothing was deleted)", errNotWired)
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			if !yes {
				if err := g.confirmDelete(name, seqs.Path(name)); err != nil {
					return err
				}
			}
			ceiling, err := g.deleteSequence(cmd.Context(), zc, seqs, name)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return g.printJSON(map[string]any{"sequence": name, "deleted": true, "tombstone_ceiling": ceiling})
			}
			fmt.Fprintf(g.stdout, "deleted sequence %q; its tombstone keeps IDs up to %d from being handed out again\n", name, ceiling)
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// confirmDelete asks the operator to type the name.
func (g *globals) confirmDelete(name, path string) error {
	fmt.Fprintf(g.stderr, "Delete sequence %q (%s)? Its IDs will never be handed out again.\nType the name to confirm: ", name, path)
	line, err := bufio.NewReader(g.stdin).ReadString('\n')
	if strings.TrimSpace(line) != name {
		if err != nil {
			return usagef("not confirmed (no answer on standard input); pass --yes to delete without asking")
		}
		return errors.New("not confirmed: nothing was deleted")
	}
	return nil
}

// deleteSequence writes the tombstone and then deletes the znode and its
// children, only if the znode is still at the version whose ceiling the
// tombstone holds; otherwise it reads again (and tombstones again if the
// ceiling rose). It returns the ceiling tombstoned.
func (g *globals) deleteSequence(ctx context.Context, zc *zkclient.Client, seqs *sequence.Client, name string) (int64, error) {
	p := seqs.Path(name)
	stored := int64(-1)
	for attempt := 0; attempt < deleteAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		conn := zc.Conn()
		data, stat, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			if stored >= 0 {
				return stored, nil // deleted by someone else after our tombstone
			}
			return 0, fmt.Errorf("sequence %q: %w: %s does not exist", name, sequence.ErrUnknownSequence, p)
		}
		if err != nil {
			return 0, fmt.Errorf("sequence %q: read %s: %w", name, p, err)
		}
		st, err := sequence.ParseState(name, data)
		if err != nil {
			return 0, fmt.Errorf("%w; repair the znode before deleting it (its ceiling must be known for the tombstone)", err)
		}
		ceiling := tombstoneCeiling(st)
		if ceiling > stored {
			if err := g.tombstone(ctx, g.cfg, name, ceiling); err != nil {
				return 0, fmt.Errorf("sequence %q: write the tombstone (ceiling %d) to the store: %w; nothing was deleted", name, ceiling, err)
			}
			stored = ceiling
		}
		children, _, err := conn.Children(p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return 0, fmt.Errorf("sequence %q: list %s: %w", name, p, err)
		}
		ops := make([]any, 0, len(children)+1)
		for _, c := range children {
			ops = append(ops, &zk.DeleteRequest{Path: p + "/" + c, Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: p, Version: stat.Version})
		_, err = conn.Multi(ops...)
		switch {
		case err == nil:
			return stored, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrNoNode):
			continue // changed meanwhile (a take, a raise, a new window): read again
		default:
			return 0, fmt.Errorf("sequence %q: delete %s (tombstone written): %w; run delete again", name, p, err)
		}
	}
	return 0, fmt.Errorf("sequence %q keeps changing under delete (%d attempts); stop its clients and try again (the tombstone is written)", name, deleteAttempts)
}

// tombstoneCeiling is the highest ID a sequence in state st may have
// issued: its ceiling, or for a legacy counter the counter itself, or for a
// registration nothing (start-1).
func tombstoneCeiling(st sequence.State) int64 {
	switch {
	case st.Legacy:
		return st.Next
	case st.Registered:
		return st.Start - 1
	}
	return st.Ceiling
}
