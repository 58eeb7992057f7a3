package seqzk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/seqkeeper/seqkeeper/sequence/state"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Describe reads the current state of sequence name from ZooKeeper,
// bypassing the cache, and the names of its open windows. It sets no
// watches, so polling it costs nothing beyond the two reads.
func (c *Client) Describe(ctx context.Context, name string) (state.State, []string, error) {
	if err := ValidateName(name); err != nil {
		return state.State{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return state.State{}, nil, err
	}
	s := c.zk.Session()
	data, _, err := c.get(ctx, s, c.Path(name))
	if err != nil {
		return state.State{}, nil, c.zkError(name, err)
	}
	st, err := state.ParseState(name, data)
	if err != nil {
		return state.State{}, nil, err
	}
	children, _, err := s.Children(ctx, c.Path(name))
	c.stats.requests.Add(1)
	if err != nil {
		return state.State{}, nil, c.zkError(name, err)
	}
	sort.Strings(children)
	return st, childrenWith(children, state.WindowPrefix), nil
}

// childrenWith filters a sequence znode's children down to those whose
// names start with prefix: state.WindowPrefix or MarkerPrefix.
func childrenWith(children []string, prefix string) []string {
	var out []string
	for _, ch := range children {
		if strings.HasPrefix(ch, prefix) {
			out = append(out, ch)
		}
	}
	return out
}

// Window is one open window of a sequence, as Inspect reads it.
type Window struct {
	Name  string
	State state.State
}

// Inspect reads sequence name and each of its open windows from ZooKeeper,
// bypassing the cache and setting no watches: the read model of describe
// and list. A window deleted between the listing and its read is left out.
func (c *Client) Inspect(ctx context.Context, name string) (state.State, []Window, error) {
	st, windows, err := c.Describe(ctx, name)
	if err != nil {
		return state.State{}, nil, err
	}
	s := c.zk.Session()
	out := make([]Window, 0, len(windows))
	for _, w := range windows {
		if err := ctx.Err(); err != nil {
			return state.State{}, nil, err
		}
		data, _, err := s.Get(ctx, c.Path(name)+"/"+w)
		c.stats.requests.Add(1)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // pruned meanwhile
		}
		if err != nil {
			return state.State{}, nil, fmt.Errorf("sequence %q: read window %s: %w", name, w, err)
		}
		ws, err := state.ParseState(name+"/"+w, data)
		if err != nil {
			return state.State{}, nil, err
		}
		out = append(out, Window{Name: w, State: ws})
	}
	return st, out, nil
}

// Names lists the children of the root, sorted: the sequences, and any
// znode that is not a valid sequence name (the caller decides), except the
// root's own znode (MetaName). A missing root is an error wrapping
// ErrUnknownSequence. A listing says of every name it lacks that it does
// not exist, so it is made after a sync with the ZooKeeper leader: it
// holds every name whose create returned before Names began, through any
// server.
func (c *Client) Names(ctx context.Context) ([]string, error) {
	names, err := c.children(ctx)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// children lists the root without its own znode.
func (c *Client) children(ctx context.Context) ([]string, error) {
	s := c.zk.Session()
	if err := c.sync(ctx, s, c.opts.Root); err != nil {
		return nil, err
	}
	names, _, err := s.Children(ctx, c.opts.Root)
	c.stats.requests.Add(1)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, fmt.Errorf("%w: the root %s does not exist: no sequence was created under it yet ('seqkeeper create NAME'), or --root is wrong",
			ErrUnknownSequence, c.opts.Root)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.opts.Root, err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == MetaName }), nil
}
