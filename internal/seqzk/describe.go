package seqzk

import (
	"context"
	"sort"
	"strings"

	"github.com/seqkeeper/seqkeeper/sequence/state"
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
	data, _, err := s.Get(ctx, c.Path(name))
	c.stats.requests.Add(1)
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
