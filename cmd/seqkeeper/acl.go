package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
)

func newACLCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Show, check or apply the ZooKeeper ACL layout of the root (least privilege per role)",
		Long: `The root's ACL names four roles, and every znode seqkeeper keeps gets
what its role needs (docs/security.md has the table):

  reader   reads everything
  worker   takes and pushes IDs, registers a sequence by creating a child
  replica  also runs the election and the primary's work
  admin    also deletes, restores, imports, and alone changes ACLs

Identities are ZooKeeper's: x509:<certificate subject> (with TLS and
ZooKeeper's x509 provider), digest:<user>:<base64 SHA-1>, ip:<cidr>,
world:anyone.`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(eachRoot(g, newACLShowCmd(g)), newACLApplyCmd(g))
	return cmd
}

func newACLShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the layout the root's ACL names and every znode whose ACL is wider; exit 1 if any",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			root := seqs.Root()
			if ok, _, err := zc.Session().Exists(cmd.Context(), root); err != nil || !ok {
				return cmp.Or(err, fmt.Errorf("root %s does not exist: no layout to show (check --root; 'seqkeeper acl apply' creates the root with its layout)", root))
			}
			l, findings, err := seqs.Operator().CheckLayout(cmd.Context(), g.cfg.ElectionPath, g.cfg.MarkerPath)
			if err != nil {
				return err
			}
			var n int
			if g.jsonOutput() {
				out := aclShowOf(root, l, findings)
				n = len(out.Wider)
				err = g.printJSON(out)
			} else {
				if len(l.Roles) == 0 {
					fmt.Fprintf(g.stdout, "root %s has no layout: its ACL names no roles, so what is created under it carries its creator's ACL ('seqkeeper acl apply' sets a layout)\n", root)
				}
				printLayout(g.stdout, l)
				n = printACLFindings(g.stdout, findings)
			}
			if err == nil && n > 0 {
				err = fmt.Errorf("%d znode(s) with an ACL wider than the layout: 'seqkeeper acl apply' with the same roles narrows them", n)
			}
			return err
		},
	}
}

// aclShow is acl show's structured output.
type aclShow struct {
	Root string `json:"root"`
	// Open is a root without a layout: its ACL names no roles, and what
	// is created under it carries its creator's ACL.
	Open       bool                `json:"open"`
	Roles      map[string][]string `json:"roles"`
	Wider      []aclNode           `json:"wider"`
	Unreadable []aclNode           `json:"unreadable"`
}

type aclNode struct {
	Path  string   `json:"path"`
	Kind  string   `json:"kind"`
	Wider []string `json:"wider,omitempty"`
	Error string   `json:"error,omitempty"`
}

func aclShowOf(root string, l seqzk.Layout, findings []seqzk.ACLFinding) aclShow {
	out := aclShow{Root: root, Open: len(l.Roles) == 0, Roles: map[string][]string{}, Wider: []aclNode{}, Unreadable: []aclNode{}}
	for role, ids := range l.Roles {
		for _, id := range ids {
			out.Roles[role.String()] = append(out.Roles[role.String()], id.String())
		}
	}
	for _, f := range findings {
		switch {
		case f.Err != nil:
			out.Unreadable = append(out.Unreadable, aclNode{Path: f.Path, Kind: f.Kind.String(), Error: f.Err.Error()})
		case len(f.Wider) > 0:
			out.Wider = append(out.Wider, aclNode{Path: f.Path, Kind: f.Kind.String(), Wider: f.Wider})
		}
	}
	return out
}

func newACLApplyCmd(g *globals) *cobra.Command {
	var roles [4][]string
	settle := seqzk.LayoutTTL + 5*time.Second
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Set the root's ACL layout and give every znode its role's permissions",
		Long: `Set the root's ACL to name the given identities' roles, then set the ACL of
every znode seqkeeper keeps (sequences and their windows and markers, the
deletion records, the election and the cluster marker) to what the layout
gives it. The processes that create znodes read the layout from the root
(within 30 seconds), so nothing else needs the layout in its configuration.

Run it as an identity that has ADMIN on those znodes (one named --admin, or
ZooKeeper's super user), before the replicas create them with their own
identity. A znode it may not change is reported, and the rest still set.

Running processes read the new layout within 30 seconds (ZooKeeper has no
watch on ACLs), and what they create meanwhile may carry the old one: so
apply waits --settle (35s) and goes over every znode a second time. Give
--settle 0 when no process runs under the root.`,
		Example: `  seqkeeper acl apply --admin x509:CN=ops --replica x509:CN=seqkeeper-replica \
    --worker x509:CN=orders-service --worker 'digest:legacy:kV9cd0...='`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, role, err := seqzk.ParseLayout(roles)
			if err != nil {
				return &usageError{fmt.Errorf("--%s: %w", role, err)}
			}
			if len(l.Roles[seqzk.Admin]) == 0 {
				return usagef("give at least one --admin identity: without one, no one could change the ACLs again")
			}
			zc, seqs, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer zc.Close()
			changed, failed, err := seqs.Operator().ApplyLayout(cmd.Context(), l, g.cfg.ElectionPath, g.cfg.MarkerPath)
			if err != nil {
				return err
			}
			if settle > 0 && len(failed) == 0 {
				fmt.Fprintf(g.stdout, "%d znode(s) changed; waiting %s for running processes to read the new layout, then a second pass\n", changed, settle)
				select {
				case <-time.After(settle):
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				}
				var again int
				again, failed, err = seqs.Operator().ApplyLayout(cmd.Context(), l, g.cfg.ElectionPath, g.cfg.MarkerPath)
				if err != nil {
					return err
				}
				changed += again
			}
			printLayout(g.stdout, l)
			fmt.Fprintf(g.stdout, "%d znode(s) changed\n", changed)
			for _, f := range failed {
				fmt.Fprintf(g.stdout, "  not changed: %s (%s): %v\n", f.Path, f.Kind, f.Err)
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d znode(s) could not be changed: run as an identity with ADMIN on them (the one that created them, or ZooKeeper's super user)", len(failed))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&settle, "settle", settle, "wait this long after the first pass, then set what running processes created meanwhile (0: one pass)")
	for role := range roles {
		name := seqzk.Role(role).String()
		cmd.Flags().StringArrayVar(&roles[role], name, nil, "identity (scheme:id) of the "+name+" role; repeat for more")
	}
	return cmd
}

func printLayout(w io.Writer, l seqzk.Layout) {
	for role := seqzk.Reader; role <= seqzk.Admin; role++ {
		var ids []string
		for _, id := range l.Roles[role] {
			ids = append(ids, id.String())
		}
		if len(ids) > 0 {
			fmt.Fprintf(w, "%-8s %s\n", role, strings.Join(ids, ", "))
		}
	}
}

// printACLFindings prints the znodes with an ACL wider than the layout and
// returns how many.
func printACLFindings(w io.Writer, findings []seqzk.ACLFinding) int {
	n := 0
	for _, f := range findings {
		switch {
		case f.Err != nil:
			fmt.Fprintf(w, "ACL of %s (%s) not readable: %v\n", f.Path, f.Kind, f.Err)
		case len(f.Wider) > 0:
			n++
			fmt.Fprintf(w, "ACL wider than the layout: %s (%s): %s\n", f.Path, f.Kind, strings.Join(f.Wider, "; "))
		}
	}
	return n
}

// checkACLs is verify's ACL check: the number of znodes whose ACL is wider
// than the root's layout.
func (g *globals) checkACLs(ctx context.Context, seqs *seqzk.Client) (int, error) {
	_, findings, err := seqs.Operator().CheckLayout(ctx, g.cfg.ElectionPath, g.cfg.MarkerPath)
	if err != nil {
		return 0, err
	}
	w := g.stdout
	if g.jsonOutput() {
		w = g.stderr // stdout holds the findings' document
	}
	return printACLFindings(w, findings), nil
}
