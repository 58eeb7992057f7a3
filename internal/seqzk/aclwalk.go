package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ACLFinding is one znode whose ACL is not the layout's.
type ACLFinding struct {
	Path string
	Kind Kind
	// Wider lists what the ACL gives beyond the layout; empty when it
	// only differs (gives less).
	Wider []string
	// Err is a failure to read (or, for ApplyLayout, to set) the ACL.
	Err error
}

// layoutNodes calls f for every znode the layout covers, with its kind:
// the root, its meta znode and deletion records, every sequence and its
// children, the election directory, its candidates and its leader epoch
// (electionPath+"-epoch"), and the cluster marker. Missing znodes are
// skipped.
func (c *Client) layoutNodes(ctx context.Context, electionPath, markerPath string, f func(path string, k Kind) error) error {
	var errs []error
	visit := func(p string, k Kind) {
		if err := f(p, k); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			errs = append(errs, err)
		}
	}
	children := func(p string) []string {
		ch, _, err := c.zk.Session().Children(ctx, p)
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			errs = append(errs, fmt.Errorf("list %s: %w", p, err))
		}
		slices.Sort(ch)
		return ch
	}
	root := c.opts.Root
	visit(root, KindRoot)
	for _, name := range children(root) {
		p := root + "/" + name
		if name == MetaName {
			visit(p, KindMeta)
			for _, r := range children(p) {
				visit(p+"/"+r, KindRecord)
			}
			continue
		}
		visit(p, KindSequence)
		for _, ch := range children(p) {
			visit(p+"/"+ch, KindSequenceChild)
		}
	}
	if electionPath != "" {
		visit(electionPath, KindElection)
		for _, ch := range children(electionPath) {
			visit(electionPath+"/"+ch, KindElectionChild)
		}
		visit(electionPath+"-epoch", KindElectionChild)
	}
	if markerPath != "" {
		visit(markerPath, KindMarker)
	}
	return errors.Join(errs...)
}

// CheckLayout compares the ACL of every znode the layout covers with the
// layout that the root's ACL names, and returns those that differ. An ACL
// wider than the layout (an identity it does not name, or more than its
// role's permissions) is what 'seqkeeper verify' reports.
func (o Operator) CheckLayout(ctx context.Context, electionPath, markerPath string) (Layout, []ACLFinding, error) {
	c := o.c
	rootACL, _, err := c.zk.Session().GetACL(ctx, c.opts.Root)
	if errors.Is(err, zkclient.ErrNoNode) {
		return Layout{}, nil, nil // no root, no layout: nothing to check
	}
	if err != nil {
		return Layout{}, nil, fmt.Errorf("read the ACL of the root %s: %w", c.opts.Root, err)
	}
	l := LayoutOf(rootACL)
	if len(l.Roles) == 0 {
		return l, nil, nil // an open root: no layout to hold anything to
	}
	var out []ACLFinding
	err = c.layoutNodes(ctx, electionPath, markerPath, func(p string, k Kind) error {
		acl, _, err := c.zk.Session().GetACL(ctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			return err
		}
		if err != nil {
			out = append(out, ACLFinding{Path: p, Kind: k, Err: err})
			return nil
		}
		if wider := l.Wider(k, acl); wider != nil {
			out = append(out, ACLFinding{Path: p, Kind: k, Wider: wider})
		}
		return nil
	})
	return l, out, err
}

// ApplyLayout makes l the root's layout: it sets the root's ACL to name
// l's roles, creates the meta znode, the election directory, its leader
// epoch and the marker where missing (their parents are not the layout's,
// so only the admin creates there), then sets every znode the layout
// covers to its kind's ACL (the root first, so that the processes that
// create znodes meanwhile follow the new layout; a pass over what exists
// then catches up). Setting an ACL needs the ADMIN permission on that
// znode: one that the caller may not change is reported, and the rest are
// still set. The root is created when missing.
func (o Operator) ApplyLayout(ctx context.Context, l Layout, electionPath, markerPath string) (changed int, failed []ACLFinding, err error) {
	c := o.c
	if len(l.Roles[Admin]) == 0 {
		return 0, nil, errors.New("an ACL layout needs at least one admin identity: without one, no one could change it again")
	}
	if err := c.ensureRoot(ctx); err != nil {
		return 0, nil, err
	}
	return c.applyLayout(ctx, l, electionPath, markerPath)
}

// KeepLayout holds the root to the configured layout (Options.Layout),
// as a primary does at the start of its term and at each audit: when the
// root's ACL is not the layout's, or always with all set (after ZooKeeper
// lost its data, the election's znodes come back with their creator's
// ACL), it applies the layout as ApplyLayout does. Without a configured
// layout it does nothing. A root whose ACL this client may not change
// (no ADMIN: an admin changed the layout and not the replicas'
// configuration, or another identity created the root first) is an error
// wrapping zkclient.ErrNoAuth, and nothing else is set.
func (k Keeper) KeepLayout(ctx context.Context, electionPath, markerPath string, all bool) (changed int, failed []ACLFinding, err error) {
	c := k.c
	l := c.opts.Layout
	if len(l.Roles) == 0 {
		return 0, nil, nil
	}
	if !all {
		acl, _, err := c.zk.Session().GetACL(ctx, c.opts.Root)
		if err != nil {
			return 0, nil, fmt.Errorf("read the ACL of the root %s: %w", c.opts.Root, err)
		}
		if sameACL(acl, l.ACL(KindRoot)) {
			return 0, nil, nil
		}
	}
	return c.applyLayout(ctx, l, electionPath, markerPath)
}

// applyLayout sets the root's ACL to l's, creates the znodes whose
// parents l does not cover, then sets every znode l covers to its kind's
// ACL.
func (c *Client) applyLayout(ctx context.Context, l Layout, electionPath, markerPath string) (changed int, failed []ACLFinding, err error) {
	set := func(p string, k Kind) error {
		acl, _, err := c.zk.Session().GetACL(ctx, p)
		if err != nil {
			return err
		}
		want := l.ACL(k)
		if sameACL(acl, want) {
			return nil
		}
		if _, err := c.zk.Session().SetACL(ctx, p, want, zkclient.AnyVersion); err != nil {
			if !errors.Is(err, zkclient.ErrNoNode) {
				failed = append(failed, ACLFinding{Path: p, Kind: k, Err: err})
			}
			return nil
		}
		changed++
		return nil
	}
	if err := set(c.opts.Root, KindRoot); err != nil {
		return 0, nil, fmt.Errorf("set the ACL of the root %s: %w", c.opts.Root, err)
	}
	if len(failed) > 0 {
		return 0, failed, fmt.Errorf("set the ACL of the root %s: %w", c.opts.Root, failed[0].Err)
	}
	c.layout.mu.Lock()
	c.layout.conn = 0 // read the new layout at the next create
	c.layout.mu.Unlock()
	// The znodes whose parents the layout does not cover are created now,
	// by the admin: a replica may not create in the election path's parent
	// (which other roots may share), nor should it need to.
	for _, z := range []struct {
		path string
		kind Kind
	}{{c.metaPath(), KindMeta}, {electionPath, KindElection}, {electionPath + "-epoch", KindElectionChild}, {markerPath, KindMarker}} {
		if z.path == "" || z.path == "-epoch" {
			continue
		}
		if err := c.ensure(ctx, z.kind, z.path); err != nil {
			return changed, failed, err
		}
	}
	err = c.layoutNodes(ctx, electionPath, markerPath, set)
	return changed, failed, err
}

// sameACL reports whether two ACLs give the same permissions to the same
// identities, in any order.
func sameACL(x, y []zkclient.ACL) bool {
	m := map[zkclient.ID]zkclient.Perms{}
	for _, e := range x {
		m[e.ID] |= e.Perms
	}
	n := map[zkclient.ID]zkclient.Perms{}
	for _, e := range y {
		n[e.ID] |= e.Perms
	}
	if len(m) != len(n) {
		return false
	}
	for id, p := range m {
		if n[id] != p {
			return false
		}
	}
	return true
}
