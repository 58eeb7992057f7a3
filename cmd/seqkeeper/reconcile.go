package main

import (
	"context"
	"fmt"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/reconcile"
	"github.com/seqkeeper/seqkeeper/persist"
)

// compare opens ZooKeeper and the store, and compares them
// (reconcile.Compare). The caller calls done when it has finished with
// seqs and store.
func (g *globals) compare(ctx context.Context) (r *reconcile.Report, seqs *seqzk.Client, store *persist.Store, done func(), err error) {
	if g.cfg.Store == "" {
		return nil, nil, nil, nil, usagef("this command compares ZooKeeper with the store: set --store or SEQKEEPER_STORE")
	}
	zc, seqs, err := g.connect(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if store, err = openStore(ctx, g.cfg, false); err == nil {
		if r, err = reconcile.Compare(ctx, seqs, store); err == nil {
			return r, seqs, store, zc.Close, nil
		}
	}
	zc.Close()
	return nil, nil, nil, nil, err
}

func newVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Compare ZooKeeper with the store; exit 1 on any unsafe state",
		Long: `Compare every sequence in ZooKeeper with its record in the store. Unsafe
(exit 1): a ZooKeeper ceiling above the stored one, a sequence the store does
not cover, a legacy counter past its mark, corrupt data. Pending (exit 0): what
a running primary fixes by itself (sequences not yet validated in the current
ZooKeeper epoch, registrations, tombstones one side lacks). Exit 3 when nothing is unsafe
but ZooKeeper lost sequences with its data that no one has re-created yet: a
running primary does within seconds, so a 3 that persists means none runs
('seqkeeper restore' does it by hand).

It also checks every znode's ACL against the root's ACL layout ('seqkeeper
acl'): an ACL wider than the layout is unsafe too (exit 1).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, seqs, _, done, err := g.compare(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if unsafe := g.printFindings(r, false); unsafe > 0 {
				return fmt.Errorf("%d unsafe sequence(s): see above; is 'seqkeeper serve' running with this store? 'seqkeeper restore' covers ZooKeeper ceilings in the store", unsafe)
			}
			wide, err := g.checkACLs(cmd.Context(), seqs)
			if err != nil {
				return err
			}
			if wide > 0 {
				return fmt.Errorf("%d znode(s) with an ACL wider than the root's layout: see above; 'seqkeeper acl apply' narrows them", wide)
			}
			if lost := r.Lost(); lost > 0 {
				return lossPending{lost}
			}
			return nil
		},
	}
}

func newRestoreCmd(g *globals) *cobra.Command {
	var dryRun bool
	var lost []string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Reconcile ZooKeeper with the store now (a running primary does this by itself)",
		Long: `Re-create sequences the store holds live and ZooKeeper lost, at their stored
ceiling + 1; raise the store to cover ceilings ZooKeeper holds above it;
revalidate sequences not validated in the current ZooKeeper epoch; and copy
tombstones between the store and ZooKeeper where one side lost them.
Re-created and revalidated sequences get twice min_reserve IDs, as the
primary gives an idle sequence. Every new ceiling is written to the store
before ZooKeeper, and a sequence is created only if no delete of it
happened meanwhile, so restore is safe beside a running primary.

A sequence missing from ZooKeeper is re-created only when ZooKeeper is known
to have lost data since it last held it (its root's data gone, or a leader
election since). One missing with no such loss was deleted by hand: name it
with --lost to re-create it all the same. With --dry-run, print the plan
only.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, seqs, store, done, err := g.compare(ctx)
			if err != nil {
				return err
			}
			defer done()
			if err := r.MarkLost(lost); err != nil {
				return &usageError{err}
			}
			r.Plan()
			if dryRun {
				for i := range r.Findings {
					if f := &r.Findings[i]; f.Description != "" {
						f.Outcome = "dry run: not done"
					}
				}
			} else if err := usageIfConfig(host.ClaimPaths(ctx, g.cfg, seqs)); err != nil {
				return err // before any write: nothing was changed
			} else if err := reconcile.Apply(ctx, seqs, store, r, g.cfg.MinReserve); err != nil {
				g.printFindings(r, true) // what was done before the failure
				return err
			}
			g.printFindings(r, true)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be done, change nothing")
	cmd.Flags().StringSliceVar(&lost, "lost", nil, "re-create this sequence, missing from ZooKeeper with no loss it shows (repeat, or comma-separate)")
	return cmd
}

// lossPending is verify's answer when ZooKeeper lost sequences that no one
// has re-created yet: exit 3, which monitoring can tell from an unsafe 1.
type lossPending struct{ n int }

func (e lossPending) Error() string {
	return fmt.Sprintf("%d sequence(s) lost with ZooKeeper's data and not re-created yet: no primary has taken office since (is 'seqkeeper serve' running? it restores them within seconds); 'seqkeeper restore' does it by hand", e.n)
}

// printFindings prints the findings (all with all, else the not-ok ones)
// and returns how many are unsafe.
func (g *globals) printFindings(r *reconcile.Report, all bool) int {
	unsafe := r.Unsafe()
	shown := r.Findings[:0:0]
	for _, f := range r.Findings {
		if all || f.Level != reconcile.OK {
			shown = append(shown, f)
		}
	}
	if g.jsonOutput() {
		_ = g.printJSON(map[string]any{"sequences": len(r.Findings), "unsafe": unsafe, "lost": r.Lost(), "findings": shown})
		return unsafe
	}
	for _, f := range shown {
		line := fmt.Sprintf("%-8s %s", f.Level, f.Sequence)
		if f.Problem != "" {
			line += ": " + f.Problem
		}
		if f.Description != "" {
			line += " -> " + f.Description
		}
		if f.Outcome != "" {
			line += ": " + f.Outcome
		}
		fmt.Fprintln(g.stdout, line)
	}
	fmt.Fprintf(g.stdout, "%d sequences checked, %d unsafe\n", len(r.Findings), unsafe)
	return unsafe
}
