package zkclient

import (
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// EventQueue is an unbounded queue of watch notifications for one
// subscriber. The ZooKeeper event loop only appends under a short lock, so a
// slow subscriber never stalls ZooKeeper traffic; it must still drain the
// queue, or memory grows.
type EventQueue struct {
	prefix string
	mu     sync.Mutex
	items  []Event
	signal chan struct{}
}

// Ready receives a value whenever events are waiting (signals coalesce).
func (q *EventQueue) Ready() <-chan struct{} { return q.signal }

// Drain returns the waiting events, oldest first, and empties the queue.
func (q *EventQueue) Drain() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

func (q *EventQueue) push(ev Event) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// NodeEvents subscribes to the watch notifications (data changed, children
// changed, created, deleted, and "not watching" when a lost session voids
// watches) for paths equal to prefix or below it. Watches themselves are
// still set with the usual calls (GetW, ChildrenW, ExistsW); their one-shot
// channels may then be ignored. The returned function unsubscribes.
//
// Delivering every notification through one queue lets a component keep
// thousands of watches with one goroutine instead of one per watch channel.
func (c *Client) NodeEvents(prefix string) (*EventQueue, func()) {
	q := &EventQueue{prefix: prefix, signal: make(chan struct{}, 1)}
	c.mu.Lock()
	c.queues[q] = struct{}{}
	c.mu.Unlock()
	return q, func() {
		c.mu.Lock()
		delete(c.queues, q)
		c.mu.Unlock()
	}
}

// dispatch hands a node event to the queues whose prefix covers its path.
// It runs on the ZooKeeper event loop.
func (c *Client) dispatch(zev zk.Event) {
	ev := event(zev)
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.queues {
		if ev.Path == q.prefix || strings.HasPrefix(ev.Path, q.prefix+"/") {
			q.push(ev)
		}
	}
}

// Event is a watch notification.
type Event struct {
	Type EventType
	// Path is the watched znode.
	Path string
	// Err is set on EventNotWatching: why the watch was lost (ErrClosing
	// when its connection was closed, ErrSessionExpired, ...).
	Err error
}

// EventType tells what happened to a watched znode.
type EventType int32

// The event types. EventNotWatching means the watch itself was lost with its
// connection or session: the znode may have changed unseen.
const (
	EventNodeCreated         = EventType(zk.EventNodeCreated)
	EventNodeDeleted         = EventType(zk.EventNodeDeleted)
	EventNodeDataChanged     = EventType(zk.EventNodeDataChanged)
	EventNodeChildrenChanged = EventType(zk.EventNodeChildrenChanged)
	EventNotWatching         = EventType(zk.EventNotWatching)
)

func (t EventType) String() string { return zk.EventType(t).String() }

func event(ev zk.Event) Event { return Event{Type: EventType(ev.Type), Path: ev.Path, Err: ev.Err} }

// watch turns a go-zookeeper watch channel into one of Events. Like the one
// it wraps, it receives at most one event and is then closed.
func watch(in <-chan zk.Event) <-chan Event {
	if in == nil {
		return nil
	}
	out := make(chan Event, 1)
	go func() {
		defer close(out)
		if ev, ok := <-in; ok {
			out <- event(ev)
		}
	}()
	return out
}
