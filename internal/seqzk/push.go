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
	_, err := c.push(ctx, name, "", ids)
	return err
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
	return c.push(ctx, name, key, ids)
}

// push is the one loop of Push (key "") and PushOnce (a valid key). Under
// the node's lock it prepares the push on the cached state, read afresh
// when unusable, checks the sequence's windows, and writes by
// compare-and-set, until the push is written, found already applied,
// refused, or ctx is done. A refusal is decided on a fresh read only. Reads
// and conflicts are retried; a write whose reply was lost only with a key
// (see pushCall.written).
func (c *Client) push(ctx context.Context, name, key string, ids state.Ranges) (already bool, err error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	norm, err := state.NormalizeRanges(ids)
	if err != nil {
		return false, fmt.Errorf("sequence %q: %w: %v", name, state.ErrBadPush, err)
	}
	if len(norm) == 0 {
		return false, nil
	}
	p := &pushCall{c: c, name: name, key: key, ids: norm}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return p.fail(err)
		}
		fresh := !nd.usable(c.zk.Connection())
		if fresh {
			if _, err := c.load(ctx, name, nd, false); err != nil {
				// Nothing was written by this read: safe to retry.
				if err := c.backOff(ctx, attempt, err); err != nil {
					return p.fail(err)
				}
				continue
			}
		}
		st := nd.state
		already, err := p.prepare(&st)
		switch {
		case already:
			// Recorded before this call, or by this call's write whose
			// reply was lost.
			return p.lost == nil, nil
		case err != nil && !fresh:
			// The cache may be behind other clients' takes (it is kept
			// across their writes): refuse only on what ZooKeeper holds
			// now.
			nd.valid = false
			continue
		case err != nil:
			return p.fail(err)
		}
		if err := c.checkWindows(ctx, name, nd, norm); err != nil {
			if err := c.backOff(ctx, attempt, err); err != nil {
				return p.fail(err)
			}
			continue
		}
		stat, err := c.cas(ctx, nd, st)
		if err == nil {
			if stat.Czxid != nd.czxid {
				return false, c.recreated(name, nd, stat)
			}
			nd.state, nd.version = st, stat.Version
			return false, nil
		}
		if err := p.written(ctx, nd, st.Marker, attempt, err); err != nil {
			return p.fail(err)
		}
	}
}

// pushCall is one call of push: what it pushes, and whether one of its
// writes may have landed unseen.
type pushCall struct {
	c         *Client
	name, key string       // key is "" for a plain Push
	ids       state.Ranges // normalized, not empty
	// lost is the error of a write whose reply was lost (it may have
	// been applied); nil while no write of this call may have landed.
	lost error
	// marker is the marker of the state that write was prepared from.
	marker string
	// gone counts the writes refused because the state's marker was
	// missing.
	gone int
}

// prepare applies the push to st, a copy of the cached state. It reports
// already when st records the key. With a key it refuses once the state's
// marker changed since a lost write: Rotate and Revalidate keep the keys,
// but a ZooKeeper rollback, and the revalidation after it, would lose a key
// the lost write recorded, while the IDs it pushed may have been taken in
// the lost history, so pushing again could hand them out twice.
func (p *pushCall) prepare(st *state.State) (already bool, err error) {
	switch {
	case p.key == "":
		return false, st.Push(p.ids)
	case st.HasPushKey(p.key):
		return true, nil
	case p.lost != nil && st.Marker != p.marker:
		return false, fmt.Errorf("the state's marker changed from %q to %q since that write, so a missing key does not prove it was not applied", p.marker, st.Marker)
	}
	return st.PushOnce(p.ids, p.key)
}

// written settles a compare-and-set of the push, prepared from a state
// with marker, that failed with err: it returns nil when the loop should
// read and try again, or the error to end the call with (passed through
// fail). A write that may have landed (connection loss, session expiry) is
// recorded as lost; only a keyed push retries it, since the next read shows
// its key if it landed, while a plain Push would recycle the IDs twice.
func (p *pushCall) written(ctx context.Context, nd *node, marker string, attempt int, err error) error {
	c := p.c
	switch {
	case errors.Is(err, errMarkerGone):
		// Nothing was written: the cached state was of another
		// history or incarnation. Read again.
		nd.valid, nd.deleted = false, nil
		if p.gone++; p.gone > 3 {
			return fmt.Errorf("sequence %q: push %s: the state's marker %s keeps being missing; the primary must revalidate the sequence first (nothing was pushed by this attempt)", p.name, p.ids, marker)
		}
		return nil
	case errors.As(err, new(*unvalidatedError)):
		return fmt.Errorf("sequence %q: push %s: %w (nothing was pushed by this attempt; try again once the primary has rotated it)", p.name, p.ids, err)
	case errors.Is(err, zkclient.ErrBadVersion):
		nd.valid = false
		return nil
	case errors.Is(err, zkclient.ErrNoNode):
		nd.valid, nd.deleted = false, nil
		return nil
	}
	nd.valid = false
	if p.lost == nil {
		p.lost, p.marker = err, marker
	}
	if p.key == "" {
		return err
	}
	return c.backOff(ctx, attempt, err)
}

// fail returns err, or, once a write of this call may have landed, an error
// wrapping ErrUncertain that says why this call cannot tell and what the
// caller may do: retry with the same key, or, for a plain Push, treat the
// IDs as lost.
func (p *pushCall) fail(err error) (bool, error) {
	if p.lost == nil {
		return false, err
	}
	what, advice := "push "+p.ids.String(), "treat these IDs as lost and do not push them again"
	if p.key != "" {
		what += " with key " + p.key
		advice = "push again with the same key to learn whether it was applied"
	}
	if err == p.lost {
		return false, fmt.Errorf("sequence %q: %s: %w: %v; %s", p.name, what, ErrUncertain, err, advice)
	}
	return false, fmt.Errorf("sequence %q: %s: %w: %v, after a write whose reply was lost (%v); %s",
		p.name, what, ErrUncertain, err, p.lost, advice)
}

// backOff decides whether to try again after err: when err is transient it
// counts a retry, waits before the next attempt and returns nil (or ctx's
// error if ctx ends first); otherwise it returns err. The caller knows a
// retry is safe.
func (c *Client) backOff(ctx context.Context, attempt int, err error) error {
	if !zkclient.IsTransient(err) {
		return err
	}
	c.stats.retries.Add(1)
	return retryDelay.Wait(ctx, attempt)
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
