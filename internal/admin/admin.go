// Package admin creates and deletes sequences: the operations that the
// `seqkeeper create` and `seqkeeper delete` commands and the HTTP API's
// admin routes (POST /v1/sequences, DELETE /v1/sequences/{name}) share, so
// that both ask the same questions and give the same answers.
package admin

import (
	"context"

	"github.com/seqkeeper/seqkeeper/internal/primary"
	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"
)

var (
	// ErrInvalid reports settings no sequence can have (a negative start,
	// a max below the start, too many windows). Nothing was changed.
	ErrInvalid = seqzk.ErrInvalidSettings
	// ErrOtherSettings reports a create of a name that exists with other
	// settings. It matches seqzk.ErrExists too. Nothing was changed.
	ErrOtherSettings = seqzk.ErrOtherSettings
)

// Check returns an error matching ErrInvalid when r asks for settings no
// sequence can have; field names the settings as the caller's user knows
// them (a flag "--start" or a JSON field "start").
func Check(r seqzk.Registration, field func(string) string) error { return r.Check(field) }

// Resolved returns r with its defaults filled in: the start and end the
// sequence gets.
func Resolved(r seqzk.Registration) seqzk.Registration { return r.Resolved() }

// Create registers sequence name with settings r: see seqzk.Operator.Create.
func Create(ctx context.Context, seqs *seqzk.Client, name string, r seqzk.Registration) (created bool, err error) {
	return seqs.Operator().Create(ctx, name, r)
}

// Service carries out creates and deletes for the HTTP API's admin routes
// (it implements httpapi.Admin).
type Service struct {
	Sequences *seqzk.Client
	// Store receives the tombstone of a deleted sequence once its znode
	// is gone.
	Store *persist.Store
}

// Create registers a sequence; see the package function Create.
func (s *Service) Create(ctx context.Context, name string, r seqzk.Registration) (bool, error) {
	return Create(ctx, s.Sequences, name, r)
}

// Delete removes sequence name from ZooKeeper, then tombstones it in the
// store (primary.Delete), and returns the tombstone's ceiling.
func (s *Service) Delete(ctx context.Context, name string) (int64, error) {
	return primary.Delete(ctx, s.Sequences, s.Store, name)
}
