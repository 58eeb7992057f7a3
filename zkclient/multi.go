package zkclient

import (
	"context"
	"fmt"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
)

// Op is one operation of a transaction (Multi).
type Op struct {
	kind    string
	path    string
	data    []byte
	version int32
	flags   CreateFlags
	acl     []ACL // of a create; nil: the client's
}

// WithACL returns the create o with acl instead of the client's ACL.
func (o Op) WithACL(acl []ACL) Op {
	o.acl = acl
	return o
}

// CreateOp creates a znode (see Session.Create).
func CreateOp(path string, data []byte, flags CreateFlags) Op {
	return Op{kind: "create", path: path, data: data, flags: flags}
}

// SetOp sets a znode's data (see Session.Set).
func SetOp(path string, data []byte, version int32) Op {
	return Op{kind: "set", path: path, data: data, version: version}
}

// DeleteOp deletes a znode (see Session.Delete).
func DeleteOp(path string, version int32) Op {
	return Op{kind: "delete", path: path, version: version}
}

// CheckOp fails the transaction unless the znode exists at version.
func CheckOp(path string, version int32) Op {
	return Op{kind: "check", path: path, version: version}
}

// Path is the znode the operation is on.
func (o Op) Path() string { return o.path }

// IsCheck reports whether o is a CheckOp.
func (o Op) IsCheck() bool { return o.kind == "check" }

func (o Op) String() string {
	if o.kind == "create" {
		return o.kind + " " + o.path
	}
	return fmt.Sprintf("%s %s at version %d", o.kind, o.path, o.version)
}

func (o Op) request(acl []zk.ACL) any {
	switch o.kind {
	case "create":
		if o.acl != nil {
			acl = toZK(o.acl)
		}
		return &zk.CreateRequest{Path: o.path, Data: o.data, Acl: acl, Flags: int32(o.flags)}
	case "set":
		return &zk.SetDataRequest{Path: o.path, Data: o.data, Version: o.version}
	case "delete":
		return &zk.DeleteRequest{Path: o.path, Version: o.version}
	}
	return &zk.CheckVersionRequest{Path: o.path, Version: o.version}
}

// OpResult is the outcome of one operation of a transaction.
type OpResult struct {
	// Path is the created znode's path, for a CreateOp.
	Path string
	// Stat is the znode's new stat, for a SetOp.
	Stat *Stat
	// Stamp is the Event.Stamp of the last notification this client
	// dispatched before the transaction's reply (the same in every result
	// of a transaction). ZooKeeper sends a session the notifications of
	// the writes it applies in their order, the notifications of a write
	// before its reply: so every notification stamped at or below Stamp
	// is of this transaction or of a write before it, and every one above
	// of a later write. 0 when the reply came on a connection that was no
	// longer the client's (nothing is known then).
	Stamp uint64
}

// Multi applies ops atomically: all of them or none. When an operation
// fails, the error is a *MultiError naming it, which unwraps to the
// operation's error.
func (s Session) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	reqs := make([]any, len(ops))
	for i, op := range ops {
		reqs[i] = op.request(s.c.acl)
	}
	var stamp uint64 // written on the receive loop before the reply is delivered
	res, err := run(ctx, s, "multi", func() ([]zk.MultiResponse, error) {
		return s.conn.MultiAt(func() { stamp = s.c.stampAt(s.conn.gen) }, reqs...)
	})
	// ZooKeeper answers a failed transaction with a result per operation:
	// "ok" for those before the failed one, the failed one's error, then
	// "runtime inconsistency" for the rest.
	for i, r := range res {
		if r.Error != nil {
			return nil, &MultiError{Index: i, Op: ops[i], Err: r.Error}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(res) != len(ops) {
		return nil, fmt.Errorf("zookeeper transaction: %d results for %d operations", len(res), len(ops))
	}
	out := make([]OpResult, len(res))
	for i, r := range res {
		out[i] = OpResult{Path: r.String, Stat: stat(r.Stat), Stamp: stamp}
	}
	return out, nil
}
