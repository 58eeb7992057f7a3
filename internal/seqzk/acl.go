package seqzk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Role is what an identity may do under a root. The root's own ACL names
// the roles (Layout), and every znode seqkeeper keeps gets its ACL from
// them (Layout.ACL): no process needs the layout in its configuration,
// and an operator changes it in one place ('seqkeeper acl apply').
type Role int

const (
	// Reader may read everything and change nothing: READ alone on the
	// root.
	Reader Role = iota
	// Worker may take and push (WRITE on each sequence), open and retire
	// windows, and register a sequence by creating a child of the root:
	// READ and CREATE on the root.
	Worker
	// Replica may also run the election and the primary's work: restore,
	// raise, rotate and remove sequences, write the era and the deletion
	// records, claim the marker: READ, WRITE, CREATE and DELETE on the
	// root.
	Replica
	// Admin (the operator) may do everything, and alone change ACLs:
	// ADMIN on the root.
	Admin
)

var roleNames = []string{"reader", "worker", "replica", "admin"}

func (r Role) String() string { return roleNames[r] }

// roleOf reads an identity's role from its permissions on the root.
func roleOf(p zkclient.Perms) Role {
	switch {
	case p&zkclient.PermAdmin != 0:
		return Admin
	case p&zkclient.PermDelete != 0:
		return Replica
	case p&zkclient.PermCreate != 0:
		return Worker
	}
	return Reader
}

// Kind is a kind of znode that seqkeeper keeps; the layout gives each kind
// its permissions per role.
type Kind int

const (
	KindRoot          Kind = iota // the sequences root
	KindMeta                      // <root>/.seqkeeper: the era, the deletion records' parent
	KindRecord                    // <root>/.seqkeeper/<name>: a deletion record
	KindSequence                  // <root>/<name>
	KindSequenceChild             // a sequence's markers and windows
	KindElection                  // the election directory
	KindElectionChild             // a candidate, the leader epoch
	KindMarker                    // the cluster marker
)

var kindNames = []string{"root", "meta", "deletion record", "sequence", "marker or window", "election", "election node", "cluster marker"}

func (k Kind) String() string { return kindNames[k] }

const (
	r = zkclient.PermRead
	w = zkclient.PermWrite
	c = zkclient.PermCreate
	d = zkclient.PermDelete
	a = zkclient.PermAdmin
)

// permsTable is the layout: kind by role (reader, worker, replica, admin).
// A worker registers on the root (c: a bare child znode, which the primary
// initialises behind its birth guard); it writes sequences and opens and
// retires their windows (w, c, d); it only reads the era, the deletion
// records, the election and the marker. A leaf's CREATE and DELETE would
// mean nothing, so leaves have none.
var permsTable = [...][4]zkclient.Perms{
	KindRoot:          {r, r | c, r | w | c | d, zkclient.PermAll},
	KindMeta:          {r, r, r | w | c | d, zkclient.PermAll},
	KindRecord:        {r, r, r | w, r | w | a},
	KindSequence:      {r, r | w | c | d, r | w | c | d, zkclient.PermAll},
	KindSequenceChild: {r, r | w, r | w, r | w | a},
	KindElection:      {r, r, r | w | c | d, zkclient.PermAll},
	KindElectionChild: {r, r, r | w, r | w | a},
	KindMarker:        {r, r, r | w, r | w | a},
}

// Perms is what role may do on a znode of kind k.
func (k Kind) Perms(role Role) zkclient.Perms { return permsTable[k][role] }

// Layout is a root's ACL layout: the identities of each role, as the
// root's ACL names them. The zero Layout is none: creates use the
// client's own ACL.
type Layout struct {
	Roles map[Role][]zkclient.ID
}

// ParseLayout reads a layout from each role's identities, indexed by
// Role, as "scheme:id" (zkclient.ParseID); with none at all it has no
// roles, as the zero Layout. An identity it cannot read is an error, with
// its role.
func ParseLayout(roles [4][]string) (Layout, Role, error) {
	l := Layout{Roles: map[Role][]zkclient.ID{}}
	for r, ids := range roles {
		for _, s := range ids {
			id, err := zkclient.ParseID(s)
			if err != nil {
				return Layout{}, Role(r), err
			}
			l.Roles[Role(r)] = append(l.Roles[Role(r)], id)
		}
	}
	return l, 0, nil
}

// LayoutOf reads the layout from the root's ACL. A root open to everyone
// and no one else (world:anyone alone, ZooKeeper's default) has none: the
// znodes created under it keep their creator's ACL (its digest or
// certificate identity, or open), as ZooKeeper sets it without a layout.
func LayoutOf(rootACL []zkclient.ACL) Layout {
	if !slices.ContainsFunc(rootACL, func(e zkclient.ACL) bool { return e.Scheme != "world" }) {
		return Layout{}
	}
	l := Layout{Roles: map[Role][]zkclient.ID{}}
	for _, e := range rootACL {
		role := roleOf(e.Perms)
		l.Roles[role] = append(l.Roles[role], e.ID)
	}
	return l
}

// ACL is the ACL of a znode of kind k; nil for the zero Layout.
func (l Layout) ACL(k Kind) []zkclient.ACL {
	if len(l.Roles) == 0 {
		return nil
	}
	var out []zkclient.ACL
	for role := Reader; role <= Admin; role++ {
		for _, id := range l.Roles[role] {
			out = append(out, zkclient.ACL{Perms: k.Perms(role), ID: id})
		}
	}
	return out
}

// Wider lists the entries of acl that give more than the layout gives a
// znode of kind k: an identity the layout does not name, or more
// permissions than its role has. Nil means acl is within the layout.
func (l Layout) Wider(k Kind, acl []zkclient.ACL) []string {
	allowed := map[zkclient.ID]zkclient.Perms{}
	for _, e := range l.ACL(k) {
		allowed[e.ID] |= e.Perms
	}
	var out []string
	for _, e := range acl {
		if extra := e.Perms &^ allowed[e.ID]; extra != 0 {
			out = append(out, fmt.Sprintf("%s has %s (the layout gives %s)", e.ID, e.Perms, permsOrNone(allowed[e.ID])))
		}
	}
	return out
}

func permsOrNone(p zkclient.Perms) string {
	if p == 0 {
		return "nothing"
	}
	return p.String()
}

// LayoutTTL bounds how long a client uses a root's layout before it reads
// the root's ACL again: an 'acl apply' reaches every running process
// within it (ZooKeeper has no watch on ACLs). A znode a process created
// meanwhile may carry the old layout's ACL, which is why 'acl apply' makes
// a second pass once this much time has gone by.
const LayoutTTL = 30 * time.Second

// layoutCache is a client's copy of its root's layout, read on one
// connection.
type layoutCache struct {
	mu     sync.Mutex
	layout Layout
	conn   int64
	at     time.Time
}

// acl returns the ACL a znode of kind k gets when this client creates it:
// the root's layout's, or nil (the client's own ACL) while the root has
// none it can read.
func (c *Client) acl(ctx context.Context, k Kind) []zkclient.ACL {
	if len(c.opts.Layout.Roles) > 0 {
		return c.opts.Layout.ACL(k)
	}
	lc := &c.layout
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if conn := c.zk.Connection(); lc.conn != conn || time.Since(lc.at) > LayoutTTL {
		acl, _, err := c.zk.Session().GetACL(sent(ctx), c.opts.Root)
		switch {
		case err == nil:
			lc.layout, lc.conn, lc.at = LayoutOf(acl), conn, time.Now()
		case errors.Is(err, zkclient.ErrNoNode):
			lc.layout = Layout{} // no root yet: it is created with the client's ACL
		}
		// Otherwise (no session) the last layout read stays in use: a
		// create that succeeds after a reconnect must not fall back to
		// the creator's own ACL under a layout.
	}
	return lc.layout.ACL(k)
}

// createOp is zkclient.CreateOp with the layout's ACL for kind k.
func (c *Client) createOp(ctx context.Context, k Kind, path string, data []byte, flags zkclient.CreateFlags) zkclient.Op {
	op := zkclient.CreateOp(path, data, flags)
	if acl := c.acl(ctx, k); acl != nil {
		op = op.WithACL(acl)
	}
	return op
}

// ensureRoot creates the root when it is missing: with the configured
// layout's ACL when there is one (Options.Layout), so that a root that
// ZooKeeper lost comes back with it; else with the client's own.
func (c *Client) ensureRoot(ctx context.Context) error {
	return c.ensure(ctx, KindRoot, c.opts.Root)
}

// ensure creates the znode at p, a znode of kind k, with the layout's ACL
// when it is missing, and its missing ancestors with the client's.
func (c *Client) ensure(ctx context.Context, k Kind, p string) error {
	ok, _, err := c.zk.Session().Exists(ctx, p)
	c.stats.requests.Add(1)
	if err == nil && ok {
		return nil
	}
	if parent := path.Dir(p); parent != "/" {
		if err := c.zk.EnsurePath(ctx, parent); err != nil {
			return err
		}
	}
	_, err = c.write(ctx, c.createOp(ctx, k, p, nil, 0))
	if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}
