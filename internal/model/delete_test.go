package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
	"github.com/seqkeeper/seqkeeper/sequence"
)

// deleteSequence deletes a sequence as 'seqkeeper delete' does: the znode
// with ZooKeeper's deletion record, then the store's tombstone. It is a
// variable so that the model can run against a tree whose delete has
// another signature (set it to a stand-in there).
var deleteSequence = func(ctx context.Context, seqs *seqzk.Client, store *persist.Store, name string) (int64, error) {
	return seqs.Operator().Delete(ctx, name, store)
}

// opDelete deletes a live sequence, or a deleted one a ZooKeeper rollback
// may have brought back (deleting it again is what ends that state).
func (e *env) opDelete(r *rand.Rand) (string, bool) {
	var live []string
	for _, s := range e.specs {
		if e.live(s.name) || e.undeletable[s.name] {
			live = append(live, s.name)
		}
	}
	if len(live) == 0 {
		return "", false
	}
	return e.deleteName(live[r.IntN(len(live))], r.IntN(2) == 0), true
}

// deleteName deletes name as 'seqkeeper delete' does, or over the HTTP
// API's admin route.
func (e *env) deleteName(name string, overHTTP bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var tomb int64
	var err error
	if overHTTP {
		tomb, err = e.httpDelete(ctx, name)
	} else {
		tomb, err = deleteSequence(ctx, e.admin, e.store, name)
	}
	cancel()
	// A delete that failed deleted the name only if the znode is gone and
	// its deletion is recorded: in ZooKeeper's deletion record, up to what
	// was handed out (a delete records it there first, in the transaction
	// that removes the znode), or in the store. One that found no znode,
	// or failed before its transaction (a connection lost just after
	// ZooKeeper lost its data), deleted nothing: the name may be lost by
	// ZooKeeper and about to be restored.
	failed := err != nil && !errors.Is(err, sequence.ErrUnknownSequence)
	recorded, buried := int64(0), false
	if failed && !e.existsSure(name) {
		recorded, buried = e.deletionRecorded(name), e.tombstoned(name)
	}
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledgers[name]
	gone := err == nil || buried || recorded > 0 && l != nil && recorded >= l.highest
	class := m.call("delete", err)
	if !gone {
		return fmt.Sprintf("delete %s -> %s (still there)", name, class)
	}
	e.deleted[name] = m.op
	delete(e.undeletable, name)
	if err == nil && !m.lost[name] && tomb < l.highest {
		m.fail(fmt.Sprintf("TOMBSTONE BELOW ISSUED: deleting %q at op #%d left a tombstone with ceiling %d, but %d was handed out: a re-created %q could hand it out again",
			name, m.op, tomb, l.highest, name))
	}
	via := ""
	if overHTTP {
		via = " over HTTP"
	}
	return fmt.Sprintf("delete %s%s -> %s, tombstone ceiling %d (highest handed out %d)", name, via, class, tomb, l.highest)
}

// deletionRecorded returns the ceiling of ZooKeeper's deletion record of
// name: 0 when there is none, -1 when it cannot tell.
func (e *env) deletionRecorded(name string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	d, err := e.admin.Meta().ReadDeletion(ctx, name)
	if err != nil {
		return -1
	}
	return d.Ceiling
}

// tombstoned reports whether the store holds name deleted (false when it
// cannot tell).
func (e *env) tombstoned(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rec, err := e.store.Get(ctx, name)
	return err == nil && rec.Deleted()
}

// existsSure reports whether the znode of name exists, retrying read
// errors for a while; it says true when it cannot tell.
func (e *env) existsSure(name string) bool {
	for range 50 {
		ok, _, err := e.admin.ZK().Session().Exists(context.Background(), e.admin.Path(name))
		if err == nil {
			return ok
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// replyLost reports whether a create that failed with err may have
// landed all the same, now or later: a connection error or a timeout lost
// its reply, and the request may still be on its way. Counted as failed,
// such a create makes the name's existence read as a revival.
func replyLost(err error) bool {
	switch classify(err) {
	case "zk-connection", "deadline", "canceled", "other":
		return true
	}
	return false
}

// opRecreate registers a deleted name again, with its registration.
func (e *env) opRecreate(r *rand.Rand) (string, bool) {
	var gone []string
	for _, s := range e.specs {
		if !e.live(s.name) {
			gone = append(gone, s.name)
		}
	}
	if len(gone) == 0 {
		return "", false
	}
	return e.recreateName(gone[r.IntN(len(gone))], r.IntN(2) == 0), true
}

// recreateName registers a deleted name again, as a bare znode (a worker's
// registration) or over the HTTP API's admin route.
func (e *env) recreateName(name string, overHTTP bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	var err error
	if overHTTP {
		err = e.httpCreate(ctx, name)
	} else {
		err = e.admin.Register(ctx, name, e.spec(name).reg)
	}
	cancel()
	lost := replyLost(err)
	landed := lost && e.existsSure(name)
	m := e.m
	m.mu.Lock()
	defer m.mu.Unlock()
	class := m.call("recreate", err)
	switch {
	case err == nil:
	case landed:
		m.notes["a create whose reply was lost landed"]++ // m.mu is held
	case class == "exists":
		if e.undeletable[name] {
			// Still the rolled-back state (the store keeps the name
			// deleted while ZooKeeper holds it, until it is deleted
			// again), or a create whose reply was lost landed late.
			m.notes["deleted sequence back after a restore of ZooKeeper from a copy taken before its delete, or a create whose reply was lost"]++
			return fmt.Sprintf("recreate %s -> %s", name, class)
		}
		m.fail(fmt.Sprintf("RESURRECTED: %q, deleted at op #%d, exists again at op #%d, with no restore of ZooKeeper from a copy taken before its delete",
			name, e.deleted[name], m.op))
	case lost:
		// Not there yet, but it may still land: the name may exist from
		// now on, as after a restore of ZooKeeper from an older copy.
		e.undeletable[name] = true
		return fmt.Sprintf("recreate %s -> %s (its reply lost: it may land)", name, class)
	default:
		return fmt.Sprintf("recreate %s -> %s", name, class)
	}
	delete(e.deleted, name)
	delete(e.undeletable, name)
	if landed {
		class += " (its reply lost: it landed)"
	}
	return fmt.Sprintf("recreate %s -> %s", name, class)
}
