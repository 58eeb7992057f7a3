package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// deleteAttempts bounds the re-reads when the sequence keeps changing under
// Delete (clients taking, the primary raising).
const deleteAttempts = 20

// ErrDeleteContended reports a Delete that gave up because the sequence
// kept changing under it. The tombstone is written; the znode is not
// deleted yet.
var ErrDeleteContended = errors.New("sequence keeps changing under delete")

// A Tombstoner durably records deleted sequences: the store the primary
// writes its ceilings to (persist.Store is one).
type Tombstoner interface {
	// Bury durably records that sequence name is deleted and handed out
	// no ID above ceiling, and returns the ceiling the record holds: at
	// least ceiling, more when an earlier incarnation of the name issued
	// more. When an incarnation of the name newer than the one read was
	// born meanwhile, it buries nothing and fails with an error that has
	// a method ReadAgain() bool returning true.
	Bury(ctx context.Context, name string, ceiling int64) (int64, error)
}

// readAgain reports whether a Tombstoner's error asks for a fresh read.
func readAgain(err error) bool {
	var ra interface{ ReadAgain() bool }
	return errors.As(err, &ra) && ra.ReadAgain()
}

// Delete deletes sequence name for good. First the store records a
// tombstone holding the sequence's ceiling (Tombstoner.Bury), so that a
// sequence created later under the name starts above every ID this one
// issued and a restore never brings it back; then the znode goes, with
// its windows and marker, in one transaction that also writes ZooKeeper's
// copy of the tombstone (Deletion) and succeeds only if the znode is
// still at the version whose ceiling the tombstone holds. Otherwise it
// reads again (and buries again if the ceiling rose). It returns the
// ceiling the tombstone holds: the sequence's, or an earlier incarnation's
// when that was higher.
//
// Delete may run beside a primary and busy clients: a raise that races the
// tombstone cannot undo it (the store's record of a deleted incarnation
// stays deleted whatever is written for it later), and a primary that is
// creating the name again (a restore, an initialisation) checks ZooKeeper's
// copy of the tombstone in the transaction that creates it.
func (c *Client) Delete(ctx context.Context, name string, store Tombstoner) (int64, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	p := c.Path(name)
	stored := int64(-1)
	for attempt := 0; attempt < deleteAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s := c.zk.Session()
		data, stat, err := c.get(ctx, s, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			if stored >= 0 {
				return stored, nil // deleted by someone else after our tombstone
			}
			return 0, &UnknownSequenceError{Name: name, Root: c.opts.Root}
		}
		if err != nil {
			return 0, fmt.Errorf("sequence %q: read %s: %w", name, p, err)
		}
		st, err := state.ParseState(name, data)
		if err != nil {
			return 0, fmt.Errorf("%w; repair the znode before deleting it (its ceiling must be known for the tombstone)", err)
		}
		ceiling := TombstoneCeiling(st)
		if ceiling > stored {
			held, err := store.Bury(ctx, name, ceiling)
			if readAgain(err) && attempt < deleteAttempts-1 {
				// A newer incarnation was born meanwhile: read again.
				if err := retryDelay.Wait(ctx, attempt); err != nil {
					return 0, err
				}
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("sequence %q: write the tombstone (ceiling %d) to the store: %w; nothing was deleted", name, ceiling, err)
			}
			stored = max(held, ceiling)
		}
		// ZooKeeper's copy says what the store's does: the deleted
		// incarnations handed out nothing above it, and any later one
		// is born above it.
		err = c.Remove(ctx, s, name, stat.Version, stored)
		switch {
		case err == nil:
			return stored, nil
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNotEmpty), errors.Is(err, zkclient.ErrNoNode),
			errors.Is(err, zkclient.ErrNodeExists):
			continue // changed meanwhile (a take, a raise, a new window): read again
		default:
			return 0, fmt.Errorf("sequence %q: delete %s (tombstone written): %w; run delete again", name, p, err)
		}
	}
	return 0, fmt.Errorf("sequence %q: %w (%d attempts); stop its clients and try again (the tombstone is written)", name, ErrDeleteContended, deleteAttempts)
}

// TombstoneCeiling is the highest ID a sequence in state st may have
// issued: its ceiling, or for a legacy counter the counter itself, or for a
// registration nothing (start-1).
func TombstoneCeiling(st state.State) int64 {
	switch {
	case st.Legacy:
		return st.Next
	case st.Registered:
		return st.Start - 1
	}
	return st.Ceiling
}
