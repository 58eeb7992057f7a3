package persist

import (
	"context"
	"errors"
	"sync/atomic"
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
}

// Requests returns the backend requests this Store has made so far.
func (s *Store) Requests() Requests {
	return Requests{
		Gets:         s.b.gets.Load(),
		Puts:         s.b.puts.Load(),
		PutConflicts: s.b.conflicts.Load(),
		Deletes:      s.b.deletes.Load(),
	}
}

// counted is the Store's backend with its requests counted.
type counted struct {
	Backend
	gets, puts, conflicts, deletes atomic.Int64
}

func (c *counted) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, key)
}

func (c *counted) Put(ctx context.Context, key string, data []byte, ifMatch string) (string, error) {
	c.puts.Add(1)
	etag, err := c.Backend.Put(ctx, key, data, ifMatch)
	if errors.Is(err, ErrConflict) {
		c.conflicts.Add(1)
	}
	return etag, err
}

func (c *counted) Delete(ctx context.Context, key string) error {
	c.deletes.Add(1)
	return c.Backend.Delete(ctx, key)
}
