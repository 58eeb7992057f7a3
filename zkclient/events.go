package zkclient

import (
	"strings"
	"sync"

	"github.com/seqkeeper/seqkeeper/zkclient/internal/zk"
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

// dispatch stamps a node event of connection generation gen and hands it
// to the queues whose prefix covers its path, unless gen is no longer the
// client's. It runs on that connection's event loop.
func (c *Client) dispatch(gen int64, zev zk.Event) {
	ev := event(zev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	c.stamp++
	ev.Stamp = c.stamp
	for q := range c.queues {
		if ev.Path == q.prefix || strings.HasPrefix(ev.Path, q.prefix+"/") {
			q.push(ev)
		}
	}
}

// stampAt is the last stamp dispatched, called on the event loop of
// connection generation gen as a reply arrives there (OpResult.Stamp); 0
// when gen is no longer the client's. Under mu, as dispatch: a stamp taken
// while gen is current is below every stamp of a later connection, whose
// notifications may be of writes after the reply.
func (c *Client) stampAt(gen int64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return 0
	}
	return c.stamp
}

// Event is a watch notification.
type Event struct {
	Type EventType
	// Path is the watched znode.
	Path string
	// Err is set on EventNotWatching: why the watch was lost (ErrClosing
	// when its connection was closed, ErrSessionExpired, ...).
	Err error
	// Stamp numbers the notifications the client dispatched to its queues
	// (NodeEvents), from 1, in the order they arrived, over every
	// connection: compare it with OpResult.Stamp. 0 on the events of a
	// watch's channel.
	Stamp uint64
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

// watches are the watch channels handed out on one connection. go-zookeeper
// reports every watch notification, and every watch lost with the
// connection or session, to the event callback before it delivers the reply
// of any later request; the callback fires these channels synchronously, so
// the channels keep that order. (Forwarding go-zookeeper's own channels
// through a goroutine would lose it.)
type watches struct {
	mu sync.Mutex
	m  map[watchKey][]chan Event
}

type watchKind uint8

const (
	dataWatch  watchKind = iota // GetW, ExistsW
	childWatch                  // ChildrenW
)

type watchKey struct {
	path string
	kind watchKind
}

// add registers a channel before the request that sets the watch is sent,
// so that no notification can come in between. A notification of an older
// watch on the same znode then fires it early: a spurious wake-up, never a
// missed one.
func (w *watches) add(path string, kind watchKind) chan Event {
	ch := make(chan Event, 1)
	w.mu.Lock()
	w.m[watchKey{path, kind}] = append(w.m[watchKey{path, kind}], ch)
	w.mu.Unlock()
	return ch
}

// remove drops a channel whose request failed.
func (w *watches) remove(path string, kind watchKind, ch chan Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := watchKey{path, kind}
	for i, c := range w.m[k] {
		if c == ch {
			w.m[k] = append(w.m[k][:i:i], w.m[k][i+1:]...)
			break
		}
	}
	if len(w.m[k]) == 0 {
		delete(w.m, k)
	}
}

// fire delivers a notification to the channels it ends, as ZooKeeper
// triggers watches: data watches on creation, change and deletion, child
// watches on a change of children and deletion, all of them when the watch
// is lost. It never blocks: each channel has room for its one event.
func (w *watches) fire(zev zk.Event) {
	var kinds []watchKind
	switch zev.Type {
	case zk.EventNodeCreated, zk.EventNodeDataChanged:
		kinds = []watchKind{dataWatch}
	case zk.EventNodeChildrenChanged:
		kinds = []watchKind{childWatch}
	case zk.EventNodeDeleted, zk.EventNotWatching:
		kinds = []watchKind{dataWatch, childWatch}
	default:
		return
	}
	ev := event(zev)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, kind := range kinds {
		k := watchKey{zev.Path, kind}
		for _, ch := range w.m[k] {
			ch <- ev
			close(ch)
		}
		delete(w.m, k)
	}
}
