package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seqkeeper/seqkeeper/internal/backoff"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// Leader returns the identity of the current primary as ZooKeeper sees it:
// the lowest candidate (see the package doc for what that does not
// promise). It returns ErrNoLeader when there is no candidate. It does not
// need Run and works from any replica or tool sharing Path. Cancelling ctx
// stops waiting for ZooKeeper.
func (e *Election) Leader(ctx context.Context) (Identity, error) {
	id, _, err := e.current(ctx, false)
	return id, err
}

// Observe returns a channel that receives the current primary's identity at
// once and again every time it changes, the zero Identity while there is
// none. Values are not buffered: a slow reader may skip intermediate
// leaders, or get one that was already replaced, but the last value it gets
// is always the current one. The channel is closed when ctx is done.
// Observers watch only the lowest candidate (or, when there is none, the
// directory), so they are woken only when the primary changes.
func (e *Election) Observe(ctx context.Context) <-chan Identity {
	out := make(chan Identity)
	go func() {
		defer close(out)
		changes, stop := e.client.Changes()
		defer stop()
		pause := backoff.Policy{Initial: 50 * time.Millisecond, Max: max(e.lossAfter, 100*time.Millisecond)}
		failures := 0
		var last *Identity
		for ctx.Err() == nil {
			id, changed, err := e.current(ctx, true)
			if errors.Is(err, ErrNoLeader) {
				err = nil // changed watches the directory
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				e.log.Debug().Err(err).Msg("election: observe: cannot read the leader; retrying")
				select {
				case <-time.After(pause.Delay(failures)):
				case <-changes:
				case <-ctx.Done():
					return
				}
				failures++
				continue
			}
			failures = 0
			if last == nil || *last != id {
				select {
				case out <- id:
					last = &id
				case <-ctx.Done():
					return
				}
			}
			// Session expiry ends every watch with EventNotWatching, so
			// the watch alone covers every change.
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// current reads the lowest candidate's identity. With watch, it also
// returns a channel that fires when the answer may have changed: a data
// watch on the lowest candidate (nobody can queue ahead of it, so only its
// departure changes the leader), or a child watch on the directory when
// there is no candidate.
func (e *Election) current(ctx context.Context, watch bool) (Identity, <-chan zkclient.Event, error) {
	type listing struct {
		children []string
		ch       <-chan zkclient.Event
	}
	type read struct {
		data []byte
		ch   <-chan zkclient.Event
	}
	for {
		l, err := call(ctx, e, func(s zkclient.Session) (listing, error) {
			names, _, err := s.Children(ctx, e.path)
			return listing{children: names}, err
		})
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return Identity{}, nil, err
		}
		queue := sortedCandidates(l.children)
		if len(queue) == 0 {
			if !watch {
				return Identity{}, nil, ErrNoLeader
			}
			// Watch the directory, and look again in case a candidate
			// arrived between the two reads.
			l, err = call(ctx, e, func(s zkclient.Session) (listing, error) {
				children, _, ch, err := s.ChildrenW(ctx, e.path)
				return listing{children, ch}, err
			})
			if errors.Is(err, zkclient.ErrNoNode) {
				// No directory yet: wait for it (an exists watch fires on
				// its creation).
				l, err = call(ctx, e, func(s zkclient.Session) (listing, error) {
					ok, _, ch, err := s.ExistsW(ctx, e.path)
					if ok {
						ch = closedEvents
					}
					return listing{ch: ch}, err
				})
				if err != nil {
					return Identity{}, nil, err
				}
				return Identity{}, l.ch, ErrNoLeader
			}
			if err != nil {
				return Identity{}, nil, err
			}
			if len(sortedCandidates(l.children)) == 0 {
				return Identity{}, l.ch, ErrNoLeader
			}
			continue
		}
		p := e.path + "/" + queue[0].name
		r, err := call(ctx, e, func(s zkclient.Session) (read, error) {
			if watch {
				data, _, ch, err := s.GetW(ctx, p)
				return read{data, ch}, err
			}
			data, _, err := s.Get(ctx, p)
			return read{data: data}, err
		})
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // it just left
		}
		if err != nil {
			return Identity{}, nil, err
		}
		var id Identity
		if err := json.Unmarshal(r.data, &id); err != nil {
			return Identity{}, r.ch, fmt.Errorf("election: leader node %s: identity %q: %w", p, r.data, err)
		}
		return id, r.ch, nil
	}
}

// closedEvents is a channel that is always ready, for a watch that would
// fire at once.
var closedEvents = func() <-chan zkclient.Event {
	ch := make(chan zkclient.Event)
	close(ch)
	return ch
}()

// Candidate is one replica in an election's queue.
type Candidate struct {
	Identity
	// Node is the candidate node's full path.
	Node string `json:"node"`
}

// Candidates reads the election under path with the client c, and returns
// its candidates in queue order: the first leads (as Leader says), the
// second takes over when it leaves. A candidate whose node is gone by the
// time it is read is left out; one whose identity does not decode is an
// error. An empty directory, or none, gives an empty list. It needs no
// Election: a replica and a command-line tool read an election alike.
func Candidates(ctx context.Context, c *zkclient.Client, path string) ([]Candidate, error) {
	names, _, err := c.Session().Children(ctx, path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("election: read the candidates under %s: %w", path, err)
	}
	var out []Candidate
	for _, e := range sortedCandidates(names) {
		p := path + "/" + e.name
		data, _, err := c.Session().Get(ctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // it just left
		}
		if err != nil {
			return nil, fmt.Errorf("election: read the candidate %s: %w", p, err)
		}
		var id Identity
		if err := json.Unmarshal(data, &id); err != nil || id.ID == "" {
			return nil, fmt.Errorf("election: the candidate node %s does not hold a replica identity (%q): is something else using %s?", p, data, path)
		}
		out = append(out, Candidate{Identity: id, Node: p})
	}
	return out, nil
}
