package seqzk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Limits of one restore transaction: ZooKeeper refuses requests above
// jute.maxbuffer (1 MB by default), so batches stay well below it.
const (
	restoreBatchBytes = 512 << 10
	restoreBatchOps   = 1000
	// restoreParallelism bounds the restore transactions in flight.
	restoreParallelism = 4
)

// Restoration is one sequence for Restore to create: its state, and its
// deletion record as the caller read it before it decided to create the
// sequence (and read the store for its floor).
type Restoration struct {
	State state.State
	Guard Deletion
}

// Restore creates the znodes of sequences that do not exist, in batched
// multi() transactions (all or nothing per batch, each under 512 KB), and
// returns the names it created. It is the primary's operation after
// ZooKeeper lost data (and an import's): every state must already be
// covered by the durable store. States are stamped with epoch and a fresh
// marker, created in the same transaction; each transaction also writes
// the root so the epoch it landed in is known, and Restore returns the
// names whose stamp turned out wrong (ZooKeeper changed leaders
// meanwhile), for the caller to Revalidate.
//
// A sequence is created only while it does not exist and its deletion
// record is still as its Guard says: a sequence created, or deleted, by
// someone else after the caller decided is left alone (the caller decides
// again from what it reads then). An invalid state is left out and
// reported in err; it does not hold back the others.
func (k Keeper) Restore(ctx context.Context, rs []Restoration, epoch int64) (created, stale []string, err error) {
	c := k.c
	if len(rs) == 0 {
		return nil, nil, nil
	}
	if err := c.Meta().EnsureMeta(ctx); err != nil {
		return nil, nil, err
	}
	// Validate everything and cut it into transactions first.
	var batches [][]Restoration
	var batch []Restoration
	var invalid []error
	size := 0
	for _, r := range rs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		st := r.State
		if err := ValidateName(st.Name); err != nil {
			invalid = append(invalid, err)
			continue
		}
		if !st.Legacy {
			st.ZKEpoch, st.Marker, st.PushFloor = epoch, newMarker(), max(st.PushFloor, st.Next)
		}
		if err := st.Validate(); err != nil {
			invalid = append(invalid, fmt.Errorf("restore: %w", err))
			continue
		}
		n := len(st.Encode()) + 4*len(c.Path(st.Name)) + 256
		if len(batch) > 0 && (size+n > restoreBatchBytes || len(batch) >= restoreBatchOps) {
			batches = append(batches, batch)
			batch, size = nil, 0
		}
		batch = append(batch, Restoration{State: st, Guard: r.Guard})
		size += n
	}
	if len(batch) > 0 {
		batches = append(batches, batch)
	}

	// Performance: the transactions are independent, so up to
	// restoreParallelism of them are in flight at once. go-zookeeper
	// pipelines them on the one connection and the server commits them
	// with shared fsyncs, instead of one round trip (and one fsync) after
	// another. The first failure stops new transactions from starting.
	var (
		mu     sync.Mutex
		errs   []error
		failed atomic.Bool
	)
	parallel.Each(len(batches), restoreParallelism, func(i int) {
		if failed.Load() || ctx.Err() != nil {
			return
		}
		n, st, err := c.restoreBatch(ctx, batches[i], epoch)
		mu.Lock()
		defer mu.Unlock()
		created = append(created, n...)
		stale = append(stale, st...)
		if err != nil {
			failed.Store(true)
			errs = append(errs, err)
		}
	})
	if len(errs) == 0 && ctx.Err() != nil {
		return created, stale, ctx.Err()
	}
	return created, stale, errors.Join(append(invalid, errs...)...)
}

// absent is the holding r was decided from: no znode, and its deletion
// record as read. Creating r's state from it is a birth of the lifecycle
// protocol.
func absent(r Restoration) Holding {
	return Holding{Name: r.State.Name, Deletion: r.Guard, guarded: true}
}

// restoreBatch creates the znodes of one batch of Restore in one multi()
// transaction, or one by one when some exist already or their guard failed.
func (c *Client) restoreBatch(ctx context.Context, batch []Restoration, epoch int64) (created, stale []string, err error) {
	ops := make([]zkclient.Op, 0, 4*len(batch)+1)
	for _, r := range batch {
		ops = append(ops, c.changeOps(ctx, absent(r), Change{State: &r.State})...)
	}
	ops = append(ops, zkclient.SetOp(c.opts.Root, nil, zkclient.AnyVersion))
	res, err := c.write(ctx, ops...)
	switch {
	case err == nil:
		for _, r := range batch {
			created = append(created, r.State.Name)
		}
		if epochOf(res[len(res)-1].Stat.Mzxid) != epoch {
			stale = append(stale, created...)
		}
		return created, stale, nil
	case errors.Is(err, zkclient.ErrNodeExists), errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode):
		// Some exist already, or were deleted since the caller decided:
		// create the rest one by one, each under its own guard.
		for _, r := range batch {
			if err := ctx.Err(); err != nil {
				return created, stale, err
			}
			stat, err := c.Keeper().Commit(ctx, absent(r), Change{State: &r.State})
			switch {
			case err == nil:
				created = append(created, r.State.Name)
				if epochOf(stat.Mzxid) != epoch {
					stale = append(stale, r.State.Name)
				}
			case !errors.Is(err, ErrChangedMeanwhile):
				return created, stale, err
			}
		}
		return created, stale, nil
	default:
		return nil, nil, fmt.Errorf("restore %d sequences under %s: %w", len(batch), c.opts.Root, err)
	}
}
