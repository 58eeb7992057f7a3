package main

import (
	"context"
	"errors"

	"github.com/seqkeeper/seqkeeper/config"
)

// Store hooks. The operator commands read ZooKeeper themselves; what needs
// the durable store goes through these two functions, which the file that
// wires the persist package fills in from an init function:
//
//	func init() {
//		storeCeiling = func(ctx context.Context, cfg *config.Config, name string) (int64, error) { ... }
//		tombstone = func(ctx context.Context, cfg *config.Config, name string, ceiling int64) error { ... }
//	}
//
// cfg.Store is never empty when they are called. Until they are set,
// describe shows "stored ceiling: (store support not wired into this
// build)" and delete fails with errNotWired.
var (
	// storeCeiling returns the ceiling the store holds for sequence name,
	// or an error wrapping errNotInStore when it holds none.
	storeCeiling storeCeilingFunc

	// tombstone records in the store that sequence name is deleted with
	// ceiling, merging by max with what the store holds, so that a
	// sequence created later under the same name starts above every ID
	// the old one issued. It must return only once the store has durably
	// accepted the write: delete removes the znode right after.
	tombstone tombstoneFunc
)

// storeCeilingFunc is the type of the storeCeiling hook.
type storeCeilingFunc func(ctx context.Context, cfg *config.Config, name string) (int64, error)

// tombstoneFunc is the type of the tombstone hook.
type tombstoneFunc func(ctx context.Context, cfg *config.Config, name string, ceiling int64) error

var (
	// errNotInStore is wrapped by storeCeiling when the store has no
	// record of the sequence (not yet picked up by a primary).
	errNotInStore = errors.New("no record in the store")

	// errNotWired reports a command that needs a store hook this build
	// lacks.
	errNotWired = errors.New("this build of seqkeeper has no store support wired in yet")
)
