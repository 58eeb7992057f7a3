package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/persist"
)

// The store hooks of the operator commands (see hooks.go), backed by
// package persist.
func init() {
	storeCeiling = func(ctx context.Context, cfg *config.Config, name string) (int64, error) {
		s, err := openStore(ctx, cfg, false)
		if err != nil {
			return 0, err
		}
		rec, err := s.Get(ctx, name)
		if errors.Is(err, persist.ErrNotFound) {
			return 0, fmt.Errorf("%w: %v", errNotInStore, err)
		}
		if err != nil {
			return 0, err
		}
		return rec.Ceiling, nil
	}
	tombstone = writeTombstone
}

// openStore opens the store named by cfg.Store. With create, a missing
// bucket or directory is created (serve); the operator commands never
// create one, so a typo fails instead of reading an empty store.
func openStore(ctx context.Context, cfg *config.Config, create bool) (*persist.Store, error) {
	b, err := persist.Open(ctx, cfg.Store, persist.OpenOptions{Create: create})
	if err != nil {
		if errors.Is(err, persist.ErrBadURL) {
			return nil, &usageError{err}
		}
		return nil, err
	}
	return persist.NewStore(b, persist.StoreOptions{})
}

// writeTombstone records that sequence name is deleted, with ceiling, and
// returns once the store has accepted it. It writes as the current leader
// epoch: the tombstone merges by max like every record, so it can neither
// lower a ceiling nor fence the primary.
func writeTombstone(ctx context.Context, cfg *config.Config, name string, ceiling int64) error {
	s, err := openStore(ctx, cfg, false)
	if err != nil {
		return err
	}
	epoch, _, err := s.Epoch(ctx)
	if err != nil {
		return err
	}
	rec, err := s.Get(ctx, name)
	if err != nil && !errors.Is(err, persist.ErrNotFound) {
		return err
	}
	rec.Name, rec.Deleted = name, true
	rec.Ceiling = max(rec.Ceiling, ceiling)
	return s.Put(ctx, epoch, rec)
}
