package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/persist"
)

// The store hook of the operator commands (see hooks.go), backed by
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
