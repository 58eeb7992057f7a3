package zkclient

import (
	"context"
	"fmt"
	"strings"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
)

// Perms is a set of ZooKeeper permissions on one znode.
type Perms int32

// ZooKeeper's permissions. ADMIN is the right to change the ACL.
const (
	PermRead   Perms = zk.PermRead
	PermWrite  Perms = zk.PermWrite
	PermCreate Perms = zk.PermCreate
	PermDelete Perms = zk.PermDelete
	PermAdmin  Perms = zk.PermAdmin
	PermAll    Perms = zk.PermAll
)

// String spells p as ZooKeeper's CLI does: "crwda", a letter for each
// permission held (create, read, write, delete, admin).
func (p Perms) String() string {
	var b strings.Builder
	for _, x := range []struct {
		perm   Perms
		letter byte
	}{{PermCreate, 'c'}, {PermRead, 'r'}, {PermWrite, 'w'}, {PermDelete, 'd'}, {PermAdmin, 'a'}} {
		if p&x.perm != 0 {
			b.WriteByte(x.letter)
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// ID is a ZooKeeper identity: a scheme and an id in it, as
// "x509:CN=worker,O=example", "digest:user:<base64 SHA-1>",
// "world:anyone" or "ip:10.0.0.0/8".
type ID struct {
	Scheme, ID string
}

func (id ID) String() string { return id.Scheme + ":" + id.ID }

// ParseID reads "scheme:id".
func ParseID(s string) (ID, error) {
	scheme, id, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || id == "" {
		return ID{}, fmt.Errorf("zookeeper identity %q: want scheme:id, as x509:CN=worker or digest:user:hash", s)
	}
	return ID{scheme, id}, nil
}

// ACL is one entry of a znode's access control list.
type ACL struct {
	Perms Perms
	ID
}

func (a ACL) String() string { return a.ID.String() + ":" + a.Perms.String() }

// DigestID is the identity ZooKeeper's digest scheme gives the credentials
// "user:password": "user:" and the base64 SHA-1 of "user:password".
func DigestID(credentials string) ID {
	user, password, _ := strings.Cut(credentials, ":")
	a := zk.DigestACL(zk.PermAll, user, password)[0]
	return ID{a.Scheme, a.ID}
}

func toZK(acl []ACL) []zk.ACL {
	out := make([]zk.ACL, len(acl))
	for i, a := range acl {
		out[i] = zk.ACL{Perms: int32(a.Perms), Scheme: a.Scheme, ID: a.ID.ID}
	}
	return out
}

func fromZK(acl []zk.ACL) []ACL {
	out := make([]ACL, len(acl))
	for i, a := range acl {
		out[i] = ACL{Perms: Perms(a.Perms), ID: ID{a.Scheme, a.ID}}
	}
	return out
}

// GetACL returns a znode's ACL and stat (its Aversion counts ACL changes).
func (s Session) GetACL(ctx context.Context, path string) ([]ACL, *Stat, error) {
	type got struct {
		acl []zk.ACL
		st  *zk.Stat
	}
	r, err := run(ctx, s, "getacl", func() (got, error) {
		acl, st, err := s.conn.GetACL(path)
		return got{acl, st}, err
	})
	return fromZK(r.acl), stat(r.st), err
}

// SetACL replaces a znode's ACL if its ACL version is version (AnyVersion:
// any). It needs the ADMIN permission.
func (s Session) SetACL(ctx context.Context, path string, acl []ACL, version int32) (*Stat, error) {
	st, err := run(ctx, s, "setacl", func() (*zk.Stat, error) { return s.conn.SetACL(path, toZK(acl), version) })
	return stat(st), err
}

// CreateWithACL is Create with acl instead of the client's ACL.
func (s Session) CreateWithACL(ctx context.Context, path string, data []byte, flags CreateFlags, acl []ACL) (string, error) {
	return run(ctx, s, "create", func() (string, error) {
		return s.conn.Create(path, data, int32(flags), toZK(acl))
	})
}

// ACL is the ACL the client gives the znodes it creates.
func (c *Client) ACL() []ACL { return fromZK(c.acl) }
