package seqzk

import (
	"context"

	"github.com/seqkeeper/seqkeeper/internal/parallel"
	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// MaxRaiseBatch is how many raises RaiseAll puts in one ZooKeeper
// transaction (two operations each: a marker check and a set), far below
// ZooKeeper's request size limit.
const MaxRaiseBatch = 100

// RaiseReq asks for sequence Name's ceiling to go up to Ceiling.
type RaiseReq struct {
	Name    string
	Ceiling int64
	// Base, if set, is the sequence's state as the caller last read it, at
	// data version Version: RaiseAll writes the raise from it without
	// reading the sequence again. The write is the same compare-and-set
	// as after a read (the version and the marker checked), so a base
	// that is no longer current fails and is left to the caller like any
	// conflict; pass a base only where that is rare (a reserve that is
	// empty, which no take can move).
	Base    *state.State
	Version int32
}

// Raised is a raise RaiseAll made: the state it wrote and the data
// version it is at; and, for watcher.Watcher.Wrote, the data it wrote and
// its set's result (Result.Stat nil when Version is not known).
type Raised struct {
	State   state.State
	Version int32
	Data    []byte
	Result  zkclient.OpResult
}

// RaiseAll raises many ceilings with few ZooKeeper writes. It reads every
// sequence afresh (reads are pipelined, and cheap next to writes) unless
// the request carries its Base, then writes the raises in multi()
// transactions of up to MaxRaiseBatch, each raise conditional on the data
// version it read and on its marker, like Raise's compare-and-set. A transaction is all or nothing, so a raise
// whose condition fails (a worker took since the read) is taken out and
// the rest is sent again.
//
// It returns the new state and version of each request it raised, by
// index, and the indexes it left to the caller, who raises them one by one with Raise:
// those whose state moved, those that are not plain validated states (a
// registration, a legacy counter, a state without a marker), those that
// could not be read, those at the data version limit or with nothing to
// raise, and all of a transaction whose outcome is unknown (a connection
// error; Raise is idempotent). The caller must hold the ceilings in the
// store first, as for Raise.
func (k Keeper) RaiseAll(ctx context.Context, reqs []RaiseReq) (done map[int]Raised, rest []int) {
	c := k.c
	done = make(map[int]Raised, len(reqs))
	read := c.readForRaise(ctx, reqs)
	var batch []raiseItem
	flush := func() {
		rest = append(rest, c.raiseBatch(ctx, reqs, batch, done)...)
		batch = nil
	}
	for i, r := range reqs {
		it := read[i]
		if it == nil || it.st.Legacy || it.st.Registered || !it.st.Validated() ||
			it.version < 0 || it.version >= state.VersionLimit-1 || min(r.Ceiling, it.st.End) <= it.st.Ceiling {
			rest = append(rest, i)
			continue
		}
		it.st.Ceiling = min(r.Ceiling, it.st.End)
		if it.st.Validate() != nil {
			rest = append(rest, i)
			continue
		}
		batch = append(batch, *it)
		if len(batch) == MaxRaiseBatch {
			flush()
		}
	}
	flush()
	return done, rest
}

// raiseItem is a state RaiseAll raises: reqs[i]'s, at data version version.
type raiseItem struct {
	i       int
	st      state.State
	version int32
}

// readForRaise returns, by index, the state of each request with a valid
// name: its Base if it carries one, else read from ZooKeeper, up to 64
// reads at once. A request whose read failed, or whose data does not
// parse, is nil.
func (c *Client) readForRaise(ctx context.Context, reqs []RaiseReq) []*raiseItem {
	read := make([]*raiseItem, len(reqs))
	parallel.Each(len(reqs), 64, func(i int) {
		r := reqs[i]
		switch {
		case ValidateName(r.Name) != nil:
			return
		case r.Base != nil:
			read[i] = &raiseItem{i, *r.Base, r.Version}
			return
		}
		c.stats.requests.Add(1)
		data, stat, err := c.zk.Session().Get(ctx, c.Path(r.Name))
		if err != nil {
			return
		}
		if st, err := state.ParseState(r.Name, data); err == nil {
			read[i] = &raiseItem{i, st, stat.Version}
		}
	})
	return read
}

// raiseBatch writes batch's raised states in one transaction, each set
// conditional on its data version and its marker, and records each raise
// in done by request index. When a condition fails it takes that raise out
// and sends the rest again. It returns the indexes left to the caller: the
// raises taken out, and all of a transaction whose outcome is unknown (a
// connection error, or ctx done).
func (c *Client) raiseBatch(ctx context.Context, reqs []RaiseReq, batch []raiseItem, done map[int]Raised) (rest []int) {
	for len(batch) > 0 {
		ops := make([]zkclient.Op, 0, 2*len(batch))
		data := make([][]byte, len(batch))
		for k, it := range batch {
			path := c.Path(reqs[it.i].Name)
			data[k] = it.st.Encode()
			ops = append(ops,
				zkclient.CheckOp(path+"/"+it.st.Marker, 0),
				zkclient.SetOp(path, data[k], it.version))
		}
		res, err := c.write(ctx, ops...)
		if err == nil {
			for k, it := range batch {
				done[it.i] = Raised{it.st, res[2*k+1].Stat.Version, data[k], res[2*k+1]}
			}
			return rest
		}
		failed := zkclient.FailedOp(err)
		if failed < 0 || failed >= len(ops) || ctx.Err() != nil {
			for _, it := range batch { // outcome unknown, or no index
				rest = append(rest, it.i)
			}
			return rest
		}
		k := failed / 2
		rest = append(rest, batch[k].i)
		batch = append(batch[:k], batch[k+1:]...)
	}
	return rest
}
