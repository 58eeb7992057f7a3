package main

import (
	"context"
	"errors"

	"github.com/seqkeeper/seqkeeper/config"
)

// Store hook. describe reads the stored ceiling through this function,
// which store.go fills in from an init function; cfg.Store is never empty
// when it is called. Until it is set, describe shows "stored ceiling:
// (store support not wired into this build)".
var (
	// storeCeiling returns the ceiling the store holds for sequence name,
	// or an error wrapping errNotInStore when it holds none.
	storeCeiling storeCeilingFunc
)

// storeCeilingFunc is the type of the storeCeiling hook.
type storeCeilingFunc func(ctx context.Context, cfg *config.Config, name string) (int64, error)

var (
	// errNotInStore is wrapped by storeCeiling when the store has no
	// record of the sequence (not yet picked up by a primary).
	errNotInStore = errors.New("no record in the store")
)
