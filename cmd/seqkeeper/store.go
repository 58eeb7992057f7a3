package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/persist"
)

// storeCeilingFunc returns the ceiling the store named by cfg holds for
// sequence name, or an error wrapping errNotInStore when it holds none.
// describe reads the stored ceiling through one (globals.storeCeiling);
// cfg.Store is never empty when it is called.
type storeCeilingFunc func(ctx context.Context, cfg *config.Config, name string) (int64, error)

// errNotInStore is wrapped by a storeCeilingFunc when the store has no
// record of the sequence (not yet picked up by a primary).
var errNotInStore = errors.New("no record in the store")

// storeCeiling is the storeCeilingFunc of the real process: it opens the
// store and reads the sequence's record.
func storeCeiling(ctx context.Context, cfg *config.Config, name string) (int64, error) {
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

// openStore opens the store named by cfg.Store (host.OpenStore), its
// configuration errors usage errors.
func openStore(ctx context.Context, cfg *config.Config, create bool) (*persist.Store, error) {
	s, err := host.OpenStore(ctx, cfg, persist.OpenOptions{Create: create}, buildVersion())
	if err != nil {
		return nil, usageIfConfig(err)
	}
	return s, nil
}

// usageIfConfig makes a host.ConfigError (an error the configuration
// causes) a usage error (exit 2), and returns any other error as it is.
func usageIfConfig(err error) error {
	var ce *host.ConfigError
	if errors.As(err, &ce) {
		return &usageError{ce.Err}
	}
	return err
}
