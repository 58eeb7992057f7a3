package seqzk

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Push returns IDs of sequence name for reuse; later takes hand them out
// again before fresh ones. It refuses, with an error wrapping ErrBadPush and
// without changing anything, ranges holding IDs the sequence never issued,
// lying outside its space, or already recycled: accepting them could hand an
// ID out twice. Push only IDs you took and will not use.
//
// Push retries compare-and-set conflicts until ctx is done. If the
// connection is lost before the reply it does not retry, since the first
// write may have been applied and a second would recycle the IDs twice: it
// returns an error wrapping ErrUncertain, and the IDs must be treated as
// lost. PushOnce, given an idempotency key, can retry safely.
func (c *Client) Push(ctx context.Context, name string, ids state.Ranges) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	norm, err := state.NormalizeRanges(ids)
	if err != nil {
		return fmt.Errorf("sequence %q: %w: %v", name, state.ErrBadPush, err)
	}
	if len(norm) == 0 {
		return nil
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	gone := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		fresh := !nd.usable(c.zk.Connection())
		if fresh {
			if _, err := c.load(ctx, name, nd, false); err != nil {
				if zkclient.IsTransient(err) {
					// Nothing was written yet: safe to retry.
					c.stats.retries.Add(1)
					if err := retryDelay.Wait(ctx, attempt); err != nil {
						return err
					}
					continue
				}
				return err
			}
		}
		st := nd.state
		if err := st.Push(norm); err != nil {
			if !fresh {
				// The cache may be behind other clients' takes (it is
				// kept across their writes): refuse only on what
				// ZooKeeper holds now.
				nd.valid = false
				continue
			}
			return err
		}
		if err := c.checkWindows(ctx, name, nd, norm); err != nil {
			if zkclient.IsTransient(err) {
				c.stats.retries.Add(1)
				if err := retryDelay.Wait(ctx, attempt); err != nil {
					return err
				}
				continue
			}
			return err
		}
		stat, err := c.cas(ctx, nd, st)
		switch {
		case err == nil:
			c.observe(stat)
			if stat.Czxid != nd.czxid {
				return c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			return nil
		case errors.Is(err, errMarkerGone):
			// Nothing was written: the cached state was of another
			// history or incarnation. Read again.
			nd.valid, nd.deleted = false, nil
			if gone++; gone > 3 {
				return fmt.Errorf("sequence %q: push %s: the state's marker %s keeps being missing; the primary must revalidate the sequence first (nothing was pushed)", name, norm, st.Marker)
			}
		case errors.As(err, new(*unvalidatedError)):
			return fmt.Errorf("sequence %q: push %s: %w (nothing was pushed; try again once the primary has rotated it)", name, norm, err)
		case errors.Is(err, zkclient.ErrBadVersion):
			c.stats.conflicts.Add(1)
			nd.valid = false
		case errors.Is(err, zkclient.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		default:
			nd.valid = false
			return fmt.Errorf("sequence %q: push %s: %w: %v; treat these IDs as lost and do not push them again",
				name, norm, ErrUncertain, err)
		}
	}
}

// PushOnce is Push made idempotent by key, an idempotency key naming one
// logical push (see ValidatePushKey; a random UUID per logical push, the
// same on every retry). The key is recorded in the sequence's state in the
// same compare-and-set as the push (State.Pushed), so:
//
//   - if the state already records key, the push was applied before:
//     PushOnce changes nothing and returns already = true, even if the IDs
//     have been taken again since (pushing them again would hand them out
//     twice);
//   - otherwise it pushes ids as Push does (the same refusals, wrapping
//     ErrBadPush) and returns already = false.
//
// Unlike Push, PushOnce retries after losing a write's reply (connection
// loss, session expiry), until ctx is done: the retry reads the state, and
// finds the key if the lost write was applied. A key names one push: reusing
// it for other IDs makes that push a no-op (its IDs are lost, never handed
// out twice).
//
// The answer is definite while ZooKeeper keeps the key: while fewer than
// MaxPushKeys other keyed pushes to the sequence came in between, and while
// ZooKeeper keeps its data (a rollback or restore can lose the write that
// recorded the key). Within one call, PushOnce refuses to push again, and
// returns an error wrapping ErrUncertain, when the state's marker changed
// after a lost write (the primary revalidated, rotated or restored the
// sequence in between, so a missing key no longer proves the write did not
// land). It also returns ErrUncertain when ctx ends while the outcome of a
// write is unknown; a later PushOnce with the same key settles it.
func (c *Client) PushOnce(ctx context.Context, name, key string, ids state.Ranges) (already bool, err error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	if err := state.ValidatePushKey(key); err != nil {
		return false, fmt.Errorf("sequence %q: %w", name, err)
	}
	norm, err := state.NormalizeRanges(ids)
	if err != nil {
		return false, fmt.Errorf("sequence %q: %w: %v", name, state.ErrBadPush, err)
	}
	if len(norm) == 0 {
		return false, nil
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var (
		// lost is the error of a write whose reply was lost (it may have
		// been applied); nil while no write of this call may have landed.
		lost error
		// marker is the marker of the state that write was prepared from.
		marker string
	)
	// fail returns err, or, once a write may have landed, an error wrapping
	// ErrUncertain that says why this call cannot tell.
	fail := func(err error) (bool, error) {
		if lost == nil {
			return false, err
		}
		if err == lost {
			return false, fmt.Errorf("sequence %q: push %s with key %s: %w: %v; push again with the same key to learn whether it was applied",
				name, norm, key, ErrUncertain, err)
		}
		return false, fmt.Errorf("sequence %q: push %s with key %s: %w: %v, after a write whose reply was lost (%v); push again with the same key to learn whether it was applied",
			name, norm, key, ErrUncertain, err, lost)
	}
	gone := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		fresh := !nd.usable(c.zk.Connection())
		if fresh {
			if _, err := c.load(ctx, name, nd, false); err != nil {
				if !zkclient.IsTransient(err) {
					return fail(err)
				}
				// Nothing was written by this read: safe to retry.
				c.stats.retries.Add(1)
				if err := retryDelay.Wait(ctx, attempt); err != nil {
					return fail(err)
				}
				continue
			}
		}
		st := nd.state
		if st.HasPushKey(key) {
			// Recorded before this call (already), or by this call's
			// write whose reply was lost.
			return lost == nil, nil
		}
		if lost != nil && st.Marker != marker {
			// Rotate and Revalidate keep the keys, but a ZooKeeper
			// rollback, and the revalidation after it, would lose a key
			// the lost write recorded, while the IDs it pushed may have
			// been taken in the lost history: pushing again could hand
			// them out twice.
			return fail(fmt.Errorf("the state's marker changed from %q to %q since that write, so a missing key does not prove it was not applied", marker, st.Marker))
		}
		already, err := st.PushOnce(norm, key)
		if already {
			return true, nil
		}
		if err != nil && !fresh {
			nd.valid = false // refuse only on a fresh read (see Push)
			continue
		}
		if err != nil {
			return fail(err)
		}
		if err := c.checkWindows(ctx, name, nd, norm); err != nil {
			if !zkclient.IsTransient(err) {
				return fail(err)
			}
			c.stats.retries.Add(1)
			if err := retryDelay.Wait(ctx, attempt); err != nil {
				return fail(err)
			}
			continue
		}
		stat, err := c.cas(ctx, nd, st)
		switch {
		case err == nil:
			c.observe(stat)
			if stat.Czxid != nd.czxid {
				return false, c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			return false, nil
		case errors.Is(err, errMarkerGone):
			// Nothing was written: the cached state was of another
			// history or incarnation. Read again.
			nd.valid, nd.deleted = false, nil
			if gone++; gone > 3 {
				return fail(fmt.Errorf("sequence %q: push %s: the state's marker %s keeps being missing; the primary must revalidate the sequence first (nothing was pushed by this attempt)", name, norm, st.Marker))
			}
		case errors.As(err, new(*unvalidatedError)):
			return fail(fmt.Errorf("sequence %q: push %s: %w (nothing was pushed by this attempt; try again once the primary has rotated it)", name, norm, err))
		case errors.Is(err, zkclient.ErrBadVersion):
			c.stats.conflicts.Add(1)
			nd.valid = false
		case errors.Is(err, zkclient.ErrNoNode):
			nd.valid, nd.deleted = false, nil
		case zkclient.IsTransient(err):
			// The write may have landed. With the key that is safe to
			// find out: the next read shows the key if it did.
			nd.valid = false
			if lost == nil {
				lost, marker = err, st.Marker
			}
			c.stats.retries.Add(1)
			if berr := retryDelay.Wait(ctx, attempt); berr != nil {
				return fail(berr)
			}
		default:
			nd.valid = false
			if lost == nil {
				lost = err
			}
			return fail(err)
		}
	}
}

// checkWindows refuses a push of IDs that an open window of the sequence
// holds and has not handed out: they lie below the sequence's next (they
// were carved from it), yet were never issued. The caller holds nd.mu and
// has just read nd; the windows are listed after that read, so every
// window carved before it is seen (a window carved later changes the
// sequence's version and fails the push's compare-and-set), and a window's
// next only grows, so what passes here stays true.
func (c *Client) checkWindows(ctx context.Context, name string, nd *node, rs state.Ranges) error {
	if nd.state.Windows == 0 && len(nd.windows) == 0 {
		return nil
	}
	s := c.zk.Session()
	children, _, err := s.Children(ctx, nd.path)
	c.stats.requests.Add(1)
	if err != nil {
		return c.zkError(name, err)
	}
	for _, w := range childrenWith(children, state.WindowPrefix) {
		data, _, err := s.Get(ctx, nd.path+"/"+w)
		c.stats.requests.Add(1)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // pruned: every ID handed out
		}
		if err != nil {
			return c.zkError(name, err)
		}
		ws, err := state.ParseState(name+"/"+w, data)
		if err != nil {
			return err
		}
		if ws.Next > ws.End {
			continue
		}
		held := state.Range{Start: ws.Next, End: ws.End}
		for _, r := range rs {
			if r.Start <= held.End && held.Start <= r.End {
				return fmt.Errorf("sequence %q: %w: range %s: IDs %s are held by window %s and were never handed out; push back only IDs this sequence handed out",
					name, state.ErrBadPush, r, state.Range{Start: max(r.Start, held.Start), End: min(r.End, held.End)}, w)
			}
		}
	}
	return nil
}
