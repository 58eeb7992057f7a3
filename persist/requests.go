package persist

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Requests counts the backend requests a Store made: what an S3 bill
// counts (GETs and PUTs are billed per request, conflicts included).
type Requests struct {
	// Gets counts reads, found or not.
	Gets int64
	// Puts counts conditional writes, whatever their outcome.
	Puts int64
	// PutConflicts counts the Puts that failed their precondition (412):
	// billed, but they wrote nothing.
	PutConflicts int64
	// Deletes counts deletions of log segments (not billed by S3).
	Deletes int64
	// Lists counts listings (billed by S3 like a PUT, per page of 1,000
	// keys).
	Lists int64
}

// Requests returns the backend requests this Store has made so far.
func (s *Store) Requests() Requests {
	return Requests{
		Gets:         s.b.gets.Load(),
		Puts:         s.b.puts.Load(),
		PutConflicts: s.b.conflicts.Load(),
		Deletes:      s.b.deletes.Load(),
		Lists:        s.b.lists.Load(),
	}
}

// Health is what the Store's last backend requests said of the backend,
// with no request of its own: probes and status pages read it instead of
// calling the store.
type Health struct {
	// LastOK is when a request last got an answer from the backend (a
	// missing key and a failed precondition are answers); zero if never.
	LastOK time.Time
	// LastError is the last request's failure that was not an answer
	// (unreachable, denied, timed out), and LastErrorAt when it happened.
	LastError   error
	LastErrorAt time.Time
}

// Healthy reports whether the last request the backend answered came
// after the last failure. A store that has seen no request yet is not.
func (h Health) Healthy() bool {
	return !h.LastOK.IsZero() && !h.LastOK.Before(h.LastErrorAt)
}

// Last is the time of the latest request, answered or not.
func (h Health) Last() time.Time {
	if h.LastErrorAt.After(h.LastOK) {
		return h.LastErrorAt
	}
	return h.LastOK
}

// Health returns what the Store's requests so far said of its backend.
func (s *Store) Health() Health {
	h := Health{}
	if ok := s.b.lastOK.Load(); ok != 0 {
		h.LastOK = time.Unix(0, ok)
	}
	if f := s.b.lastFail.Load(); f != nil {
		h.LastError, h.LastErrorAt = f.err, f.at
	}
	return h
}

// counted is the Store's backend with its requests counted and their
// outcomes remembered (Health).
type counted struct {
	Backend
	gets, puts, conflicts, deletes, lists atomic.Int64
	lastOK                                atomic.Int64 // unix nanoseconds
	lastFail                              atomic.Pointer[failure]
	observe                               atomic.Pointer[func(op string, d time.Duration)]
}

// ObserveRequests makes the Store call fn after every backend request
// with its kind ("get", "put", "delete", "list") and how long it took, failed or
// not (for a latency histogram). Set it before the Store is used.
func (s *Store) ObserveRequests(fn func(op string, d time.Duration)) { s.b.observe.Store(&fn) }

type failure struct {
	err error
	at  time.Time
}

// outcome records whether err is an answer from the backend. A request
// cancelled by its caller says nothing about the backend.
func (c *counted) outcome(op string, start time.Time, err error) {
	if fn := c.observe.Load(); fn != nil {
		(*fn)(op, time.Since(start))
	}
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
		c.lastOK.Store(time.Now().UnixNano())
	case errors.Is(err, context.Canceled):
	default:
		c.lastFail.Store(&failure{err: err, at: time.Now()})
	}
}

func (c *counted) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	start := time.Now()
	data, etag, err := c.Backend.Get(ctx, key)
	c.outcome("get", start, err)
	return data, etag, err
}

func (c *counted) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	c.puts.Add(1)
	start := time.Now()
	etag, err := c.Backend.Put(ctx, key, data, ifMatch)
	if errors.Is(err, ErrConflict) {
		c.conflicts.Add(1)
	}
	c.outcome("put", start, err)
	return etag, err
}

func (c *counted) Delete(ctx context.Context, key string) error {
	c.deletes.Add(1)
	start := time.Now()
	err := c.Backend.Delete(ctx, key)
	c.outcome("delete", start, err)
	return err
}

func (c *counted) List(ctx context.Context, prefix string) ([]string, error) {
	c.lists.Add(1)
	start := time.Now()
	keys, err := c.Backend.List(ctx, prefix)
	c.outcome("list", start, err)
	return keys, err
}
