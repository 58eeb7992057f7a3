package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/sequence"
)

func newDeleteCmd(g *globals) *cobra.Command {
	var yes, ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a sequence, leaving a tombstone in the store",
		Long: `Delete a sequence: remove its znode (and its windows) from ZooKeeper in one
transaction that records the deletion there, then record the tombstone with
its ceiling in the durable store. The tombstone makes a sequence created
later under the same name start above every ID the old one ever issued, and
keeps a restore from bringing it back, so deletion needs --store. Asks for the name to be
typed unless --yes is given.`,
		Args: nameArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			store, zc, seqs, err := g.connectWithStore(cmd.Context(), "delete",
				fmt.Sprintf("the tombstone it leaves there keeps a re-created %q from reusing IDs", name), false)
			if err != nil {
				return err
			}
			defer zc.Close()
			gone := func() error {
				if g.jsonOutput() {
					return g.printJSON(map[string]any{"sequence": name, "deleted": false})
				}
				fmt.Fprintf(g.stdout, "no sequence %q: nothing to delete\n", name)
				return nil
			}
			if ignoreNotFound {
				if _, _, err := seqs.Describe(cmd.Context(), name); errors.Is(err, sequence.ErrUnknownSequence) {
					return gone()
				}
			}
			if !yes {
				if err := g.confirmDelete(name, seqs.Path(name)); err != nil {
					return err
				}
			}
			ceiling, err := seqs.Operator().Delete(cmd.Context(), name, store)
			if ignoreNotFound && errors.Is(err, sequence.ErrUnknownSequence) {
				return gone() // deleted meanwhile
			}
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
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "succeed when the sequence does not exist")
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
