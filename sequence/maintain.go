package sequence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// WindowPrefix starts the name of every window znode under a sequence
// znode; ZooKeeper appends a 10-digit sequence number.
const WindowPrefix = "w-"

// Registration is what an operator asks for when creating a sequence. The
// zero value asks for the defaults.
type Registration struct {
	Start   int64 // first ID; 0 means DefaultStart
	End     int64 // last ID; 0 means MaxID
	Windows int   // open windows the primary keeps; 0 for none
}

// Register creates the znode of sequence name holding a registration; the
// primary initialises it. The root must exist. It fails if the sequence
// exists.
func (c *Client) Register(ctx context.Context, name string, r Registration) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st := State{Name: name, Registered: true, Start: r.Start, End: r.End, Windows: r.Windows}
	if st.Start == 0 {
		st.Start = DefaultStart
	}
	if st.End == 0 {
		st.End = MaxID
	}
	if err := st.Validate(); err != nil {
		return err
	}
	_, err := c.zk.Conn().Create(c.Path(name), st.Encode(), 0, c.opts.ACL)
	c.stats.requests.Add(1)
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("sequence %q already exists", name)
	}
	if err != nil {
		return c.zkError(name, err)
	}
	return nil
}

// Raise moves the reserved ceiling of sequence name up to ceiling (capped at
// the end of the space; it never lowers it) and returns the new state. A
// registration is initialised at its start value. Legacy counters have no
// ceiling and are refused.
//
// Raise is the primary's operation: it must be called only after the
// durable store has accepted ceiling, or invariant 2 (durable before usable)
// breaks. Tests use it to stand in for the primary. It retries conflicts
// with clients until ctx is done.
func (c *Client) Raise(ctx context.Context, name string, ceiling int64) (State, error) {
	return c.update(ctx, name, func(st *State) (bool, error) {
		if st.Legacy {
			return false, fmt.Errorf("sequence %q is a legacy 8-byte counter: it has no ceiling to raise", name)
		}
		if st.Registered {
			*st = State{Name: st.Name, Start: st.Start, Next: st.Start, Ceiling: st.Start - 1, End: st.End, Windows: st.Windows}
		}
		ceiling = min(ceiling, st.End)
		if ceiling <= st.Ceiling {
			return false, nil
		}
		st.Ceiling = ceiling
		return true, nil
	})
}

// update applies change to a freshly read state of sequence name and writes
// it back by compare-and-set, retrying conflicts. change reports whether it
// changed anything.
func (c *Client) update(ctx context.Context, name string, change func(*State) (bool, error)) (State, error) {
	if err := ValidateName(name); err != nil {
		return State{}, err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return State{}, err
		}
		if _, err := c.load(name, nd, false); err != nil {
			if retryable(err) {
				if err := backoff(ctx, attempt); err != nil {
					return State{}, err
				}
				continue
			}
			return State{}, err
		}
		st := nd.state
		changed, err := change(&st)
		if err != nil || !changed {
			return nd.state, err
		}
		if err := st.Validate(); err != nil {
			return State{}, err
		}
		stat, err := c.zk.Conn().Set(nd.path, st.Encode(), nd.version)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			nd.state, nd.version = st, stat.Version
			return st, nil
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
		case retryable(err):
			// A raise is idempotent: re-reading shows whether it landed.
			if err := backoff(ctx, attempt); err != nil {
				return State{}, err
			}
		default:
			return State{}, c.zkError(name, err)
		}
	}
}

// OpenWindow carves the next size fresh IDs of sequence name (fewer if the
// ceiling is nearer) into a new window znode, atomically with advancing the
// sequence's next, and returns the window's name. Windows only ever hold IDs
// below the durable ceiling, so a window's own ceiling is its end. It
// returns errAtCeiling wrapped with the name when nothing is left to carve.
func (c *Client) OpenWindow(ctx context.Context, name string, size int64) (string, error) {
	if size < 1 {
		return "", fmt.Errorf("sequence %q: window size %d must be at least 1", name, size)
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	nd := c.node(c.Path(name))
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if _, err := c.load(name, nd, false); err != nil {
			return "", err
		}
		st := nd.state
		if st.Legacy || st.Registered {
			return "", fmt.Errorf("sequence %q: windows need an initialised, non-legacy sequence", name)
		}
		k := min(size, st.fresh())
		if k < 1 {
			return "", fmt.Errorf("sequence %q: %w %d: no fresh IDs to open a window with", name, errAtCeiling, st.Ceiling)
		}
		w := State{Name: name, Start: st.Next, Next: st.Next, Ceiling: st.Next + k - 1, End: st.Next + k - 1}
		st.Next += k
		res, err := c.zk.Conn().Multi(
			&zk.CreateRequest{Path: nd.path + "/" + WindowPrefix, Data: w.Encode(), Acl: c.opts.ACL, Flags: zk.FlagSequence},
			&zk.SetDataRequest{Path: nd.path, Data: st.Encode(), Version: nd.version},
		)
		c.stats.requests.Add(1)
		switch {
		case err == nil:
			nd.valid = false // the child watch fired; re-read next time
			return strings.TrimPrefix(res[0].String, nd.path+"/"), nil
		case errors.Is(err, zk.ErrBadVersion):
			c.stats.conflicts.Add(1)
		default:
			// A lost reply may leave a window created: harmless, its IDs
			// are below the ceiling and taken from the sequence's next.
			return "", c.zkError(name, err)
		}
	}
}

// PruneWindows deletes the windows of sequence name that have handed out
// every ID, and returns how many windows remain open.
func (c *Client) PruneWindows(ctx context.Context, name string) (int, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	conn := c.zk.Conn()
	children, _, err := conn.Children(c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return 0, c.zkError(name, err)
	}
	open := 0
	for _, w := range windowNames(children) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		p := c.Path(name) + "/" + w
		data, stat, err := conn.Get(p)
		c.stats.requests.Add(1)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, c.zkError(name, err)
		}
		st, err := ParseState(name+"/"+w, data)
		if err != nil {
			return 0, err
		}
		if st.Available() > 0 {
			open++
			continue
		}
		err = conn.Delete(p, stat.Version)
		c.stats.requests.Add(1)
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return 0, c.zkError(name, err)
		}
	}
	return open, nil
}
